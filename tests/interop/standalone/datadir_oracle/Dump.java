import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.*;

/** Every message of the given topics as a Reader (read-committed) gets it, one JSON line each: args = brokerUrl topic...
 *
 * <p>A topic is read again from the start when a step times out: on a loaded machine a restarted 4.0.7 broker can
 * time out recovering a topic's transaction buffer (TableView.wait), close the topic under the reader, and leave
 * hasMessageAvailable() waiting forever. Lines are printed only once a topic was read to its end. */
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
      for (int attempt = 1; ; attempt++) {
        List<String> out = new ArrayList<>();
        Reader<byte[]> r = null;
        try {
          r = c.newReader().topic(t).startMessageId(MessageId.earliest).createAsync().get(120, TimeUnit.SECONDS);
          read(r, t, out);
          out.forEach(System.out::println);
          r.closeAsync();
          break;
        } catch (Exception e) {
          System.err.println("RETRY " + t + " attempt " + attempt + ": " + e);
          if (r != null) r.closeAsync();
          if (attempt == 4) throw e;
        }
      }
    }
    try {
      c.closeAsync().get(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      System.err.println("client close: " + e);
    }
    System.exit(0); // a reader abandoned by a retry must not keep the JVM alive
  }

  static void read(Reader<byte[]> r, String t, List<String> out) throws Exception {
      while (r.hasMessageAvailableAsync().get(90, TimeUnit.SECONDS)) {
        Message<byte[]> m = r.readNext(30, TimeUnit.SECONDS);
        if (m == null) throw new java.util.concurrent.TimeoutException("readNext returned nothing though a message was available");
        StringBuilder p = new StringBuilder("{");
        for (Map.Entry<String, String> e : new TreeMap<>(m.getProperties()).entrySet()) {
          if (p.length() > 1) p.append(",");
          p.append(js(e.getKey())).append(":").append(js(e.getValue()));
        }
        out.add("REC {\"topic\":" + js(t) + ",\"id\":" + js(m.getMessageId().toString())
            + ",\"key\":" + js(m.hasKey() ? m.getKey() : null) + ",\"props\":" + p.append("}")
            + ",\"data\":" + hex(m.getData()) + ",\"publish_time\":" + m.getPublishTime()
            + ",\"event_time\":" + m.getEventTime() + ",\"seq\":" + m.getSequenceId()
            + ",\"producer\":" + js(m.getProducerName()) + ",\"index\":" + m.getIndex().orElse(-1L)
            + ",\"broker_time\":" + m.getBrokerPublishTime().orElse(-1L) + "}");
      }
  }
}
