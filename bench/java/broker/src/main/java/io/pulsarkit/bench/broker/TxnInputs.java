package io.pulsarkit.bench.broker;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import java.lang.reflect.Field;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import org.apache.pulsar.common.api.proto.Subscription;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.impl.TxnLogBufferedWriter;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry;

/**
 * The transaction-coordinator records of bench/test_bench_txn.py (txn/records.bin, each a serialized
 * TransactionMetadataEntry), as the coordinator hands them to its writer: TransactionMetadataEntry objects built
 * with setters. Also the batched entries pulsarkit packs from them (txn/entries.bin), which Pulsar's must equal byte
 * for byte, and the writer's limits (txn/expected.properties).
 */
final class TxnInputs {
    final List<TransactionMetadataEntry> records = new ArrayList<>();
    final List<byte[]> expectedEntries;
    final int maxRecords;
    final int maxSize;
    final int maxDelayMs;
    final long expectedBytes;
    final TxnLogBufferedWriter.DataSerializer<TransactionMetadataEntry> serializer;

    TxnInputs(String data) throws Exception {
        Path dir = Data.dir(data).resolve("txn");
        Properties p = Data.expected(dir.resolve("expected.properties"));
        for (byte[] raw : Data.records(dir.resolve("records.bin"))) {
            TransactionMetadataEntry parsed = new TransactionMetadataEntry();
            parsed.parseFrom(raw);
            records.add(fresh(parsed));
        }
        Data.check("records", Data.expectLong(p, "records"), records.size());
        expectedEntries = Data.records(dir.resolve("entries.bin"));
        Data.check("batched entries", Data.expectLong(p, "entries"), expectedEntries.size());
        maxRecords = (int) Data.expectLong(p, "max_records");
        maxSize = (int) Data.expectLong(p, "max_size");
        maxDelayMs = (int) Data.expectLong(p, "max_delay_ms");
        expectedBytes = Data.expectLong(p, "bytes");
        serializer = coordinatorSerializer();
    }

    /** The records in batches of maxRecords, as the writer cuts them (no record here reaches maxSize). */
    List<ArrayList<TransactionMetadataEntry>> batches() {
        List<ArrayList<TransactionMetadataEntry>> out = new ArrayList<>();
        for (int i = 0; i < records.size(); i += maxRecords) {
            out.add(new ArrayList<>(records.subList(i, Math.min(records.size(), i + maxRecords))));
        }
        return out;
    }

    /** Fails unless `got` are the expected entries, byte for byte. */
    void checkEntries(String who, List<byte[]> got) {
        Data.check(who + ": batched entries", expectedEntries.size(), got.size());
        for (int i = 0; i < got.size(); i++) {
            if (!Arrays.equals(expectedEntries.get(i), got.get(i))) {
                throw new IllegalStateException(who + ": entry " + i + " differs from pulsarkit's: "
                        + ByteBufUtil.hexDump(got.get(i), 0, Math.min(64, got.get(i).length)) + "... vs "
                        + ByteBufUtil.hexDump(expectedEntries.get(i), 0, Math.min(64, expectedEntries.get(i).length)));
            }
        }
    }

    static byte[] bytes(ByteBuf b) {
        return ByteBufUtil.getBytes(b);
    }

    /** The coordinator's own serializer (MLTransactionLogImpl.TransactionLogDataSerializer.INSTANCE, private). */
    @SuppressWarnings("unchecked")
    private static TxnLogBufferedWriter.DataSerializer<TransactionMetadataEntry> coordinatorSerializer()
            throws Exception {
        Field f = Class.forName(MLTransactionLogImpl.class.getName() + "$TransactionLogDataSerializer")
                .getDeclaredField("INSTANCE");
        f.setAccessible(true);
        return (TxnLogBufferedWriter.DataSerializer<TransactionMetadataEntry>) f.get(null);
    }

    /** A record built field by field, as MLTransactionMetadataStore builds them (no lazily parsed strings). */
    private static TransactionMetadataEntry fresh(TransactionMetadataEntry p) {
        TransactionMetadataEntry e = new TransactionMetadataEntry();
        if (p.hasMetadataOp()) {
            e.setMetadataOp(p.getMetadataOp());
        }
        if (p.hasTxnidLeastBits()) {
            e.setTxnidLeastBits(p.getTxnidLeastBits());
        }
        if (p.hasTxnidMostBits()) {
            e.setTxnidMostBits(p.getTxnidMostBits());
        }
        if (p.hasExpectedStatus()) {
            e.setExpectedStatus(p.getExpectedStatus());
        }
        if (p.hasNewStatus()) {
            e.setNewStatus(p.getNewStatus());
        }
        for (int i = 0; i < p.getPartitionsCount(); i++) {
            e.addPartition(new String(p.getPartitionAt(i)));
        }
        for (int i = 0; i < p.getSubscriptionsCount(); i++) {
            Subscription s = p.getSubscriptionAt(i);
            e.addSubscription().setTopic(new String(s.getTopic())).setSubscription(new String(s.getSubscription()));
        }
        if (p.hasTimeoutMs()) {
            e.setTimeoutMs(p.getTimeoutMs());
        }
        if (p.hasStartTime()) {
            e.setStartTime(p.getStartTime());
        }
        if (p.hasLastModificationTime()) {
            e.setLastModificationTime(p.getLastModificationTime());
        }
        if (p.hasMaxLocalTxnId()) {
            e.setMaxLocalTxnId(p.getMaxLocalTxnId());
        }
        if (p.hasOwner()) {
            e.setOwner(new String(p.getOwner()));
        }
        return e;
    }
}
