import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.*;
import org.apache.pulsar.client.api.transaction.Transaction;

/** The workload pulsarkit's data-directory reader is checked on: args = brokerUrl webUrl txnOutFile. */
public class Workload {
  static final HttpClient HTTP = HttpClient.newHttpClient();
  static String web;

  static String admin(String method, String path, String body) throws Exception {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(web + "/admin/v2/" + path))
        .header("Content-Type", "application/json")
        .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
    HttpResponse<String> r = HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
    if (r.statusCode() >= 300) throw new RuntimeException(method + " " + path + " -> " + r.statusCode() + " " + r.body());
    return r.body();
  }

  /** The next message, waiting through a topic reload: a restarted 4.0.7 broker on a loaded machine can time out
   * recovering a topic's transaction buffer and close the topic under its clients, which then reconnect. */
  static <T> Message<T> recv(Consumer<T> c) throws Exception {
    for (int i = 0; i < 18; i++) {
      Message<T> m = c.receive(10, TimeUnit.SECONDS);
      if (m != null) return m;
    }
    throw new IllegalStateException("no message on " + c.getTopic() + "/" + c.getSubscription() + " in 180 s");
  }

  public static void main(String[] a) throws Exception {
    web = a[1];
    PulsarClient c = PulsarClient.builder().serviceUrl(a[0]).enableTransaction(true).build();
    String ns = "persistent://public/default/";
    CompressionType[] codecs = {CompressionType.NONE, CompressionType.LZ4, CompressionType.ZLIB, CompressionType.ZSTD, CompressionType.SNAPPY};
    for (CompressionType codec : codecs) {
      String t = ns + "codec-" + codec.name().toLowerCase();
      Consumer<byte[]> ind = c.newConsumer().topic(t).subscriptionName("ind").enableBatchIndexAcknowledgment(true).subscribe();
      Consumer<byte[]> cum = c.newConsumer().topic(t).subscriptionName("cum").subscribe();
      c.newConsumer().topic(t).subscriptionName("none").subscribe().close();
      Producer<byte[]> p = c.newProducer().sendTimeout(0, TimeUnit.SECONDS).topic(t).producerName("p-" + codec).compressionType(codec)
          .enableBatching(true).batchingMaxMessages(5).batchingMaxPublishDelay(100, TimeUnit.MILLISECONDS).create();
      for (int i = 0; i < 12; i++) {
        TypedMessageBuilder<byte[]> m = p.newMessage().key("k" + (i % 3)).property("i", "" + i).value((codec + "-" + i).getBytes());
        if (i % 2 == 1) m.eventTime(1000 + i);
        m.sendAsync();
      }
      p.flush();
      Producer<byte[]> nb = c.newProducer().sendTimeout(0, TimeUnit.SECONDS).topic(t).producerName("nb-" + codec).compressionType(codec).enableBatching(false).create();
      nb.newMessage().key("only").value((codec + "-nb").getBytes()).send();
      nb.newMessage().value("plain".getBytes()).send();
      nb.newMessage().key("null").value(null).send();
      nb.newMessage().key("empty").value(new byte[0]).send();
      for (int i = 0; i < 16; i++) {
        Message<byte[]> m = recv(ind);
        if (i % 2 == 0) ind.acknowledge(m);
      }
      Message<byte[]> last = null;
      for (int i = 0; i < 7; i++) last = recv(cum);
      cum.acknowledgeCumulative(last);
      ind.close(); cum.close(); p.close(); nb.close();
    }
    // chunks
    String ct = ns + "chunked";
    Consumer<byte[]> cc = c.newConsumer().topic(ct).subscriptionName("ind").subscribe();
    Producer<byte[]> cp = c.newProducer().sendTimeout(0, TimeUnit.SECONDS).topic(ct).producerName("chunker").enableBatching(false).enableChunking(true)
        .chunkMaxMessageSize(20000).create();
    byte[] big = new byte[70000];
    for (int i = 0; i < big.length; i++) big[i] = (byte) (i * 7);
    cp.newMessage().key("big").value(big).send();
    cp.newMessage().value("small".getBytes()).send();
    recv(cc);
    cc.acknowledge(recv(cc));
    cc.close(); cp.close();
    // partitioned
    admin("PUT", "persistent/public/default/parts/partitions", "3");
    Consumer<byte[]> pc = c.newConsumer().topic(ns + "parts").subscriptionName("ind").subscribe();
    Producer<byte[]> pp = c.newProducer().sendTimeout(0, TimeUnit.SECONDS).topic(ns + "parts").enableBatching(false).create();
    for (int i = 0; i < 9; i++) pp.newMessage().key("pk" + i).value(("part-" + i).getBytes()).send();
    for (int i = 0; i < 9; i++) { Message<byte[]> m = recv(pc); if (i % 3 == 0) pc.acknowledge(m); }
    pc.close(); pp.close();
    // schema
    Producer<String> sp = c.newProducer(Schema.STRING).sendTimeout(0, TimeUnit.SECONDS).topic(ns + "schema-string").create();
    sp.newMessage().key("s").value("typed").send();
    sp.close();
    // dedup: a resent range is dropped by the broker
    Producer<byte[]> d1 = c.newProducer().sendTimeout(0, TimeUnit.SECONDS).topic(ns + "dedup").producerName("dedup-p").enableBatching(false).create();
    for (long s = 0; s < 5; s++) d1.newMessage().sequenceId(s).value(("d" + s).getBytes()).send();
    d1.close();
    Producer<byte[]> d2 = c.newProducer().sendTimeout(0, TimeUnit.SECONDS).topic(ns + "dedup").producerName("dedup-p").enableBatching(false).create();
    for (long s = 2; s < 7; s++) d2.newMessage().sequenceId(s).value(("d" + s).getBytes()).send();
    d2.close();
    // compaction
    Producer<byte[]> kp = c.newProducer().sendTimeout(0, TimeUnit.SECONDS).topic(ns + "compact").enableBatching(false).create();
    for (int i = 0; i < 10; i++) kp.newMessage().key("ck" + (i % 3)).value(("v" + i).getBytes()).send();
    kp.close();
    admin("PUT", "persistent/public/default/compact/compaction", null);
    for (int i = 0; i < 60 && !admin("GET", "persistent/public/default/compact/compaction", null).contains("SUCCESS"); i++) Thread.sleep(500);
    // compaction of batches: mixed keys, keyless messages, tombstones, and a tombstone at the tail
    Producer<byte[]> bp = c.newProducer().sendTimeout(0, TimeUnit.SECONDS).topic(ns + "compact-batched").compressionType(CompressionType.LZ4)
        .enableBatching(true).batchingMaxMessages(4).batchingMaxPublishDelay(200, TimeUnit.MILLISECONDS).create();
    for (int i = 0; i < 24; i++) {
      TypedMessageBuilder<byte[]> m = bp.newMessage();
      if (i % 11 != 5) m.key("bk" + (i % 5));
      m.value(i % 7 == 6 ? new byte[0] : ("b" + i).getBytes()).sendAsync();
    }
    bp.flush();
    bp.newMessage().key("bk4").value(null).send();
    bp.close();
    admin("PUT", "persistent/public/default/compact-batched/compaction", null);
    for (int i = 0; i < 60 && !admin("GET", "persistent/public/default/compact-batched/compaction", null).contains("SUCCESS"); i++) Thread.sleep(500);
    // a deleted topic
    Producer<byte[]> dp = c.newProducer().sendTimeout(0, TimeUnit.SECONDS).topic(ns + "to-delete").create();
    dp.send("bye".getBytes());
    dp.close();
    admin("DELETE", "persistent/public/default/to-delete?force=true", null);
    // transactions: committed, aborted, acks in transactions, one left open
    String tt = ns + "txn-topic";
    Consumer<byte[]> tc = c.newConsumer().topic(tt).subscriptionName("txsub").enableBatchIndexAcknowledgment(true).subscribe();
    Producer<byte[]> tp = c.newProducer().sendTimeout(0, TimeUnit.SECONDS).topic(tt).enableBatching(true).batchingMaxMessages(3).create();
    List<String> txns = new ArrayList<>();
    tp.send("plain-0".getBytes());
    Transaction t1 = c.newTransaction().withTransactionTimeout(5, TimeUnit.MINUTES).build().get();
    tp.newMessage(t1).value("c1".getBytes()).sendAsync();
    tp.newMessage(t1).value("c2".getBytes()).send();
    Transaction t2 = c.newTransaction().withTransactionTimeout(5, TimeUnit.MINUTES).build().get();
    tp.newMessage(t2).value("a1".getBytes()).send();
    t1.commit().get(); txns.add(t1.getTxnID() + " COMMITTED");
    t2.abort().get(); txns.add(t2.getTxnID() + " ABORTED");
    tp.send("plain-1".getBytes());
    for (int i = 0; i < 4; i++) {
      Message<byte[]> m = recv(tc);
      Transaction ta = c.newTransaction().withTransactionTimeout(5, TimeUnit.MINUTES).build().get();
      tc.acknowledgeAsync(m.getMessageId(), ta).get();
      if (i % 2 == 0) { ta.commit().get(); txns.add(ta.getTxnID() + " COMMITTED"); }
      else { ta.abort().get(); txns.add(ta.getTxnID() + " ABORTED"); }
    }
    Transaction t3 = c.newTransaction().withTransactionTimeout(60, TimeUnit.MINUTES).build().get();
    tp.newMessage(t3).value("open".getBytes()).send();
    txns.add(t3.getTxnID() + " OPEN");
    tp.send("after-open".getBytes());
    tc.close(); tp.close();
    Files.write(Path.of(a[2]), txns);
    c.close();
  }
}
