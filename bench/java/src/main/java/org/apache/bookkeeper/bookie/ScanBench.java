package org.apache.bookkeeper.bookie;

// In BookKeeper's package (as tests/java/bookkeeper-oracle) for the package-private pieces a bookie uses.

import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.pulsarkit.bench.Inputs;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.bookie.storage.EntryLogScanner;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.proto.DataFormats.LedgerMetadataFormat.DigestType;
import org.apache.bookkeeper.proto.checksum.DigestManager;
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
 * DefaultEntryLogger.scanEntryLog (through ReadOnlyDefaultEntryLogger, as `bookkeeper shell readlog` and the
 * garbage collector's metadata scan use it, default ServerConfiguration) over every entry log of a directory the
 * driver wrote with pulsarkit's EntryLogWriter into its current/ (scan-1k: bench/test_bench_storage.py's logs, 1 KiB Pulsar
 * entries; scan-16k: the same with 16 KiB entries). Page cache warm. One operation scans every log once. The
 * scanner reads through a BufferedReadChannel of readBufferBytes: BookKeeper's default 512, and 1 MiB.
 *
 * <p>{@code verify=false}: the scanner's callback only reads the entry id. {@code verify=true}: each entry's CRC32C
 * digest is checked with BookKeeper's own DigestManager (one per ledger, as the client has), verifyDigestAndReturnData:
 * the same work pulsarkit.bookkeeper.scan_entry_logs does per entry. {@code plainRead}: the physical ceiling, a
 * FileChannel read of the same files in 1 MiB chunks into one direct buffer.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class ScanBench {
    @Param("")
    public String data;

    @Param({"scan-1k", "scan-16k"})
    public String logs;

    /** ServerConfiguration readBufferSizeBytes: 512 is BookKeeper's default (a pread per 512 bytes scanned). */
    @Param({"512", "1048576"})
    public int readBufferBytes;

    private ReadOnlyDefaultEntryLogger entryLogger;
    private long[] logIds;
    private File[] files;
    private long expectedEntries;
    private final Map<Long, DigestManager> digests = new HashMap<>();
    private final ByteBuffer chunk = ByteBuffer.allocateDirect(1 << 20);

    @Setup(Level.Trial)
    public void setup() throws Exception {
        Path dir = Inputs.dir(data).resolve(logs);
        Properties p = Inputs.expected(dir.resolve("expected.properties"));
        expectedEntries = Inputs.expectLong(p, "entries");
        ServerConfiguration c = new ServerConfiguration();
        c.setLedgerDirNames(new String[] {dir.toString()});
        c.setReadBufferBytes(readBufferBytes);
        entryLogger = new ReadOnlyDefaultEntryLogger(c);
        files = dir.resolve("current").toFile().listFiles((d, name) -> name.endsWith(".log"));
        Arrays.sort(files);
        logIds = Arrays.stream(files).mapToLong(f -> Long.parseLong(f.getName().replace(".log", ""), 16)).toArray();
        Inputs.check("entries scanned", expectedEntries, scan(false));
        Inputs.check("entries scanned and verified", expectedEntries, scan(true));
        Inputs.check("bytes read", Inputs.expectLong(p, "bytes"), plainRead());
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        entryLogger.close();
    }

    private DigestManager digest(long ledgerId) {
        return digests.computeIfAbsent(ledgerId, id -> {
            try {
                return DigestManager.instantiate(id, new byte[0], DigestType.CRC32C, UnpooledByteBufAllocator.DEFAULT,
                        false);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
    }

    private long scan(boolean verify) throws IOException {
        long[] count = {0, 0};
        EntryLogScanner scanner = new EntryLogScanner() {
            @Override
            public boolean accept(long ledgerId) {
                return true;
            }

            @Override
            public void process(long ledgerId, long offset, ByteBuf entry) throws IOException {
                long entryId = entry.getLong(entry.readerIndex() + 8);
                if (verify) {
                    try {
                        ByteBuf payload = digest(ledgerId).verifyDigestAndReturnData(entryId, entry);
                        count[1] += payload.readableBytes();
                    } catch (Exception e) {
                        throw new IOException("digest of ledger " + ledgerId + " entry " + entryId, e);
                    }
                }
                count[1] += entryId;
                count[0]++;
            }
        };
        for (long id : logIds) {
            entryLogger.scanEntryLog(id, scanner);
        }
        return count[0];
    }

    @Benchmark
    public long scanNoVerify() throws IOException {
        return scan(false);
    }

    @Benchmark
    public long scanVerifyCrc32c() throws IOException {
        return scan(true);
    }

    @Benchmark
    public long plainRead() throws IOException {
        long total = 0;
        for (File f : files) {
            try (FileChannel ch = FileChannel.open(f.toPath(), StandardOpenOption.READ)) {
                int r;
                while ((r = ch.read(chunk.clear())) > 0) {
                    total += r;
                }
            }
        }
        return total;
    }
}
