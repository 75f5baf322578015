package io.pulsarkit.bench.broker;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

/**
 * The inputs bench/java_compare.py writes for this project (the same files pulsarkit is measured on) and their
 * expected results; bench/java's Inputs, for the 4.0.7 classpath.
 */
final class Data {
    private Data() {
    }

    /** The data directory: the JMH parameter `data`, passed by the driver with `-p data=DIR`. */
    static Path dir(String data) {
        if (data == null || data.isEmpty()) {
            throw new IllegalStateException("run with -p data=DIR (bench/java_compare.py writes DIR)");
        }
        return Path.of(data);
    }

    /** Records of a file of [int32 big-endian length][bytes] records. */
    static List<byte[]> records(Path file) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(file));
        List<byte[]> out = new ArrayList<>();
        while (b.hasRemaining()) {
            byte[] r = new byte[b.getInt()];
            b.get(r);
            out.add(r);
        }
        return out;
    }

    /** One record in a direct buffer with {@code room} bytes of capacity past it (netty's unsafe direct ByteBuf,
     *  with a memory address, as the broker's pooled buffers have). */
    static ByteBuf direct(byte[] record, int room) {
        ByteBuf b = Unpooled.directBuffer(record.length + room);
        b.writeBytes(record);
        return b;
    }

    /** `key=value` lines the driver writes next to each input (counts, sums). */
    static Properties expected(Path file) throws IOException {
        Properties p = new Properties();
        try (var r = Files.newBufferedReader(file)) {
            p.load(r);
        }
        return p;
    }

    static long expectLong(Properties p, String key) {
        String v = p.getProperty(key);
        if (v == null) {
            throw new IllegalStateException("expected value " + key + " missing");
        }
        return Long.parseLong(v.trim());
    }

    static void check(String what, long expected, long got) {
        if (expected != got) {
            throw new IllegalStateException(what + ": expected " + expected + ", got " + got);
        }
    }
}
