package io.pulsarkit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.scurrilous.circe.checksum.Crc32cIntChecksum;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.commons.lang3.tuple.ImmutableTriple;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.RawMessage;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.impl.BatchMessageIdImpl;
import org.apache.pulsar.client.impl.MessageIdImpl;
import org.apache.pulsar.client.impl.MessageImpl;
import org.apache.pulsar.client.impl.RawBatchConverter;
import org.apache.pulsar.client.impl.RawMessageImpl;
import org.apache.pulsar.common.api.proto.BrokerEntryMetadata;
import org.apache.pulsar.common.api.proto.KeyValue;
import org.apache.pulsar.common.api.proto.MessageIdData;
import org.apache.pulsar.common.api.proto.MessageMetadata;
import org.apache.pulsar.common.api.proto.SingleMessageMetadata;
import org.apache.pulsar.common.compression.CompressionCodec;
import org.apache.pulsar.common.compression.CompressionCodecProvider;
import org.apache.pulsar.common.protocol.Commands;

/**
 * Line-oriented JSON server over stdin/stdout (protocol of {@code tests/oracle.py}) that runs Pulsar's own
 * topic-compaction byte code on entries handed to it as hex:
 *
 * <ul>
 *   <li>{@code parse_batch}: the entry as the broker and the client read it: {@code Commands}' broker entry
 *       metadata, checksum and {@code parseMessageMetadata}, the codec's {@code decode}, every record through
 *       {@code Commands.deSerializeSingleMessageInBatch}, the messages a consumer delivers (the loop of
 *       {@code ConsumerImpl.receiveIndividualMessagesFromBatch} / {@code newSingleMessage}: compacted-out records
 *       skipped, the rest through {@code MessageImpl.create}), and the compactor's phase-one view
 *       ({@code RawBatchConverter.extractIdsAndKeysAndSize}).</li>
 *   <li>{@code rebatch}: {@code RawBatchConverter.rebatchMessage(RawMessage, MessageMetadata, BiPredicate,
 *       boolean)} with the filter {@code keep contains batch index}, as phase two of the compactor calls it.</li>
 *   <li>{@code raw_serialize} / {@code raw_deserialize}: {@code RawMessageImpl.serialize} and
 *       {@code RawMessageImpl.deserializeFrom}, the compacted ledger's entry framing.</li>
 * </ul>
 *
 * <p>Message ids travel as unsigned 64-bit numbers (the uint64 of {@code MessageIdData}); absent fields as null.
 */
public final class CompactionOracle {
    private static final ObjectMapper M = new ObjectMapper();
    private static final JsonNodeFactory F = JsonNodeFactory.instance;
    private static final String TOPIC = "persistent://public/default/compaction-oracle";

