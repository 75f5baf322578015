package io.pulsarkit.bench.broker;

import io.netty.buffer.ByteBuf;
import io.netty.util.Timeout;
import io.netty.util.Timer;
import io.netty.util.TimerTask;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.mledger.AsyncCallbacks;
import org.apache.bookkeeper.mledger.ManagedLedger;
import org.apache.bookkeeper.mledger.ManagedLedgerException;
import org.apache.bookkeeper.mledger.Position;
import org.apache.bookkeeper.mledger.PositionFactory;
import org.apache.pulsar.transaction.coordinator.impl.DisabledTxnLogBufferedWriterMetricsStats;
import org.apache.pulsar.transaction.coordinator.impl.TxnLogBufferedWriter;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Pulsar 4.0.7's PIP-160 {@link TxnLogBufferedWriter} with the transaction coordinator's serializer, batching the
 * records of txn/records.bin at the limits of txn/expected.properties (the broker's defaults: 512 records, 4 MiB,
 * 1 ms), the counterpart of pulsarkit's {@code TxnLogBufferedWriter} on the same records. One operation: a new writer,
 * {@code asyncAddData} of every record, the max-delay timer fired once at the end (it flushes the last, partial
 * batch), every record's callback awaited, the writer closed.
 *
 * <p>Both sides measure packing, not storage: the managed ledger is a stand-in whose {@code asyncAddEntry} counts the
 * entry's bytes and completes at once on the calling thread (as pulsarkit's stand-in returns a position from
 * {@code add_entry}), and the timer is a stand-in fired by hand. The writer's tasks run on {@code executor}:
 * {@code direct} is the caller's thread ({@code Runnable::run}), {@code thread} one long-lived writer thread (the
 * broker passes one thread of an OrderedExecutor). Metrics are disabled on both sides. The setup checks that the
 * entries the writer hands the ledger are pulsarkit's batched entries byte for byte.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class TxnWriterBench {
    @Param("")
    public String data;

    @Param({"direct", "thread"})
    public String executor;

    private TxnInputs in;
    private Executor exec;
    private ExecutorService thread;
    private final StubLedger stub = new StubLedger();
    private ManagedLedger ledger;
    private final StubTimer timer = new StubTimer();

    @Setup
    public void setup() throws Exception {
        in = new TxnInputs(data);
        if (executor.equals("thread")) {
            thread = Executors.newSingleThreadExecutor();
            exec = thread;
        } else {
            exec = Runnable::run;
        }
        ledger = (ManagedLedger) Proxy.newProxyInstance(TxnWriterBench.class.getClassLoader(),
                new Class<?>[] {ManagedLedger.class}, (proxy, m, a) -> switch (m.getName()) {
                    case "getName" -> "bench-txn-log";
                    case "asyncAddEntry" -> {
                        if (a.length == 3 && a[0] instanceof ByteBuf b) {
                            stub.add(b, (AsyncCallbacks.AddEntryCallback) a[1], a[2]);
                            yield null;
                        }
                        throw new UnsupportedOperationException("stand-in ledger: " + m);
                    }
                    case "hashCode" -> System.identityHashCode(proxy);
                    case "equals" -> proxy == a[0];
                    case "toString" -> "stand-in managed ledger";
                    default -> throw new UnsupportedOperationException("stand-in ledger: " + m);
                });
        stub.captured = new ArrayList<>();
        Data.check("bytes written", in.expectedBytes, write());
        in.checkEntries("TxnWriterBench(" + executor + ")", stub.captured);
        stub.captured = null;
    }

    @TearDown
    public void tearDown() {
        if (thread != null) {
            thread.shutdownNow();
        }
    }

    @Benchmark
    public long write() throws Exception {
        stub.bytes = 0;
        List<TransactionMetadataEntry> records = in.records;
        TxnLogBufferedWriter<TransactionMetadataEntry> w = new TxnLogBufferedWriter<>(ledger, exec, timer,
                in.serializer, in.maxRecords, in.maxSize, in.maxDelayMs, true,
                DisabledTxnLogBufferedWriterMetricsStats.DISABLED_BUFFERED_WRITER_METRICS);
        Callback cb = new Callback(records.size());
        for (TransactionMetadataEntry r : records) {
            w.asyncAddData(r, cb, null);
        }
        timer.fire();
        cb.all.get(60, TimeUnit.SECONDS);
        w.close();
        return stub.bytes;
    }

    /** Counts the records written; `all` completes with the last (callbacks run on the writer's thread). */
    private static final class Callback implements TxnLogBufferedWriter.AddDataCallback {
        final CompletableFuture<Void> all = new CompletableFuture<>();
        private final int expected;
        private int done;

        Callback(int expected) {
            this.expected = expected;
        }

        @Override
        public void addComplete(Position position, Object ctx) {
            if (++done == expected) {
                all.complete(null);
            }
        }

        @Override
        public void addFailed(ManagedLedgerException e, Object ctx) {
            all.completeExceptionally(e);
        }
    }

    /** The managed ledger's add: counts (and, in the setup's check, copies) the entry, then completes at once. */
    private static final class StubLedger {
        List<byte[]> captured;
        long bytes;
        private long entryId;

        void add(ByteBuf entry, AsyncCallbacks.AddEntryCallback cb, Object ctx) {
            bytes += entry.readableBytes();
            if (captured != null) {
                captured.add(TxnInputs.bytes(entry));
            }
            cb.addComplete(PositionFactory.create(1, entryId++), entry, ctx);
        }
    }

    /** The writer's timer: keeps the last task scheduled; {@link #fire} runs it as the timer wheel would. */
    private static final class StubTimer implements Timer, Timeout {
        private volatile TimerTask task;

        @Override
        public Timeout newTimeout(TimerTask task, long delay, TimeUnit unit) {
            this.task = task;
            return this;
        }

        void fire() throws Exception {
            task.run(this);
        }

        @Override
        public Set<Timeout> stop() {
            return Set.of();
        }

        @Override
        public Timer timer() {
            return this;
        }

        @Override
        public TimerTask task() {
            return task;
        }

        @Override
        public boolean isExpired() {
            return false;
        }

        @Override
        public boolean isCancelled() {
            return false;
        }

        @Override
        public boolean cancel() {
            return true;
        }
    }
}
