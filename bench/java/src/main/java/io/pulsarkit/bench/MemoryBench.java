package io.pulsarkit.bench;

import io.netty.buffer.ByteBuf;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;
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
 * The physical ceiling for the in-memory cases: reading the same bytes (an input file, loaded into a long[]) and
 * summing them as 64-bit words, i.e. the memory (or cache, for the small CRC32C inputs) read bandwidth that any
 * checksum or decoder over those bytes is bounded by.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class MemoryBench {
    @Param("")
    public String data;

    @Param({"crc/1024.bin", "crc/65536.bin", "crc/1048576.bin", "entries1k/entries.bin", "metadata/entries.bin"})
    public String input;

    private long[] words;
    private long[] copy;

    @Setup
    public void setup() throws Exception {
        ByteBuf b = Inputs.direct(Inputs.dir(data).resolve(input));
        words = new long[b.readableBytes() / 8];
        b.nioBuffer().order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(words);
        b.release();
        copy = new long[words.length];
    }

    @Benchmark
    public long sumWords() {
        // One accumulator: C2 vectorizes this reduction (AVX2/AVX-512 adds of 4-8 words per instruction), so it runs
        // at the cache's or memory's read bandwidth rather than at one load per cycle.
        long[] w = words;
        long s = 0;
        for (int i = 0; i < w.length; i++) {
            s += w[i];
        }
        return s;
    }

    @Benchmark
    public long[] copyWords() {
        System.arraycopy(words, 0, copy, 0, words.length);
        return copy;
    }
}
