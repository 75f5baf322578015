package io.pulsarkit.bench;

import com.scurrilous.circe.checksum.Crc32cIntChecksum;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
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
 * CRC32C of one buffer (the driver's crc/SIZE.bin): java.util.zip.CRC32C over a byte[] and over a direct
 * ByteBuffer, and circe-checksum's Crc32cIntChecksum.computeChecksum over a direct ByteBuf, which is what Pulsar
 * (Commands, the consumer's checksum check) and BookKeeper's CRC32C digest manager call.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class Crc32cBench {
    @Param("")
    public String data;

    @Param({"1024", "65536", "1048576"})
    public int size;

    private byte[] heap;
    private ByteBuffer directNio;
    private ByteBuf direct;
    private final CRC32C jdk = new CRC32C();

    @Setup
    public void setup() throws Exception {
        Path dir = Inputs.dir(data).resolve("crc");
        direct = Inputs.direct(dir.resolve(size + ".bin"));
        Inputs.check("crc input size", size, direct.readableBytes());
        heap = ByteBufUtil.getBytes(direct);
        directNio = direct.nioBuffer();
        long want = Inputs.expectLong(Inputs.expected(dir.resolve(size + ".properties")), "crc32c");
        // Every implementation must agree with pulsarkit's value, computed by the driver.
        Inputs.check("java.util.zip.CRC32C", want, jdkHeap());
        Inputs.check("java.util.zip.CRC32C (direct)", want, jdkDirect());
        Inputs.check("Crc32cIntChecksum", want, Integer.toUnsignedLong(circeDirect()));
    }

    @Benchmark
    public long jdkHeap() {
        jdk.reset();
        jdk.update(heap, 0, heap.length);
        return jdk.getValue();
    }

    @Benchmark
    public long jdkDirect() {
        jdk.reset();
        directNio.clear();
        jdk.update(directNio);
        return jdk.getValue();
    }

    @Benchmark
    public int circeDirect() {
        return Crc32cIntChecksum.computeChecksum(direct);
    }

    /** Which implementation circe-checksum picked (JNI SSE4.2 library, or the JDK's CRC32C by reflection). */
    public static String circeImplementation() {
        try {
            var f = Crc32cIntChecksum.class.getDeclaredField("CRC32C_HASH");
            f.setAccessible(true);
            return f.get(null).getClass().getSimpleName();
        } catch (ReflectiveOperationException e) {
            return "unknown";
        }
    }
}