    private CompactionOracle() {}

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode resp = F.objectNode();
            try {
                JsonNode req = M.readTree(line);
                resp.set("id", req.path("id"));
                String op = req.path("op").asText();
                if (op.equals("stop")) {
                    resp.put("ok", true);
                    out.println(M.writeValueAsString(resp));
                    out.flush();
                    return;
                }
                resp.set("result", dispatch(op, req));
                resp.put("ok", true);
            } catch (Throwable t) {
                Throwable c = t instanceof InvocationTargetException ite && ite.getCause() != null ? ite.getCause() : t;
                resp.put("ok", false);
                resp.put("error", c.getClass().getName());
                StringBuilder msg = new StringBuilder(String.valueOf(c.getMessage()));
                StackTraceElement[] st = c.getStackTrace();
                for (int i = 0; i < Math.min(8, st.length); i++) {
                    msg.append("\n    at ").append(st[i]);
                }
                resp.put("message", msg.toString());
            }
            out.println(M.writeValueAsString(resp));
            out.flush();
        }
    }

    private static JsonNode dispatch(String op, JsonNode r) throws Exception {
        return switch (op) {
            case "info" -> info();
            case "parse_batch" -> parseBatch(bytes(r.get("data")), messageId(r));
            case "rebatch" -> rebatch(bytes(r.get("data")), messageId(r), r.get("keep"),
                    r.path("retain_null_key").asBoolean(false), r.path("with_metadata").asBoolean(false));
            case "raw_serialize" -> rawSerialize(bytes(r.get("data")), messageId(r));
            case "raw_deserialize" -> rawDeserialize(bytes(r.get("data")));
            default -> throw new IllegalArgumentException("unknown op " + op);
        };
    }

    private static JsonNode info() {
        ObjectNode o = F.objectNode();
        o.put("java", System.getProperty("java.version"));
        for (Class<?> c : List.of(RawBatchConverter.class, RawMessageImpl.class, Commands.class, MessageImpl.class,
                MessageMetadata.class)) {
            o.put(c.getSimpleName(), c.getProtectionDomain().getCodeSource().getLocation().toString());
        }
        // PIP-429's field: absent from 4.0.7's MessageMetadata (its parser skips field 31 as unknown).
        boolean known = false;
        for (var m : MessageMetadata.class.getMethods()) {
            known |= m.getName().toLowerCase().contains("compactedbatchindex");
        }
        o.put("knows_compacted_batch_indexes", known);
        return o;
    }

    // --- bytes and numbers -----------------------------------------------------------------------------------

    private static byte[] bytes(JsonNode hexNode) {
        return ByteBufUtil.decodeHexDump(hexNode.asText());
    }

    private static String hex(ByteBuf b) {
        return ByteBufUtil.hexDump(b);
    }

    private static JsonNode unsigned(long v) {
        return F.numberNode(new BigInteger(Long.toUnsignedString(v)));
    }

    /** ledger / entry (uint64), partition and batch_index (null: not set) of a request. */
    private static MessageIdData messageId(JsonNode r) {
        MessageIdData id = new MessageIdData()
                .setLedgerId(r.path("ledger").bigIntegerValue().longValue())
                .setEntryId(r.path("entry").bigIntegerValue().longValue());
        if (r.hasNonNull("partition")) {
            id.setPartition(r.get("partition").asInt());
        }
        if (r.hasNonNull("batch_index")) {
            id.setBatchIndex(r.get("batch_index").asInt());
        }
        return id;
    }

    private static ArrayNode properties(List<KeyValue> kvs) {
        ArrayNode a = F.arrayNode();
        for (KeyValue kv : kvs) {
            a.add(F.arrayNode().add(kv.getKey()).add(kv.getValue()));
        }
        return a;
    }

    // --- reading a batch -------------------------------------------------------------------------------------

    private static JsonNode parseBatch(byte[] data, MessageIdData id) throws Exception {
        ObjectNode o = F.objectNode();
        ByteBuf buf = Unpooled.wrappedBuffer(data);
        BrokerEntryMetadata bem = Commands.peekBrokerEntryMetadataIfExist(buf);
        if (bem != null) {
            ObjectNode b = o.putObject("broker_entry_metadata");
            b.set("broker_timestamp", bem.hasBrokerTimestamp() ? unsigned(bem.getBrokerTimestamp()) : null);
            b.set("index", bem.hasIndex() ? unsigned(bem.getIndex()) : null);
        } else {
            o.putNull("broker_entry_metadata");
        }
        buf = Commands.skipBrokerEntryMetadataIfExist(buf);
        int headersStart = buf.readerIndex();
        o.put("headers_start", headersStart);
        // The consumer's verifyChecksum: checksum over everything after it.
        boolean hasChecksum = Commands.hasChecksum(buf);
        o.put("has_checksum", hasChecksum);
        if (hasChecksum) {
            ByteBuf dup = buf.duplicate();
            int stored = Commands.readChecksum(dup);
            o.put("checksum_ok", stored == Crc32cIntChecksum.computeChecksum(dup));
        }
        MessageMetadata md = Commands.parseMessageMetadata(buf);
        o.set("metadata", metadataJson(md));
        // LightProto's own serialization of what it parsed: unknown fields (31 and up, for 4.0.7) are gone.
        o.put("metadata_reserialized", ByteBufUtil.hexDump(md.toByteArray()));
        o.put("payload_start", buf.readerIndex());

        CompressionCodec codec = CompressionCodecProvider.getCompressionCodec(md.getCompression());
        ByteBuf body = codec.decode(buf, md.getUncompressedSize());
        o.put("uncompressed", hex(body));
        int n = md.getNumMessagesInBatch();
        ArrayNode records = o.putArray("records");
        ArrayNode messages = o.putArray("messages");
        for (int i = 0; i < n; i++) {
            SingleMessageMetadata smm = new SingleMessageMetadata();
            ByteBuf payload = Commands.deSerializeSingleMessageInBatch(body, smm, i, n);
            ObjectNode rec = records.addObject();
            rec.put("index", i);
            rec.put("compacted_out", smm.isCompactedOut());
            rec.put("key", smm.hasPartitionKey() ? smm.getPartitionKey() : null);
            rec.put("payload", hex(payload));
            rec.put("payload_size", smm.getPayloadSize());
            rec.set("properties", properties(smm.getPropertiesList()));
            rec.set("event_time", smm.hasEventTime() ? unsigned(smm.getEventTime()) : null);
            rec.put("ordering_key", smm.hasOrderingKey() ? ByteBufUtil.hexDump(smm.getOrderingKey()) : null);
            rec.set("sequence_id", smm.hasSequenceId() ? unsigned(smm.getSequenceId()) : null);
            rec.put("null_value", smm.isNullValue());
            rec.put("metadata_reserialized", ByteBufUtil.hexDump(smm.toByteArray()));
            // ConsumerImpl.newSingleMessage: a compacted-out record is never delivered.
            if (!smm.isCompactedOut()) {
                BatchMessageIdImpl mid = new BatchMessageIdImpl(id.getLedgerId(), id.getEntryId(), id.getPartition(),
                        i, n, null);
                MessageImpl<byte[]> msg = MessageImpl.create(TOPIC, mid, md, smm, payload, Optional.empty(), null,
                        Schema.BYTES, 0, false, -1L);
                ObjectNode m = messages.addObject();
                BatchMessageIdImpl got = (BatchMessageIdImpl) msg.getMessageId();
                m.put("batch_index", got.getBatchIndex());
                m.put("batch_size", got.getBatchSize());
                m.put("key", msg.hasKey() ? msg.getKey() : null);
                m.put("payload", ByteBufUtil.hexDump(msg.getData()));
                m.put("ordering_key", msg.hasOrderingKey() ? ByteBufUtil.hexDump(msg.getOrderingKey()) : null);
                ObjectNode props = m.putObject("properties");
                for (Map.Entry<String, String> e : msg.getProperties().entrySet()) {
                    props.put(e.getKey(), e.getValue());
                }
                m.put("event_time", msg.getEventTime());
                m.put("sequence_id", msg.getSequenceId());
                m.put("publish_time", msg.getPublishTime());
                m.put("producer_name", msg.getProducerName());
            }
            payload.release();
        }
        body.release();

        // Phase one's view (MessageCompactionData of every record not compacted out); it reads the entry
        // without broker entry metadata, as a consumer receives it.
        boolean readable = RawBatchConverter.isReadableBatch(md);
        o.put("readable_batch", readable);
        if (readable) {
            ArrayNode view = o.putArray("compaction_view");
            RawMessage raw = new RawMessageImpl(id,
                    Unpooled.wrappedBuffer(data, headersStart, data.length - headersStart));
            for (ImmutableTriple<MessageId, String, Integer> t : RawBatchConverter.extractIdsAndKeysAndSize(raw)) {
                view.add(F.arrayNode().add(((BatchMessageIdImpl) t.getLeft()).getBatchIndex()).add(t.getMiddle())
                        .add(t.getRight()));
            }
            raw.close();
        }
        return o;
    }

    private static ObjectNode metadataJson(MessageMetadata md) {
        ObjectNode m = F.objectNode();
        m.put("producer_name", md.getProducerName());
        m.set("sequence_id", unsigned(md.getSequenceId()));
        m.set("publish_time", unsigned(md.getPublishTime()));
        m.put("compression", md.getCompression().name());
        m.set("uncompressed_size", md.hasUncompressedSize() ? F.numberNode(md.getUncompressedSize()) : null);
        m.set("num_messages_in_batch", md.hasNumMessagesInBatch() ? F.numberNode(md.getNumMessagesInBatch()) : null);
        m.set("highest_sequence_id", md.hasHighestSequenceId() ? unsigned(md.getHighestSequenceId()) : null);
        m.put("partition_key", md.hasPartitionKey() ? md.getPartitionKey() : null);
        m.set("properties", properties(md.getPropertiesList()));
        m.set("event_time", md.hasEventTime() ? unsigned(md.getEventTime()) : null);
        return m;
    }

    // --- RawBatchConverter.rebatchMessage --------------------------------------------------------------------

    /**
     * Runs {@code rebatchMessage} twice on the same entry: on a {@link RawMessageImpl} (as the compactor's raw
     * reader hands it over: its buffer's capacity is the entry's length) and on a {@link RoomyRawMessage}, whose
     * buffer has room past the entry. {@code rebatchMessage} sizes its output batch by {@code payload.capacity()}
     * and LightProto's {@code SingleMessageMetadata.writeTo} copies a parsed key with {@code getBytes}, which does
     * not grow the buffer: when the rebatched (uncompressed) batch outgrows the compressed entry, the first run can
     * throw {@code IndexOutOfBoundsException} (apache/pulsar#26290, unfixed in 4.0.7). The second run is the same
     * code on the same bytes with only the buffer's capacity changed; {@code data} is its answer, {@code plain} the
     * first run's (its bytes, or its error).
     */
    private static JsonNode rebatch(byte[] data, MessageIdData id, JsonNode keepNode, boolean retainNullKey,
            boolean withMetadata) throws Exception {
        Set<Integer> keep = new HashSet<>();
        keepNode.forEach(k -> keep.add(k.asInt()));
        ObjectNode o = F.objectNode();
        ObjectNode plain = o.putObject("plain");
        try {
            plain.setAll(rebatchOnce(new RawMessageImpl(id, Unpooled.wrappedBuffer(data)), keep, retainNullKey,
                    withMetadata));
        } catch (Exception e) {
            StringBuilder where = new StringBuilder();
            for (StackTraceElement el : e.getStackTrace()) {
                where.append(el.getClassName()).append('.').append(el.getMethodName()).append('\n');
            }
            plain.put("error", e.getClass().getName());
            plain.put("message", String.valueOf(e.getMessage()));
            plain.put("stack", where.toString());
        }
        o.setAll(rebatchOnce(new RoomyRawMessage(id, data), keep, retainNullKey, withMetadata));
        return o;
    }

    private static ObjectNode rebatchOnce(RawMessage raw, Set<Integer> keep, boolean retainNullKey,
            boolean withMetadata) throws Exception {
        ArrayNode asked = F.arrayNode();
        ObjectNode o = F.objectNode();
        try {
            // Phase two of AbstractTwoPhaseCompactor hands over the metadata it parsed; null lets rebatchMessage
            // parse it (and keep the broker entry metadata prefix).
            MessageMetadata md = withMetadata ? Commands.parseMessageMetadata(raw.getHeadersAndPayload()) : null;
            Optional<RawMessage> out = RawBatchConverter.rebatchMessage(raw, md, (key, mid) -> {
                int i = ((BatchMessageIdImpl) mid).getBatchIndex();
                asked.add(F.arrayNode().add(i).add(key));
                return keep.contains(i);
            }, retainNullKey);
            o.set("asked", asked);
            if (out.isPresent()) {
                RawMessage m = out.get();
                o.put("data", hex(m.getHeadersAndPayload()));
                o.set("id", idJson(m.getMessageIdData()));
                m.close();
            } else {
                o.putNull("data");
            }
            return o;
        } finally {
            raw.close();
        }
    }

    /** A raw message whose headers-and-payload buffer has spare capacity past the entry's bytes. */
    private static final class RoomyRawMessage implements RawMessage {
        private final MessageIdData id;
        private final ByteBuf buf;

        RoomyRawMessage(MessageIdData id, byte[] data) {
            this.id = id;
            this.buf = Unpooled.buffer(2 * data.length + uncompressedSize(data) + 1024).writeBytes(data);
        }

        private static int uncompressedSize(byte[] data) {
            ByteBuf b = Commands.skipBrokerEntryMetadataIfExist(Unpooled.wrappedBuffer(data));
            return Commands.parseMessageMetadata(b).getUncompressedSize();
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
            return buf.duplicate(); // keeps the capacity, unlike RawMessageImpl's slice()
        }

        @Override
        public ByteBuf serialize() {
            throw new UnsupportedOperationException();
        }

        @Override
        public void close() {
            buf.release();
        }
    }

    // --- RawMessageImpl framing ------------------------------------------------------------------------------

    private static JsonNode rawSerialize(byte[] data, MessageIdData id) {
        RawMessage raw = new RawMessageImpl(id, Unpooled.wrappedBuffer(data));
        ByteBuf b = raw.serialize();
        String h = hex(b);
        b.release();
        raw.close();
        return F.textNode(h);
    }

    private static JsonNode rawDeserialize(byte[] data) {
        ByteBuf in = Unpooled.wrappedBuffer(data);
        RawMessage raw = RawMessageImpl.deserializeFrom(in);
        ObjectNode o = idJson(raw.getMessageIdData());
        o.put("data", hex(raw.getHeadersAndPayload()));
        // deserializeFrom slices the entry without consuming it: the reader stops where the entry starts.
        o.put("entry_offset", in.readerIndex());
        raw.close();
        return o;
    }

    private static ObjectNode idJson(MessageIdData id) {
        ObjectNode o = F.objectNode();
        o.set("ledger", unsigned(id.getLedgerId()));
        o.set("entry", unsigned(id.getEntryId()));
        o.set("partition", id.hasPartition() ? F.numberNode(id.getPartition()) : null);
        o.set("batch_index", id.hasBatchIndex() ? F.numberNode(id.getBatchIndex()) : null);
        return o;
    }
}
