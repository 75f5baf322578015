import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.*;

/** What a readCompacted Reader gets from each topic: the last message id the broker answers, whether a
 * message is available before the first read, then every message. args = brokerUrl topic... */
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
      Reader<byte[]> r = c.newReader().topic(t).startMessageId(MessageId.earliest).readCompacted(true).create();
      StringBuilder last = new StringBuilder();
      for (TopicMessageId m : r.getLastMessageIds()) last.append(last.length() > 0 ? "," : "").append(js(id(m)));
      System.out.println("CMPLAST {\"topic\":" + js(t) + ",\"last\":[" + last + "],\"available\":" + r.hasMessageAvailable() + "}");
      while (r.hasMessageAvailable()) {
        Message<byte[]> m = r.readNext(10, TimeUnit.SECONDS);
        if (m == null) break;
        StringBuilder hex = new StringBuilder();
        for (byte x : m.getData()) hex.append(String.format("%02x", x));
        System.out.println("CMPMSG {\"topic\":" + js(t) + ",\"id\":" + js(id(m.getMessageId())) + ",\"key\":"
            + js(m.hasKey() ? m.getKey() : null) + ",\"data\":\"" + hex + "\"}");
      }
      r.close();
    }
    c.close();
  }
}
