import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.*;

/** A final burst the broker acknowledges before it is killed: args = brokerUrl. */
public class Burst {
  public static void main(String[] a) throws Exception {
    PulsarClient c = PulsarClient.builder().serviceUrl(a[0]).build();
    String t = "persistent://public/default/burst";
    Consumer<byte[]> cons = c.newConsumer().topic(t).subscriptionName("ind").subscribe();
    Producer<byte[]> p = c.newProducer().sendTimeout(0, TimeUnit.SECONDS).topic(t).producerName("burster").enableBatching(false).create();
    for (int i = 0; i < 30; i++) p.newMessage().key("b" + i).value(("burst-" + i).getBytes()).send();
    for (int acked = 0, waited = 0; acked < 10; ) {
      // waits through a topic reload (see Workload.recv); the harness gives up on this process after a deadline
      Message<byte[]> m = cons.receive(10, TimeUnit.SECONDS);
      if (m != null) { cons.acknowledge(m); acked++; }
      else if (++waited == 18) throw new IllegalStateException("burst: no message in 180 s");
    }
    Thread.sleep(500);
    System.out.println("BURST-DONE");
    System.out.flush();
    Thread.sleep(600000);
  }
}
