// Encodes topic-policy events as a Pulsar broker writes them to a namespace's __change_events topic:
// PulsarEvent values through the client's AVRO schema of that class (Pulsar's own jars on the classpath).
// Prints one JSON object: the schema's JSON and each named event's bytes in hex. Used by
// tests/analysis/test_topic_policies.py to check the stored fixture (events.json) against Pulsar.
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.common.events.ActionType;
import org.apache.pulsar.common.events.EventType;
import org.apache.pulsar.common.events.PulsarEvent;
import org.apache.pulsar.common.events.TopicPoliciesEvent;
import org.apache.pulsar.common.policies.data.RetentionPolicies;
import org.apache.pulsar.common.policies.data.TopicPolicies;

public class EncodeEvents {
    static final Schema<PulsarEvent> SCHEMA = Schema.AVRO(PulsarEvent.class);
    static final StringBuilder OUT = new StringBuilder();

    static void event(String name, ActionType action, String topic, TopicPolicies policies) {
        TopicPoliciesEvent tpe = TopicPoliciesEvent.builder()
                .domain("persistent").tenant("t").namespace("pol").topic(topic).policies(policies).build();
        PulsarEvent e = PulsarEvent.builder()
                .actionType(action).eventType(EventType.TOPIC_POLICY).topicPoliciesEvent(tpe).build();
        StringBuilder hex = new StringBuilder();
        for (byte b : SCHEMA.encode(e)) {
            hex.append(String.format("%02x", b));
        }
        OUT.append(OUT.length() == 0 ? "" : ",\n").append("  \"").append(name).append("\": \"").append(hex).append('"');
    }

    static TopicPolicies retention(int minutes, long mb, boolean global) {
        return TopicPolicies.builder().retentionPolicies(new RetentionPolicies(minutes, mb)).isGlobal(global).build();
    }

    public static void main(String[] args) {
        event("a_forever", ActionType.UPDATE, "a", retention(-1, -1, false));
        event("b_global_week", ActionType.UPDATE, "b", retention(7 * 24 * 60, -1, true));
        event("b_local_ttl", ActionType.UPDATE, "b", TopicPolicies.builder().messageTTLInSeconds(3600).build());
        event("c_forever", ActionType.UPDATE, "c", retention(-1, -1, false));
        event("d_insert_forever", ActionType.INSERT, "d", retention(-1, -1, false));
        event("d_insert_zero", ActionType.INSERT, "d", retention(0, 0, false));
        event("e_forever", ActionType.UPDATE, "e", retention(-1, -1, false));
        event("e_delete", ActionType.DELETE, "e", null);
        event("p_forever", ActionType.UPDATE, "p", retention(-1, -1, false));
        String schema = new String(SCHEMA.getSchemaInfo().getSchema(), java.nio.charset.StandardCharsets.UTF_8);
        System.out.println("{\"schema\": " + schema + ",\n \"events\": {\n" + OUT + "\n}}");
    }
}
