import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.*;

/** What a consumer re-attaching to each subscription receives: args = brokerUrl (topic subscription)... */
public class Reattach {
  public static void main(String[] a) throws Exception {
    PulsarClient c = PulsarClient.builder().serviceUrl(a[0]).build();
    for (int k = 1; k + 1 < a.length; k += 2) {
      Consumer<byte[]> cons = c.newConsumer().topic(a[k]).subscriptionName(a[k + 1]).subscribe();
      while (true) {
        Message<byte[]> m = cons.receive(3, TimeUnit.SECONDS);
        if (m == null) break;
        System.out.println("GOT " + a[k] + " " + a[k + 1] + " " + m.getMessageId());
      }
      cons.close();
    }
    c.close();
  }
}
