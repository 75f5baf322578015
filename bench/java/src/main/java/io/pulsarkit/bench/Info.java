package io.pulsarkit.bench;

import org.apache.bookkeeper.bookie.DefaultEntryLogger;
import org.apache.pulsar.common.protocol.Commands;

/** One line of JSON: the JVM and library versions measured, and which CRC32C circe-checksum uses. */
public final class Info {
    private Info() {
    }

    public static void main(String[] args) {
        System.out.printf("{\"java\": \"%s\", \"vm\": \"%s %s\", \"bookkeeper\": \"%s\", \"pulsar_common\": \"%s\","
                        + " \"circe_crc32c\": \"%s\", \"jmh\": \"%s\"}%n",
                System.getProperty("java.version"), System.getProperty("java.vm.name"),
                System.getProperty("java.vm.version"), version(DefaultEntryLogger.class), version(Commands.class),
                Crc32cBench.circeImplementation(), version(org.openjdk.jmh.Main.class));
    }

    private static String version(Class<?> c) {
        String v = c.getPackage().getImplementationVersion();
        if (v == null) {
            // Some jars carry no Implementation-Version; their file name does.
            String path = c.getProtectionDomain().getCodeSource().getLocation().getPath();
            v = path.substring(path.lastIndexOf('/') + 1);
        }
        return v;
    }
}
