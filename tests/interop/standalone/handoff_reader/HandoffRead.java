import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.*;
import org.apache.pulsar.client.impl.BatchMessageIdImpl;
import org.apache.pulsar.client.impl.MessageIdImpl;

/** The Java client's Reader at each topic's hand-off position, inclusive, read to the end.
 * args = brokerUrl, then per topic: topic ledger entry batch partition. One line per message:
 * "REC topic ledger:entry:batch hexdata" (batch -1 for a message outside a batch). */
public class HandoffRead {
  public static void main(String[] a) throws Exception {
    PulsarClient c = PulsarClient.builder().serviceUrl(a[0]).build();
    for (int k = 1; k + 4 < a.length; k += 5) {
      String t = a[k];
      long ledger = Long.parseLong(a[k + 1]), entry = Long.parseLong(a[k + 2]);
      int batch = Integer.parseInt(a[k + 3]), partition = Integer.parseInt(a[k + 4]);
      MessageId start = batch >= 0 ? new BatchMessageIdImpl(ledger, entry, partition, batch)
          : new MessageIdImpl(ledger, entry, partition);
      Reader<byte[]> r = c.newReader().topic(t).startMessageId(start).startMessageIdInclusive()
          .createAsync().get(120, TimeUnit.SECONDS);
      while (r.hasMessageAvailableAsync().get(90, TimeUnit.SECONDS)) {
        Message<byte[]> m = r.readNext(30, TimeUnit.SECONDS);
        if (m == null) throw new java.util.concurrent.TimeoutException("readNext returned nothing");
        MessageIdAdv id = (MessageIdAdv) m.getMessageId();
        StringBuilder hex = new StringBuilder();
        byte[] data = m.getData();  // null for a null value (a tombstone)
        if (data != null) for (byte x : data) hex.append(String.format("%02x", x));
        System.out.println("REC " + t + " " + id.getLedgerId() + ":" + id.getEntryId() + ":" + id.getBatchIndex()
            + " " + hex);
      }
      r.close();
    }
    c.close();
    System.exit(0);
  }
}
