import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.*;

/** Writes one topic of the broker-vs-storage workload: args = brokerUrl topic count size batched(true|false)
 * codec(NONE|LZ4|ZLIB|ZSTD|SNAPPY). Payloads are letters drawn from a seeded 64-symbol alphabet (about 6 bits of
 * entropy per byte, so a codec has something to do), the message's index in the first 8 bytes. Prints "SENT n". */
public class Produce {
  public static void main(String[] a) throws Exception {
    String url = a[0], topic = a[1];
    int count = Integer.parseInt(a[2]), size = Integer.parseInt(a[3]);
    boolean batched = Boolean.parseBoolean(a[4]);
    CompressionType codec = CompressionType.valueOf(a[5]);
    PulsarClient c = PulsarClient.builder().serviceUrl(url).build();
    Producer<byte[]> p = c.newProducer().topic(topic).enableBatching(batched).compressionType(codec)
        .blockIfQueueFull(true).maxPendingMessages(2000).sendTimeout(0, TimeUnit.SECONDS).create();
    Random rnd = new Random(42);
    byte[] alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".getBytes();
    byte[] pool = new byte[1 << 20];
    for (int i = 0; i < pool.length; i++) pool[i] = alphabet[rnd.nextInt(64)];
    CompletableFuture<MessageId> last = null;
    for (int i = 0; i < count; i++) {
      byte[] v = new byte[size];
      System.arraycopy(pool, (int) ((i * 7919L) % (pool.length - size)), v, 0, size);
      for (int k = 0; k < 8 && k < size; k++) v[k] = (byte) (i >>> (8 * k));
      last = p.sendAsync(v);
    }
    p.flush();
    if (last != null) last.get(300, TimeUnit.SECONDS);
    p.close();
    c.close();
    System.out.println("SENT " + count);
  }
}
