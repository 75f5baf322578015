import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.*;

/** What a readCompacted Reader gets from each topic: the last message id the broker answers, whether a
 * message is available before the first read, then every message. args = brokerUrl topic...
 * A topic is read again from the start when a step times out (see Dump.java for why). */
public class CompactedDump {
  static String id(MessageId m) {
    if (m instanceof MessageIdAdv) {
      MessageIdAdv a = (MessageIdAdv) m;
      return a.getLedgerId() + ":" + a.getEntryId() + ":" + a.getBatchIndex();
    }
    return m.toString();
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
          r = c.newReader().topic(t).startMessageId(MessageId.earliest).readCompacted(true).createAsync()
              .get(120, TimeUnit.SECONDS);
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
      StringBuilder last = new StringBuilder();
      for (TopicMessageId m : r.getLastMessageIdsAsync().get(90, TimeUnit.SECONDS)) last.append(last.length() > 0 ? "," : "").append(js(id(m)));
      out.add("CMPLAST {\"topic\":" + js(t) + ",\"last\":[" + last + "],\"available\":"
          + r.hasMessageAvailableAsync().get(90, TimeUnit.SECONDS) + "}");
      while (r.hasMessageAvailableAsync().get(90, TimeUnit.SECONDS)) {
        Message<byte[]> m = r.readNext(30, TimeUnit.SECONDS);
        if (m == null) throw new java.util.concurrent.TimeoutException("readNext returned nothing though a message was available");
        StringBuilder hex = new StringBuilder();
        for (byte x : m.getData()) hex.append(String.format("%02x", x));
        out.add("CMPMSG {\"topic\":" + js(t) + ",\"id\":" + js(id(m.getMessageId())) + ",\"key\":"
            + js(m.hasKey() ? m.getKey() : null) + ",\"data\":\"" + hex + "\"}");
      }
  }
}
