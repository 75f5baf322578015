package io.pulsarkit.bench;

import com.scurrilous.circe.checksum.Crc32cIntChecksum;
import io.netty.buffer.ByteBuf;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.apache.pulsar.common.protocol.Commands;
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
import org.openjdk.jmh.annotations.Warmup;

/**
 * Per-entry CRC32C over the stored 1 KiB entries of bench/test_bench_bulk.py (entries1k/entries.bin: N entries of
 * exactly 1024 bytes back to back, broker entry metadata + magic + checksum + metadata + payload, one in a thousand
 * with a flipped payload byte). One operation is a pass over all N entries.
 *
 * <ul>
 *   <li>{@code pulsarVerify}: what Pulsar does to check a stored entry (the consumer's verifyChecksum after the
 *       broker entry metadata is skipped): Commands.skipBrokerEntryMetadataIfExist, hasChecksum, readChecksum, and
 *       Crc32cIntChecksum.computeChecksum over the rest, compared. The counterpart of pulsarkit.bulk.verify_checksums.
 *   <li>{@code jdkVerify}: the same with java.util.zip.CRC32C (over a direct ByteBuffer view) in place of
 *       circe-checksum, the fastest CRC32C the JDK has: Pulsar's check as it could be.
 *   <li>{@code circeRaw} / {@code jdkRaw}: the bare CRC32C of each whole 1 KiB entry, no parsing.
 * </ul>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class EntriesCrc32cBench {
    @Param("")
    public String data;

    private ByteBuf all;
    private ByteBuf view;
    private ByteBuffer nio;
    private int n;
    private int entrySize;
    private final CRC32C jdk = new CRC32C();

    @Setup
    public void setup() throws Exception {
        Path dir = Inputs.dir(data).resolve("entries1k");
        Properties p = Inputs.expected(dir.resolve("expected.properties"));
        all = Inputs.direct(dir.resolve("entries.bin"));
        n = (int) Inputs.expectLong(p, "entries");
        entrySize = (int) Inputs.expectLong(p, "entry_size");
        Inputs.check("entries.bin size", (long) n * entrySize, all.readableBytes());
        view = all.duplicate();
        nio = all.nioBuffer();
        Inputs.check("entries whose checksum verifies", Inputs.expectLong(p, "checksum_ok"), pulsarVerify());
        Inputs.check("entries whose checksum verifies (jdk)", Inputs.expectLong(p, "checksum_ok"), jdkVerify());
        Inputs.check("sum of raw CRC32C (circe)", Inputs.expectLong(p, "raw_crc_sum"), circeRaw());
        Inputs.check("sum of raw CRC32C (jdk)", Inputs.expectLong(p, "raw_crc_sum"), jdkRaw());
    }

    @Benchmark
    public long pulsarVerify() {
        long ok = 0;
        ByteBuf b = view;
        for (int i = 0, off = 0; i < n; i++, off += entrySize) {
            b.setIndex(off, off + entrySize);
            Commands.skipBrokerEntryMetadataIfExist(b);
            if (Commands.hasChecksum(b)) {
                int stored = Commands.readChecksum(b);
                if (stored == Crc32cIntChecksum.computeChecksum(b)) {
                    ok++;
                }
            }
        }
        return ok;
    }

    @Benchmark
    public long jdkVerify() {
        long ok = 0;
        ByteBuf b = view;
        ByteBuffer v = nio;
        for (int i = 0, off = 0; i < n; i++, off += entrySize) {
            b.setIndex(off, off + entrySize);
            Commands.skipBrokerEntryMetadataIfExist(b);
            if (Commands.hasChecksum(b)) {
                int stored = Commands.readChecksum(b);
                v.limit(off + entrySize).position(b.readerIndex());
                jdk.reset();
                jdk.update(v);
                if (stored == (int) jdk.getValue()) {
                    ok++;
                }
            }
        }
        v.clear();
        return ok;
    }

    @Benchmark
    public long circeRaw() {
        long sum = 0;
        for (int i = 0, off = 0; i < n; i++, off += entrySize) {
            sum += Integer.toUnsignedLong(Crc32cIntChecksum.computeChecksum(all, off, entrySize));
        }
        return sum;
    }

    @Benchmark
    public long jdkRaw() {
        long sum = 0;
        ByteBuffer b = nio;
        for (int i = 0, off = 0; i < n; i++, off += entrySize) {
            b.limit(off + entrySize).position(off);
            jdk.reset();
            jdk.update(b);
            sum += jdk.getValue();
        }
        b.clear();
        return sum;
    }
}
