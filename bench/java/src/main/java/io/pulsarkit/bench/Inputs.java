package io.pulsarkit.bench;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Properties;

/** The inputs bench/java_compare.py writes (the same files pulsarkit is measured on), and their expected results. */
public final class Inputs {
    private Inputs() {
    }

    /** The data directory: the JMH parameter `data`, passed by the driver with `-p data=DIR`. */
    public static Path dir(String data) {
        if (data == null || data.isEmpty()) {
            throw new IllegalStateException("run with -p data=DIR (bench/java_compare.py writes DIR)");
        }
        return Path.of(data);
    }

    /** A whole file in one direct buffer (netty's unsafe direct ByteBuf, with a memory address, as Pulsar's
     *  pooled buffers have). */
    public static ByteBuf direct(Path file) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size > Integer.MAX_VALUE) {
                throw new IOException(file + " is over 2 GiB");
            }
            ByteBuffer nio = ByteBuffer.allocateDirect((int) size);
            while (nio.hasRemaining()) {
                if (ch.read(nio) < 0) {
                    throw new IOException("short read of " + file);
                }
            }
            nio.flip();
            return Unpooled.wrappedBuffer(nio);
        }
    }

    /** `key=value` lines the driver writes next to each input (counts, checksums). */
    public static Properties expected(Path file) throws IOException {
        Properties p = new Properties();
        try (var r = Files.newBufferedReader(file)) {
            p.load(r);
        }
        return p;
    }

    public static long expectLong(Properties p, String key) {
        String v = p.getProperty(key);
        if (v == null) {
            throw new IllegalStateException("expected value " + key + " missing");
        }
        return Long.parseLong(v.trim());
    }

    public static void check(String what, long expected, long got) {
        if (expected != got) {
            throw new IllegalStateException(what + ": expected " + expected + ", got " + got);
        }
    }
}
