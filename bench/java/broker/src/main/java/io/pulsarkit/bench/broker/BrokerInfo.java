package io.pulsarkit.bench.broker;

import java.lang.reflect.Field;
import org.apache.pulsar.client.impl.RawBatchConverter;
import org.apache.pulsar.common.api.proto.CompressionType;
import org.apache.pulsar.common.compression.CompressionCodecProvider;
import org.apache.pulsar.transaction.coordinator.impl.TxnLogBufferedWriter;

/** One line of JSON: the jars this project measures, and the classes behind the codecs. */
public final class BrokerInfo {
    private BrokerInfo() {
    }

    public static void main(String[] args) {
        StringBuilder codecs = new StringBuilder();
        for (CompressionType t : CompressionType.values()) {
            if (t != CompressionType.NONE) {
                codecs.append(codecs.length() == 0 ? "" : ", ").append(t).append(": ")
                        .append(library(CompressionCodecProvider.getCompressionCodec(t).getClass()));
            }
        }
        System.out.printf("{\"java\": \"%s\", \"vm\": \"%s %s\", \"pulsar_broker\": \"%s\", \"txn_coordinator\": \"%s\","
                        + " \"codecs\": \"%s\", \"jmh\": \"%s\"}%n",
                System.getProperty("java.version"), System.getProperty("java.vm.name"),
                System.getProperty("java.vm.version"), version(RawBatchConverter.class),
                version(TxnLogBufferedWriter.class), codecs, version(org.openjdk.jmh.Main.class));
    }

    /** The compression library a codec class holds its (de)compressors from, read off its fields' types. */
    private static String library(Class<?> codec) {
        for (Field f : codec.getDeclaredFields()) {
            String type = f.getGenericType().getTypeName();
            if (type.contains("io.airlift.compress")) {
                return "aircompressor";
            }
            if (type.contains("java.util.zip")) {
                return "java.util.zip";
            }
            if (type.contains("net.jpountz")) {
                return "lz4-java";
            }
            if (type.contains("com.github.luben")) {
                return "zstd-jni";
            }
        }
        return codec.getSimpleName();
    }

    private static String version(Class<?> c) {
        String v = c.getPackage().getImplementationVersion();
        if (v == null) {
            String path = c.getProtectionDomain().getCodeSource().getLocation().getPath();
            v = path.substring(path.lastIndexOf('/') + 1);
        }
        return v;
    }
}
