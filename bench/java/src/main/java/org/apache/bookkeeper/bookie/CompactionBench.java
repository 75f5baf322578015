package org.apache.bookkeeper.bookie;

import io.pulsarkit.bench.Inputs;
import java.io.File;
import java.lang.reflect.Proxy;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.util.DiskChecker;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
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
 * BookKeeper's entry-log compactors on bench/test_bench_gc.py's log (gc/: one entry log written by pulsarkit, 8
 * ledgers of 16 KiB entries, the ledgers listed in expected.properties still live). One operation compacts that log
 * once: {@code entrylog} is EntryLogCompactor (the default, useTransactionalCompaction=false: live entries appended
 * to the bookie's current entry log, then flushed and fsynced), {@code transactional} is
 * TransactionalEntryLogCompactor (live entries copied into a new .log.compacting file, flushed with its ledgers map
 * and fsynced, made available by hard links), the counterpart of pulsarkit's compact_entry_log.
 *
 * <p>As in a bookie: DefaultEntryLogger over the directory, EntryLogMetadata from the log's ledgers map with the dead
 * ledgers removed. Not as in a bookie: the compaction throttle is lifted (its default is 1000 entries/s, which
 * would be all this measures), the location index update is a no-op stub (pulsarkit's figure excludes its index
 * update too), and the source log is not removed. New files are deleted after each operation; the source stays
 * in the page cache.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 2)
@Measurement(iterations = 5)
@Fork(1)
public class CompactionBench {
    @Param("")
    public String data;

    @Param({"entrylog", "transactional"})
    public String compactor;

    /** ServerConfiguration readBufferSizeBytes, the scan's read buffer: 512 is BookKeeper's default. */
    @Param({"512", "1048576"})
    public int readBufferBytes;

    private Path dir;
    private long srcLogId;
    private Set<Long> live;
    private long expectedLiveEntries;
    private Set<String> before;
    private ServerConfiguration conf;
    private DefaultEntryLogger entryLogger;
    private AbstractLogCompactor logCompactor;
    private EntryLogMetadata metadata;
    private long[] relocated;

    @Setup(Level.Trial)
    public void setupTrial() throws Exception {
        dir = Inputs.dir(data).resolve("gc");
        Properties p = Inputs.expected(dir.resolve("expected.properties"));
        srcLogId = Inputs.expectLong(p, "src_log_id");
        expectedLiveEntries = Inputs.expectLong(p, "live_entries");
        live = new HashSet<>();
        for (String s : p.getProperty("live_ledgers").split(",")) {
            live.add(Long.parseLong(s.trim()));
        }
        conf = new ServerConfiguration();
        conf.setLedgerDirNames(new String[] {dir.toString()});
        conf.setEntryLogFilePreAllocationEnabled(false);
        conf.setReadBufferBytes(readBufferBytes);
        conf.setIsThrottleByBytes(false);
        conf.setCompactionRateByEntries(Integer.MAX_VALUE);
        before = new HashSet<>(Arrays.asList(dir.resolve("current").toFile().list()));
    }

    @Setup(Level.Iteration)
    public void setup() throws Exception {
        entryLogger = new DefaultEntryLogger(conf,
                new LedgerDirsManager(conf, conf.getLedgerDirs(), new DiskChecker(0.99f, 0.99f)));
        metadata = entryLogger.getEntryLogMetadata(srcLogId, new AbstractLogCompactor.Throttler(conf));
        metadata.removeLedgerIf(l -> !live.contains(l));
        relocated = new long[] {0};
        CompactableLedgerStorage storage = (CompactableLedgerStorage) Proxy.newProxyInstance(
                CompactionBench.class.getClassLoader(), new Class<?>[] {CompactableLedgerStorage.class},
                (proxy, method, args) -> {
                    switch (method.getName()) {
                        case "updateEntriesLocations":
                            for (Object loc : (Iterable<?>) args[0]) {
                                relocated[0]++;
                            }
                            return null;
                        case "flushEntriesLocationsIndex":
                            return null;
                        default:
                            throw new UnsupportedOperationException(method.getName());
                    }
                });
        AbstractLogCompactor.LogRemovalListener keepSource = logId -> { };
        logCompactor = compactor.equals("transactional")
                ? new TransactionalEntryLogCompactor(conf, entryLogger, storage, keepSource)
                : new EntryLogCompactor(conf, entryLogger, storage, keepSource);
    }

    @Benchmark
    public long compact() {
        if (!logCompactor.compact(metadata)) {
            throw new IllegalStateException("compaction of log " + srcLogId + " failed");
        }
        return relocated[0];
    }

    @TearDown(Level.Iteration)
    public void tearDown() {
        entryLogger.close();
        Inputs.check("entries relocated", expectedLiveEntries, relocated[0]);
        for (File f : dir.resolve("current").toFile().listFiles()) {
            if (!before.contains(f.getName()) && !f.delete()) {
                throw new IllegalStateException("cannot delete " + f);
            }
        }
    }
}
