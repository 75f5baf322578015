package io.pulsarkit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.util.Timeout;
import io.netty.util.Timer;
import io.netty.util.TimerTask;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.apache.bookkeeper.mledger.Entry;
import org.apache.bookkeeper.mledger.ManagedLedger;
import org.apache.bookkeeper.mledger.ManagedLedgerException;
import org.apache.bookkeeper.mledger.Position;
import org.apache.pulsar.broker.transaction.pendingack.impl.MLPendingAckStore;
import org.apache.pulsar.broker.transaction.pendingack.proto.PendingAckMetadata;
import org.apache.pulsar.broker.transaction.pendingack.proto.PendingAckMetadataEntry;
import org.apache.pulsar.broker.transaction.pendingack.proto.PendingAckOp;
import org.apache.pulsar.common.api.proto.CommandAck;
import org.apache.pulsar.common.api.proto.Subscription;
import org.apache.pulsar.transaction.coordinator.impl.DisabledTxnLogBufferedWriterMetricsStats;
import org.apache.pulsar.transaction.coordinator.impl.MLTransactionLogImpl;
import org.apache.pulsar.transaction.coordinator.impl.TxnLogBufferedWriter;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry;
import org.apache.pulsar.transaction.coordinator.proto.TxnStatus;

/**
 * Line-oriented JSON server over stdin/stdout (protocol of {@code tests/oracle.py}) that runs Pulsar's own
 * transaction-log code: the PIP-160 {@link TxnLogBufferedWriter} with the coordinator's and the pending-ack
 * store's own {@code DataSerializer}s (writing into a managed ledger that only records the entry bytes), and
 * {@code MLTransactionLogImpl.deserializeEntry} / {@code MLPendingAckStore.deserializeEntry} for reading.
 *
 * <p>Records travel as JSON objects with pulsarkit's field names; uint64 fields as unsigned numbers, except the
 * ledger and entry ids of pending-ack positions (signed, the longs of Pulsar's positions); absent optional fields
 * as null; entry bytes as hex.
 */
public final class TxnOracle {
    private static final ObjectMapper M = new ObjectMapper();
    private static final JsonNodeFactory F = JsonNodeFactory.instance;

