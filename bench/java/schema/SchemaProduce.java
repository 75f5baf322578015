import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.*;

/** Writes one topic of the schema-decoding benchmark (bench/decode_schema.py) with the real client's schemas:
 * args = brokerUrl topic kind(avro|json|int64|string) count. Batched, no compression; values are derived from
 * a seeded Random so each run writes the same data. Prints "SENT n". */
public class SchemaProduce {
  /** The nested record of the AVRO and JSON values. */
  public static class Address {
    public String street;
    public int zip;
    public Address() {}
  }

  /** Seven fields: a long, an int, a double, a boolean, two strings (one nullable), a nested record. */
  public static class Order {
    public long id;
    public int quantity;
    public double price;
    public boolean paid;
    public String customer;
    public String note;
    public Address address;
    public Order() {}
  }

  static final String[] NAMES = {"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"};

  static Order order(Random rnd, long i) {
    Order o = new Order();
    o.id = i;
    o.quantity = rnd.nextInt(1000);
    o.price = rnd.nextInt(100_000) / 100.0;
    o.paid = rnd.nextBoolean();
    o.customer = NAMES[rnd.nextInt(NAMES.length)] + "-" + rnd.nextInt(10_000);
    o.note = rnd.nextInt(4) == 0 ? null : "note " + Long.toHexString(rnd.nextLong());
    o.address = new Address();
    o.address.street = rnd.nextInt(500) + " Main Street";
    o.address.zip = 10_000 + rnd.nextInt(90_000);
    return o;
  }

  static <T> void send(PulsarClient c, Schema<T> schema, String topic, int count, java.util.function.LongFunction<T> value)
      throws Exception {
    try (Producer<T> p = c.newProducer(schema).topic(topic).enableBatching(true).blockIfQueueFull(true)
        .maxPendingMessages(2000).sendTimeout(0, TimeUnit.SECONDS).create()) {
      CompletableFuture<MessageId> last = null;
      for (long i = 0; i < count; i++) last = p.sendAsync(value.apply(i));
      p.flush();
      if (last != null) last.get(300, TimeUnit.SECONDS);
    }
  }

  public static void main(String[] a) throws Exception {
    String url = a[0], topic = a[1], kind = a[2];
    int count = Integer.parseInt(a[3]);
    Random rnd = new Random(42);
    try (PulsarClient c = PulsarClient.builder().serviceUrl(url).build()) {
      switch (kind) {
        case "avro" -> send(c, Schema.AVRO(Order.class), topic, count, i -> order(rnd, i));
        case "json" -> send(c, Schema.JSON(Order.class), topic, count, i -> order(rnd, i));
        case "int64" -> send(c, Schema.INT64, topic, count, i -> rnd.nextLong());
        case "string" -> send(c, Schema.STRING, topic, count,
            i -> NAMES[rnd.nextInt(NAMES.length)] + " " + i + " " + Long.toHexString(rnd.nextLong()));
        default -> throw new IllegalArgumentException(kind);
      }
    }
    System.out.println("SENT " + count);
  }
}
