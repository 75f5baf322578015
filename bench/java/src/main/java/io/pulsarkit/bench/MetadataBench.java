package io.pulsarkit.bench;

import com.scurrilous.circe.checksum.Crc32cIntChecksum;
import io.netty.buffer.ByteBuf;
import java.nio.file.Path;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.common.api.proto.BrokerEntryMetadata;
import org.apache.pulsar.common.api.proto.KeyValue;
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
 * Pulsar's own entry parsing over the stored entries of bench/test_bench_codec.py's decode_metadata benchmark
 * (metadata/entries.bin: N records of a 4-byte big-endian length and the entry: broker entry metadata, magic and
 * CRC32C, MessageMetadata of a producer batch of 5-20 JSON messages compressed with each codec in turn).
 * One operation is a pass over all N entries, each entry a view of one direct buffer, as the broker reads them.
 *
 * <ul>
 *   <li>{@code parseMetadata}: Commands.parseBrokerEntryMetadataIfExist and Commands.parseMessageMetadata (the
 *       LightProto MessageMetadata reused), then the eight fields the Python baseline reads. The counterpart of
 *       pulsarkit.bulk.decode_metadata.
 *   <li>{@code explode}: what a consumer does with each entry: broker entry metadata parsed, checksum verified with
 *       Crc32cIntChecksum, metadata parsed, the payload decompressed by Pulsar's codec, every message split out
 *       with Commands.deSerializeSingleMessageInBatch (its key, properties, event time and payload slice read).
 *       The counterpart of pulsarkit.bulk.explode_messages (which verifies the checksum by default).
 * </ul>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class MetadataBench {
    @Param("")
    public String data;

    private ByteBuf all;
    private ByteBuf view;
    private int[] offsets;
    private int[] lengths;
    private final MessageMetadata md = new MessageMetadata();
    private final SingleMessageMetadata smm = new SingleMessageMetadata();

    @Setup
    public void setup() throws Exception {
        Path dir = Inputs.dir(data).resolve("metadata");
        Properties p = Inputs.expected(dir.resolve("expected.properties"));
        all = Inputs.direct(dir.resolve("entries.bin"));
        int n = (int) Inputs.expectLong(p, "entries");
        offsets = new int[n];
        lengths = new int[n];
        int pos = 0;
        for (int i = 0; i < n; i++) {
            lengths[i] = all.getInt(pos);
            offsets[i] = pos + 4;
            pos += 4 + lengths[i];
        }
        Inputs.check("metadata/entries.bin size", all.readableBytes(), pos);
        view = all.duplicate();
        Blackhole bh = new Blackhole("Today's password is swordfish. I understand instantiating Blackholes directly is dangerous.");
        Inputs.check("sum of sequence_id + publish_time + num_messages", Inputs.expectLong(p, "metadata_sum"),
                parseMetadata(bh));
        Inputs.check("messages exploded", Inputs.expectLong(p, "messages"), explode(bh));
        bh.evaporate("Yes, I am Stephen Hawking, and know a thing or two about black holes.");
    }

    @Benchmark
    public long parseMetadata(Blackhole bh) {
        long sum = 0;
        ByteBuf b = view;
        MessageMetadata m = md;
        for (int i = 0; i < offsets.length; i++) {
            b.setIndex(offsets[i], offsets[i] + lengths[i]);
            BrokerEntryMetadata bem = Commands.parseBrokerEntryMetadataIfExist(b);
            if (bem != null) {
                bh.consume(bem.getBrokerTimestamp());
                bh.consume(bem.getIndex());
            }
            Commands.parseMessageMetadata(b, m);
            // The eight fields the upb baseline of bench/test_bench_codec.py reads.
            int num = m.hasNumMessagesInBatch() ? m.getNumMessagesInBatch() : 1;
            sum += m.getSequenceId() + m.getPublishTime() + num;
            bh.consume(m.getProducerName());
            bh.consume(m.getCompression());
            bh.consume(m.getUncompressedSize());
            bh.consume(m.hasPartitionKey() ? m.getPartitionKey() : null);
            bh.consume(m.getEventTime());
        }
        return sum;
    }

    @Benchmark
    public long explode(Blackhole bh) throws Exception {
        long messages = 0;
        ByteBuf b = view;
        MessageMetadata m = md;
        SingleMessageMetadata s = smm;
        for (int i = 0; i < offsets.length; i++) {
            b.setIndex(offsets[i], offsets[i] + lengths[i]);
            BrokerEntryMetadata bem = Commands.parseBrokerEntryMetadataIfExist(b);
            if (bem != null) {
                bh.consume(bem.getBrokerTimestamp());
                bh.consume(bem.getIndex());
            }
            if (Commands.hasChecksum(b)) {
                int start = b.readerIndex();
                int stored = Commands.readChecksum(b);
                if (stored != Crc32cIntChecksum.computeChecksum(b)) {
                    throw new IllegalStateException("checksum mismatch in entry " + i);
                }
                b.readerIndex(start);
            }
            Commands.parseMessageMetadata(b, m);
            bh.consume(m.getPublishTime());
            bh.consume(m.getProducerName());
            bh.consume(m.getSequenceId());
            CompressionCodec codec = CompressionCodecProvider.getCompressionCodec(m.getCompression());
            ByteBuf body = codec.decode(b, m.getUncompressedSize());
            try {
                if (m.hasNumMessagesInBatch()) {
                    int n = m.getNumMessagesInBatch();
                    for (int j = 0; j < n; j++) {
                        ByteBuf payload = Commands.deSerializeSingleMessageInBatch(body, s, j, n);
                        bh.consume(s.hasPartitionKey() ? s.getPartitionKey() : null);
                        for (int k = 0; k < s.getPropertiesCount(); k++) {
                            KeyValue kv = s.getPropertyAt(k);
                            bh.consume(kv.getKey());
                            bh.consume(kv.getValue());
                        }
                        bh.consume(s.hasEventTime() ? s.getEventTime() : 0L);
                        bh.consume(payload.readableBytes());
                        payload.release();
                        messages++;
                    }
                } else {
                    bh.consume(body.readableBytes());
                    messages++;
                }
            } finally {
                body.release();
            }
        }
        return messages;
    }
}
