package io.pulsarkit.bench.broker;

import com.scurrilous.circe.checksum.Crc32cIntChecksum;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BiPredicate;
import org.apache.commons.lang3.tuple.ImmutableTriple;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.RawMessage;
import org.apache.pulsar.client.impl.BatchMessageIdImpl;
import org.apache.pulsar.client.impl.MessageIdImpl;
import org.apache.pulsar.client.impl.RawBatchConverter;
import org.apache.pulsar.client.impl.RawMessageImpl;
import org.apache.pulsar.common.api.proto.MessageIdData;
import org.apache.pulsar.common.api.proto.MessageMetadata;
import org.apache.pulsar.common.api.proto.SingleMessageMetadata;
import org.apache.pulsar.common.compression.CompressionCodec;
import org.apache.pulsar.common.compression.CompressionCodecProvider;
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
import org.openjdk.jmh.infra.Blackhole;

/**
 * Pulsar 4.0.7's topic compactor on the batch entries of rebatch/CODEC/entries.bin (bench/test_bench_compaction.py's
 * batches: 100 keyed messages each, 5% of them empty, compressed with CODEC), the entries held as the compactor's raw
 * reader hands them over (a RawMessageImpl over one direct buffer each, ledger 10, entry id = index). One operation
 * is a pass over all entries:
 *
 * <ul>
 *   <li>{@code extractKeys}: phase one of PublishingOrderCompactor for a batch: {@code Commands.parseMessageMetadata},
 *       then {@code RawBatchConverter.extractIdsAndKeysAndSize(raw, metadata)} (decompress, every message's id, key
 *       and payload size). The counterpart of {@code _native.bulk_compaction_keys}.
 *   <li>{@code rebatch}: phase two for a batch: {@code Commands.parseMessageMetadata}, then
 *       {@code RawBatchConverter.rebatchMessage(raw, metadata, filter, false)} keeping the batch indexes listed for
 *       the entry in rebatch/kept.txt (the filter is a BitSet lookup by batch index, cheaper than the compactor's map
 *       lookup by key). The counterpart of {@code _native.rebatch_entry} and {@code bulk_compact_by_indexes}.
 * </ul>
 *
 * <p>On a RawMessageImpl (whose buffer is a slice without room past the entry), rebatchMessage can throw
 * IndexOutOfBoundsException when the rebatched batch outgrows the compressed entry (apache/pulsar#26290, unfixed in
 * 4.0.7). The setup first counts the entries it fails on (into rebatch/CODEC/java-notes.properties); if there are
 * any, every entry is measured in a raw message whose buffer has room past the entry instead (the same code with
 * only the buffer's capacity changed). The setup then checks phase one's ids, keys and sizes against pulsarkit's, and that every rebatched entry has a valid
 * CRC32C and decompresses to pulsarkit's uncompressed batch byte for byte (the same kept messages, the same
 * placeholders); compressed bytes may differ (another compressor).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class RebatchBench {
    @Param("")
    public String data;

    @Param({"NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"})
    public String codec;

    private RawMessage[] raws;
    private BitSet[] keep;
    private BitSet current;
    private final BiPredicate<String, MessageId> filter =
            (key, id) -> current.get(((BatchMessageIdImpl) id).getBatchIndex());

    @Setup
    public void setup() throws Exception {
        Path root = Data.dir(data).resolve("rebatch");
        Path dir = root.resolve(codec);
        Properties p = Data.expected(dir.resolve("expected.properties"));
        List<byte[]> entries = Data.records(dir.resolve("entries.bin"));
        int n = entries.size();
        Data.check("entries", Data.expectLong(p, "entries"), n);
        List<String> keptLines = Files.readAllLines(root.resolve("kept.txt"));
        Data.check("kept.txt lines", n, keptLines.size());
        keep = new BitSet[n];
        for (int i = 0; i < n; i++) {
            keep[i] = new BitSet();
            for (String s : keptLines.get(i).split(",")) {
                if (!s.isBlank()) {
                    keep[i].set(Integer.parseInt(s.trim()));
                }
            }
        }
        boolean roomy = countIssue26290(entries, dir.resolve("java-notes.properties")) > 0;
        raws = new RawMessage[n];
        for (int i = 0; i < n; i++) {
            byte[] e = entries.get(i);
            if (roomy) {
                int uncompressed = Commands.parseMessageMetadata(Unpooled.wrappedBuffer(e)).getUncompressedSize();
                raws[i] = new RoomyRawMessage(id(i), Data.direct(e, e.length + uncompressed + 1024));
            } else {
                ByteBuf b = Data.direct(e, 0);
                raws[i] = new RawMessageImpl(id(i), b); // holds its own reference (a retained slice)
                b.release();
            }
        }
        checkPhaseOne(p);
        checkRebatch(p, dir.resolve("rebatched.bin"));
    }

    private static MessageIdData id(int i) {
        return new MessageIdData().setLedgerId(10).setEntryId(i);
    }

    @Benchmark
    public long extractKeys(Blackhole bh) throws IOException {
        long messages = 0;
        for (RawMessage raw : raws) {
            MessageMetadata md = Commands.parseMessageMetadata(raw.getHeadersAndPayload());
            List<ImmutableTriple<MessageId, String, Integer>> ids = RawBatchConverter.extractIdsAndKeysAndSize(raw, md);
            messages += ids.size();
            bh.consume(ids);
        }
        return messages;
    }

    @Benchmark
    public long rebatch() throws IOException {
        long bytes = 0;
        for (int i = 0; i < raws.length; i++) {
            RawMessage raw = raws[i];
            current = keep[i];
            MessageMetadata md = Commands.parseMessageMetadata(raw.getHeadersAndPayload());
            Optional<RawMessage> out = RawBatchConverter.rebatchMessage(raw, md, filter, false);
            if (out.isPresent()) {
                bytes += out.get().getHeadersAndPayload().readableBytes();
                out.get().close();
            }
        }
        return bytes;
    }

    // --- checks against pulsarkit's results -------------------------------------------------------------------

    private void checkPhaseOne(Properties p) throws IOException {
        long messages = 0;
        long sizes = 0;
        long indexes = 0;
        long keyHashes = 0;
        for (RawMessage raw : raws) {
            MessageMetadata md = Commands.parseMessageMetadata(raw.getHeadersAndPayload());
            for (ImmutableTriple<MessageId, String, Integer> t : RawBatchConverter.extractIdsAndKeysAndSize(raw, md)) {
                messages++;
                sizes += t.getRight();
                indexes += ((BatchMessageIdImpl) t.getLeft()).getBatchIndex();
                keyHashes += t.getMiddle().hashCode();
            }
        }
        Data.check(codec + " phase one: messages", Data.expectLong(p, "messages"), messages);
        Data.check(codec + " phase one: sum of payload sizes", Data.expectLong(p, "payload_size_sum"), sizes);
        Data.check(codec + " phase one: sum of batch indexes", Data.expectLong(p, "batch_index_sum"), indexes);
        Data.check(codec + " phase one: sum of key hashCodes", Data.expectLong(p, "key_hash_sum"), keyHashes);
    }

    /** rebatched.bin: per entry an int32 count of kept messages (-1: pulsarkit wrote nothing) and, unless -1, an
     *  int32 length and pulsarkit's rebatched batch, decompressed. */
    private void checkRebatch(Properties p, Path expectedFile) throws IOException {
        ByteBuffer exp = ByteBuffer.wrap(Files.readAllBytes(expectedFile));
        CompressionCodec c = null;
        long outputs = 0;
        long keptMessages = 0;
        for (int i = 0; i < raws.length; i++) {
            current = keep[i];
            RawMessage raw = raws[i];
            MessageMetadata md = Commands.parseMessageMetadata(raw.getHeadersAndPayload());
            Optional<RawMessage> out = RawBatchConverter.rebatchMessage(raw, md, filter, false);
            int expectedKept = exp.getInt();
            if (expectedKept < 0) {
                if (out.isPresent()) {
                    throw new IllegalStateException(codec + " entry " + i + ": Pulsar kept messages, pulsarkit none");
                }
                continue;
            }
            byte[] expectedBatch = new byte[exp.getInt()];
            exp.get(expectedBatch);
            if (out.isEmpty()) {
                throw new IllegalStateException(codec + " entry " + i + ": pulsarkit kept messages, Pulsar none");
            }
            outputs++;
            ByteBuf b = out.get().getHeadersAndPayload();
            if (!Commands.hasChecksum(b)) {
                throw new IllegalStateException(codec + " entry " + i + ": no checksum");
            }
            int stored = Commands.readChecksum(b);
            int start = b.readerIndex();
            Data.check(codec + " entry " + i + " CRC32C", stored, Crc32cIntChecksum.computeChecksum(b));
            b.readerIndex(start);
            MessageMetadata outMd = Commands.parseMessageMetadata(b);
            Data.check(codec + " entry " + i + " compression", md.getCompression().getValue(),
                    outMd.getCompression().getValue());
            c = CompressionCodecProvider.getCompressionCodec(outMd.getCompression());
            ByteBuf batch = c.decode(b, outMd.getUncompressedSize());
            byte[] got = ByteBufUtil.getBytes(batch);
            if (!Arrays.equals(expectedBatch, got)) {
                throw new IllegalStateException(codec + " entry " + i + ": the rebatched batch differs from pulsarkit's ("
                        + got.length + " vs " + expectedBatch.length + " bytes)");
            }
            int kept = 0;
            SingleMessageMetadata smm = new SingleMessageMetadata();
            int num = outMd.getNumMessagesInBatch();
            for (int j = 0; j < num; j++) {
                ByteBuf payload = Commands.deSerializeSingleMessageInBatch(batch, smm, j, num);
                if (!smm.isCompactedOut()) {
                    kept++;
                }
                payload.release();
            }
            batch.release();
            Data.check(codec + " entry " + i + " kept messages", expectedKept, kept);
            keptMessages += kept;
            out.get().close();
        }
        Data.check(codec + " rebatched entries", Data.expectLong(p, "outputs"), outputs);
        Data.check(codec + " kept messages", Data.expectLong(p, "kept_messages"), keptMessages);
    }

    /** How many entries rebatchMessage fails on as the compactor hands them over (a RawMessageImpl). */
    private int countIssue26290(List<byte[]> entries, Path notes) throws IOException {
        TreeMap<String, Integer> failures = new TreeMap<>();
        for (int i = 0; i < entries.size(); i++) {
            current = keep[i];
            RawMessage raw = new RawMessageImpl(id(i), Unpooled.wrappedBuffer(entries.get(i)));
            try {
                MessageMetadata md = Commands.parseMessageMetadata(raw.getHeadersAndPayload());
                RawBatchConverter.rebatchMessage(raw, md, filter, false).ifPresent(RawMessage::close);
            } catch (RuntimeException e) {
                failures.merge(e.getClass().getSimpleName(), 1, Integer::sum);
            } finally {
                raw.close();
            }
        }
        StringBuilder s = new StringBuilder("entries=" + entries.size() + "\n");
        failures.forEach((k, v) -> s.append("plain_failures.").append(k).append('=').append(v).append('\n'));
        Files.writeString(notes, s.toString(), StandardCharsets.UTF_8);
        return failures.values().stream().mapToInt(Integer::intValue).sum();
    }

    /** A raw message whose headers-and-payload buffer has room past the entry's bytes (see the class comment). */
    private static final class RoomyRawMessage implements RawMessage {
        private final MessageIdData id;
        private final ByteBuf buf;

        RoomyRawMessage(MessageIdData id, ByteBuf buf) {
            this.id = id;
            this.buf = buf;
        }

        @Override
        public MessageId getMessageId() {
            return new MessageIdImpl(id.getLedgerId(), id.getEntryId(), id.getPartition());
        }

        @Override
        public MessageIdData getMessageIdData() {
            return id;
        }

        @Override
        public ByteBuf getHeadersAndPayload() {
            return buf.duplicate(); // keeps the capacity, unlike RawMessageImpl's slice
        }

        @Override
        public ByteBuf serialize() {
            throw new UnsupportedOperationException();
        }

        @Override
        public void close() {
            // The buffers live as long as the benchmark.
        }
    }
}
