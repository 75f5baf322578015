import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.*;

/** Reads one topic from the start with a Reader until `count` messages came: args = brokerUrl topic count.
 * Prints "READ n bytes start_ms first_ms last_ms": the JVM's start, the first and the last message, in
 * epoch milliseconds (the driver computes the steady-state rate between the first and the last message). */
public class ReadTopic {
  public static void main(String[] a) throws Exception {
    long start = java.lang.management.ManagementFactory.getRuntimeMXBean().getStartTime();
    long count = Long.parseLong(a[2]);
    PulsarClient c = PulsarClient.builder().serviceUrl(a[0]).build();
    Reader<byte[]> r = c.newReader().topic(a[1]).startMessageId(MessageId.earliest).create();
    long n = 0, bytes = 0, first = 0;
    while (n < count) {
      Message<byte[]> m = r.readNext(120, TimeUnit.SECONDS);
      if (m == null) throw new IllegalStateException("no message for 120 s after " + n);
      if (n == 0) first = System.currentTimeMillis();
      bytes += m.getData().length;
      n++;
    }
    long last = System.currentTimeMillis();
    System.out.println("READ " + n + " " + bytes + " " + start + " " + first + " " + last);
    r.close();
    c.close();
    System.exit(0);
  }
}
