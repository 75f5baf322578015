import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.*;

/** Every message of the given topics as a Reader (read-committed) gets it, one JSON line each: args = brokerUrl topic... */
public class Dump {
  static String hex(byte[] b) {
    if (b == null) return "null";
    StringBuilder s = new StringBuilder("\"");
    for (byte x : b) s.append(String.format("%02x", x));
    return s.append('"').toString();
  }

  static String js(String s) {
    return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }

  public static void main(String[] a) throws Exception {
    PulsarClient c = PulsarClient.builder().serviceUrl(a[0]).build();
    for (int k = 1; k < a.length; k++) {
      String t = a[k];
      Reader<byte[]> r = c.newReader().topic(t).startMessageId(MessageId.earliest).create();
      while (r.hasMessageAvailable()) {
        Message<byte[]> m = r.readNext(10, TimeUnit.SECONDS);
        if (m == null) break;
        StringBuilder p = new StringBuilder("{");
        for (Map.Entry<String, String> e : new TreeMap<>(m.getProperties()).entrySet()) {
          if (p.length() > 1) p.append(",");
          p.append(js(e.getKey())).append(":").append(js(e.getValue()));
        }
        System.out.println("REC {\"topic\":" + js(t) + ",\"id\":" + js(m.getMessageId().toString())
            + ",\"key\":" + js(m.hasKey() ? m.getKey() : null) + ",\"props\":" + p.append("}")
            + ",\"data\":" + hex(m.getData()) + ",\"publish_time\":" + m.getPublishTime()
            + ",\"event_time\":" + m.getEventTime() + ",\"seq\":" + m.getSequenceId()
            + ",\"producer\":" + js(m.getProducerName()) + ",\"index\":" + m.getIndex().orElse(-1L)
            + ",\"broker_time\":" + m.getBrokerPublishTime().orElse(-1L) + "}");
      }
      r.close();
    }
    c.close();
  }
}