    private TxnOracle() {}

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode resp = F.objectNode();
            try {
                JsonNode req = M.readTree(line);
                resp.set("id", req.path("id"));
                String op = req.path("op").asText();
                if (op.equals("stop")) {
                    resp.put("ok", true);
                    out.println(M.writeValueAsString(resp));
                    out.flush();
                    return;
                }
                resp.set("result", dispatch(op, req));
                resp.put("ok", true);
            } catch (Throwable t) {
                Throwable c = t instanceof InvocationTargetException ite && ite.getCause() != null ? ite.getCause() : t;
                resp.put("ok", false);
                resp.put("error", c.getClass().getName());
                resp.put("message", String.valueOf(c.getMessage()));
            }
            out.println(M.writeValueAsString(resp));
            out.flush();
        }
    }

    private static JsonNode dispatch(String op, JsonNode r) throws Exception {
        return switch (op) {
            case "info" -> info();
            case "parse_txn_log_entry" -> parseTxnLogEntry(bytes(r.get("data")));
            case "parse_pending_ack_entry" -> parsePendingAckEntry(bytes(r.get("data")));
            case "write_txn_log_batch" -> hex(write(txnSerializer(), txnRecords(r.get("records")), true));
            case "write_txn_log_entry" -> hex(write(txnSerializer(), List.of(txnRecord(r.get("record"))), false));
            case "write_pending_ack_batch" -> hex(write(ackSerializer(), ackRecords(r.get("records")), true));
            case "write_pending_ack_entry" -> hex(write(ackSerializer(), List.of(ackRecord(r.get("record"))), false));
            case "serialize_txn_record" -> hex(txnRecord(r.get("record")).toByteArray());
            case "serialize_pending_ack_record" -> hex(ackRecord(r.get("record")).toByteArray());
            default -> throw new IllegalArgumentException("unknown op " + op);
        };
    }

    private static JsonNode info() {
        ObjectNode o = F.objectNode();
        o.put("java", System.getProperty("java.version"));
        for (Class<?> c : List.of(TransactionMetadataEntry.class, MLTransactionLogImpl.class,
                TxnLogBufferedWriter.class, PendingAckMetadataEntry.class, MLPendingAckStore.class)) {
            o.put(c.getSimpleName(), c.getProtectionDomain().getCodeSource().getLocation().toString());
        }
        return o;
    }

    // --- bytes and numbers -----------------------------------------------------------------------------------

    private static byte[] bytes(JsonNode hexNode) {
        return ByteBufUtil.decodeHexDump(hexNode.asText());
    }

    private static JsonNode hex(byte[] b) {
        return F.textNode(ByteBufUtil.hexDump(b));
    }

    private static boolean present(JsonNode r, String name) {
        return r.hasNonNull(name);
    }

    /** A uint64 / int64 JSON number as the long Pulsar stores (the low 64 bits, two's complement). */
    private static long u64(JsonNode n) {
        return n.bigIntegerValue().longValue();
    }

    private static JsonNode unsigned(long v) {
        return F.numberNode(new BigInteger(Long.toUnsignedString(v)));
    }

    // --- Pulsar's writer, with a managed ledger that records what it is given -----------------------------------

    @SuppressWarnings("unchecked")
    private static <T> TxnLogBufferedWriter.DataSerializer<T> serializer(String outerClass) throws Exception {
        Field f = Class.forName(outerClass).getDeclaredField("INSTANCE");
        f.setAccessible(true);
        return (TxnLogBufferedWriter.DataSerializer<T>) f.get(null);
    }

    private static TxnLogBufferedWriter.DataSerializer<TransactionMetadataEntry> txnSerializer() throws Exception {
        return serializer(MLTransactionLogImpl.class.getName() + "$TransactionLogDataSerializer");
    }

    private static TxnLogBufferedWriter.DataSerializer<PendingAckMetadataEntry> ackSerializer() throws Exception {
        return serializer(MLPendingAckStore.class.getName() + "$PendingAckLogSerializer");
    }

    /**
     * The entry {@link TxnLogBufferedWriter} hands its managed ledger for {@code data}: with batching, one flush of
     * all records (max records = their count, no size limit, no timer flush); without, one record's entry.
     */
    private static <T> byte[] write(TxnLogBufferedWriter.DataSerializer<T> serializer, List<T> data, boolean batched) {
        List<byte[]> entries = new ArrayList<>();
        ManagedLedger ledger = (ManagedLedger) Proxy.newProxyInstance(TxnOracle.class.getClassLoader(),
                new Class<?>[] {ManagedLedger.class}, (proxy, m, a) -> {
                    switch (m.getName()) {
                        case "getName":
                            return "txn-oracle";
                        case "asyncAddEntry":
                            if (a != null && a.length == 3 && a[0] instanceof ByteBuf b) {
                                entries.add(ByteBufUtil.getBytes(b));
                                return null;
                            }
                            break;
                        case "toString":
                            return "txn-oracle managed ledger";
                        case "hashCode":
                            return System.identityHashCode(proxy);
                        case "equals":
                            return proxy == a[0];
                        default:
                            break;
                    }
                    throw new UnsupportedOperationException("oracle managed ledger: " + m);
                });
        Timeout timeout = (Timeout) Proxy.newProxyInstance(TxnOracle.class.getClassLoader(),
                new Class<?>[] {Timeout.class}, (proxy, m, a) -> switch (m.getName()) {
                    case "isExpired", "isCancelled" -> false;
                    case "cancel" -> true;
                    case "hashCode" -> System.identityHashCode(proxy);
                    case "equals" -> proxy == a[0];
                    default -> null;
                });
        List<TimerTask> timerTasks = new ArrayList<>();
        Timer timer = (Timer) Proxy.newProxyInstance(TxnOracle.class.getClassLoader(), new Class<?>[] {Timer.class},
                (proxy, m, a) -> switch (m.getName()) {
                    case "newTimeout" -> {
                        timerTasks.add((TimerTask) a[0]);
                        yield timeout;
                    }
                    case "stop" -> Set.of();
                    case "hashCode" -> System.identityHashCode(proxy);
                    case "equals" -> proxy == a[0];
                    default -> null;
                });
        // Pulsar turns batching off for a maximum of 1 record; a batch of one is what its max-delay timer flushes.
        TxnLogBufferedWriter<T> writer = new TxnLogBufferedWriter<>(ledger, Runnable::run, timer, serializer,
                batched ? Math.max(2, data.size()) : 1, Integer.MAX_VALUE, 3_600_000, batched,
                DisabledTxnLogBufferedWriterMetricsStats.DISABLED_BUFFERED_WRITER_METRICS);
        List<Throwable> failures = new ArrayList<>();
        TxnLogBufferedWriter.AddDataCallback callback = new TxnLogBufferedWriter.AddDataCallback() {
            @Override
            public void addComplete(Position position, Object context) {}

            @Override
            public void addFailed(ManagedLedgerException exception, Object ctx) {
                failures.add(exception);
            }
        };
        for (T d : data) {
            writer.asyncAddData(d, callback, null);
        }
        if (batched && entries.isEmpty()) {
            if (timerTasks.isEmpty()) {
                throw new IllegalStateException("the writer scheduled no max-delay flush");
            }
            try {
                timerTasks.get(timerTasks.size() - 1).run(timeout);
            } catch (Exception e) {
                throw new IllegalStateException("max-delay flush failed", e);
            }
        }
        if (!failures.isEmpty()) {
            throw new IllegalStateException("writer failed", failures.get(0));
        }
        if (entries.size() != 1) {
            throw new IllegalStateException("the writer wrote " + entries.size() + " entries, not 1");
        }
        return entries.get(0);
    }

    // --- reading with Pulsar's own deserializers -----------------------------------------------------------------

    private static JsonNode parseTxnLogEntry(byte[] data) {
        ArrayNode a = F.arrayNode();
        for (TransactionMetadataEntry e : MLTransactionLogImpl.deserializeEntry(Unpooled.wrappedBuffer(data))) {
            a.add(txnJson(e));
        }
        return a;
    }

    private static Object pendingAckStore;
    private static Method pendingAckDeserialize;

    @SuppressWarnings("unchecked")
    private static JsonNode parsePendingAckEntry(byte[] data) throws Exception {
        if (pendingAckDeserialize == null) {
            // MLPendingAckStore.deserializeEntry(Entry) is a private instance method that reads only its argument;
            // it runs on an instance allocated without a constructor (no managed ledger behind it).
            Field uf = Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe");
            uf.setAccessible(true);
            Object unsafe = uf.get(null);
            pendingAckStore = unsafe.getClass().getMethod("allocateInstance", Class.class)
                    .invoke(unsafe, MLPendingAckStore.class);
            pendingAckDeserialize = MLPendingAckStore.class.getDeclaredMethod("deserializeEntry", Entry.class);
            pendingAckDeserialize.setAccessible(true);
        }
        ByteBuf buf = Unpooled.wrappedBuffer(data);
        Entry entry = (Entry) Proxy.newProxyInstance(TxnOracle.class.getClassLoader(), new Class<?>[] {Entry.class},
                (proxy, m, a) -> switch (m.getName()) {
                    case "getDataBuffer" -> buf;
                    case "getLength" -> data.length;
                    case "getData" -> data;
                    case "getLedgerId", "getEntryId" -> 0L;
                    case "release" -> true;
                    case "hashCode" -> System.identityHashCode(proxy);
                    case "equals" -> proxy == a[0];
                    default -> throw new UnsupportedOperationException("oracle entry: " + m);
                });
        ArrayNode a = F.arrayNode();
        for (PendingAckMetadataEntry e : (List<PendingAckMetadataEntry>) pendingAckDeserialize.invoke(pendingAckStore,
                entry)) {
            a.add(ackJson(e));
        }
        return a;
    }

    // --- TransactionMetadataEntry <-> JSON -------------------------------------------------------------------

    private static List<TransactionMetadataEntry> txnRecords(JsonNode records) {
        List<TransactionMetadataEntry> l = new ArrayList<>();
        records.forEach(r -> l.add(txnRecord(r)));
        return l;
    }

    private static TransactionMetadataEntry txnRecord(JsonNode r) {
        TransactionMetadataEntry e = new TransactionMetadataEntry();
        if (present(r, "op")) {
            e.setMetadataOp(TransactionMetadataEntry.TransactionMetadataOp.valueOf(r.get("op").asText()));
        }
        if (present(r, "txnid_least_bits")) {
            e.setTxnidLeastBits(u64(r.get("txnid_least_bits")));
        }
        if (present(r, "txnid_most_bits")) {
            e.setTxnidMostBits(u64(r.get("txnid_most_bits")));
        }
        if (present(r, "expected_status")) {
            e.setExpectedStatus(TxnStatus.valueOf(r.get("expected_status").asText()));
        }
        if (present(r, "new_status")) {
            e.setNewStatus(TxnStatus.valueOf(r.get("new_status").asText()));
        }
        r.path("partitions").forEach(p -> e.addPartition(p.asText()));
        r.path("subscriptions").forEach(
                s -> e.addSubscription().setTopic(s.get("topic").asText()).setSubscription(s.get("subscription").asText()));
        if (present(r, "timeout_ms")) {
            e.setTimeoutMs(u64(r.get("timeout_ms")));
        }
        if (present(r, "start_time")) {
            e.setStartTime(u64(r.get("start_time")));
        }
        if (present(r, "last_modification_time")) {
            e.setLastModificationTime(u64(r.get("last_modification_time")));
        }
        if (present(r, "max_local_txn_id")) {
            e.setMaxLocalTxnId(u64(r.get("max_local_txn_id")));
        }
        if (present(r, "owner")) {
            e.setOwner(r.get("owner").asText());
        }
        if (present(r, "is_timeout")) {
            throw new IllegalArgumentException("Pulsar's TransactionMetadataEntry has no is_timeout field");
        }
        return e;
    }

    private static JsonNode txnJson(TransactionMetadataEntry e) {
        ObjectNode o = F.objectNode();
        o.put("op", e.hasMetadataOp() ? e.getMetadataOp().name() : null);
        o.set("txnid_most_bits", unsigned(e.getTxnidMostBits()));
        o.set("txnid_least_bits", unsigned(e.getTxnidLeastBits()));
        o.put("expected_status", e.hasExpectedStatus() ? e.getExpectedStatus().name() : null);
        o.put("new_status", e.hasNewStatus() ? e.getNewStatus().name() : null);
        ArrayNode parts = o.putArray("partitions");
        for (int i = 0; i < e.getPartitionsCount(); i++) {
            parts.add(e.getPartitionAt(i));
        }
        ArrayNode subs = o.putArray("subscriptions");
        for (int i = 0; i < e.getSubscriptionsCount(); i++) {
            Subscription s = e.getSubscriptionAt(i);
            subs.addObject().put("topic", s.getTopic()).put("subscription", s.getSubscription());
        }
        o.set("timeout_ms", e.hasTimeoutMs() ? unsigned(e.getTimeoutMs()) : F.nullNode());
        o.set("start_time", e.hasStartTime() ? unsigned(e.getStartTime()) : F.nullNode());
        o.set("last_modification_time",
                e.hasLastModificationTime() ? unsigned(e.getLastModificationTime()) : F.nullNode());
        o.set("max_local_txn_id", e.hasMaxLocalTxnId() ? unsigned(e.getMaxLocalTxnId()) : F.nullNode());
        o.put("owner", e.hasOwner() ? e.getOwner() : null);
        return o;
    }

    // --- PendingAckMetadataEntry <-> JSON ----------------------------------------------------------------------

    private static List<PendingAckMetadataEntry> ackRecords(JsonNode records) {
        List<PendingAckMetadataEntry> l = new ArrayList<>();
        records.forEach(r -> l.add(ackRecord(r)));
        return l;
    }

    private static PendingAckMetadataEntry ackRecord(JsonNode r) {
        PendingAckMetadataEntry e = new PendingAckMetadataEntry();
        if (present(r, "op")) {
            e.setPendingAckOp(PendingAckOp.valueOf(r.get("op").asText()));
        }
        if (present(r, "ack_type")) {
            e.setAckType(CommandAck.AckType.valueOf(r.get("ack_type").asText()));
        }
        if (present(r, "txnid_least_bits")) {
            e.setTxnidLeastBits(u64(r.get("txnid_least_bits")));
        }
        if (present(r, "txnid_most_bits")) {
            e.setTxnidMostBits(u64(r.get("txnid_most_bits")));
        }
        for (JsonNode p : r.path("positions")) {
            PendingAckMetadata m = e.addPendingAckMetadata();
            m.setLedgerId(u64(p.get("ledger_id"))).setEntryId(u64(p.get("entry_id")));
            p.path("ack_set").forEach(w -> m.addAckSet(u64(w)));
            if (present(p, "batch_size")) {
                m.setBatchSize(p.get("batch_size").intValue());
            }
        }
        return e;
    }

    private static JsonNode ackJson(PendingAckMetadataEntry e) {
        ObjectNode o = F.objectNode();
        o.put("op", e.hasPendingAckOp() ? e.getPendingAckOp().name() : null);
        o.put("ack_type", e.hasAckType() ? e.getAckType().name() : null);
        o.set("txnid_most_bits", e.hasTxnidMostBits() ? unsigned(e.getTxnidMostBits()) : F.nullNode());
        o.set("txnid_least_bits", e.hasTxnidLeastBits() ? unsigned(e.getTxnidLeastBits()) : F.nullNode());
        ArrayNode ps = o.putArray("positions");
        for (int i = 0; i < e.getPendingAckMetadatasCount(); i++) {
            PendingAckMetadata m = e.getPendingAckMetadataAt(i);
            ObjectNode p = ps.addObject();
            // Positions are Java longs throughout Pulsar (entry id -1 and all): reported signed, as stored.
            p.put("ledger_id", m.getLedgerId());
            p.put("entry_id", m.getEntryId());
            ArrayNode words = p.putArray("ack_set");
            for (int j = 0; j < m.getAckSetsCount(); j++) {
                words.add(m.getAckSetAt(j));
            }
            p.set("batch_size", m.hasBatchSize() ? F.numberNode(m.getBatchSize()) : F.nullNode());
        }
        return o;
    }
}
