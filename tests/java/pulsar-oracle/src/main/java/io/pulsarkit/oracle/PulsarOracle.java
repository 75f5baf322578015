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
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashSet;
import java.util.Set;
import org.apache.pulsar.common.api.proto.BrokerEntryMetadata;
import org.apache.pulsar.common.api.proto.CompressionType;
import org.apache.pulsar.common.api.proto.MessageMetadata;
import org.apache.pulsar.common.api.proto.SingleMessageMetadata;
import org.apache.pulsar.common.compression.CompressionCodec;
import org.apache.pulsar.common.compression.CompressionCodecProvider;
import org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor;
import org.apache.pulsar.common.intercept.BrokerEntryMetadataInterceptor;
import org.apache.pulsar.common.protocol.ByteBufPair;
import org.apache.pulsar.common.protocol.Commands;

/**
 * Line-oriented JSON server over stdin/stdout that runs pulsar-common's own code paths.
 *
 * <p>Request: {@code {"id": n, "op": "...", ...args}}. Response: {@code {"id": n, "ok": true, "result": ...}} or
 * {@code {"id": n, "ok": false, "error": "<exception class>", "message": "..."}}. Bytes travel as hex.
 */
public final class PulsarOracle {
    private static final ObjectMapper M = new ObjectMapper();
    private static final JsonNodeFactory F = JsonNodeFactory.instance;

    private PulsarOracle() {}

    public static void main(String[] args) throws Exception {
        // Responses get the real stdout; anything a library prints goes to stderr instead.
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode resp = F.objectNode();
            JsonNode req = null;
            try {
                req = M.readTree(line);
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
                resp.put("ok", false);
                resp.put("error", t.getClass().getName());
                resp.put("message", String.valueOf(t.getMessage()));
            }
            out.println(M.writeValueAsString(resp));
            out.flush();
        }
    }

    private static JsonNode dispatch(String op, JsonNode r) throws Exception {
        return switch (op) {
            case "info" -> info();
            case "crc32c" -> crc32c(r);
            case "serializeMetadataAndPayload" -> serializeMetadataAndPayload(r);
            case "encodeBatch" -> encodeBatch(r);
            case "decodeEntry" -> decodeEntry(r);
            case "compress" -> F.textNode(hex(codec(r).encode(buf(r.get("data")))));
            case "decompress" -> F.textNode(hex(codec(r).decode(buf(r.get("data")), r.get("size").intValue())));
            case "addBrokerEntryMetadata" -> addBrokerEntryMetadata(r);
            case "appendIndex" -> appendIndex(r);
            case "peekBrokerEntryMetadata" -> peekBrokerEntryMetadata(r);
            case "newSend" -> newSend(r);
            default -> throw new IllegalArgumentException("unknown op " + op);
        };
    }

    // --- helpers ---------------------------------------------------------------------------------------------

    private static ByteBuf buf(JsonNode hexNode) {
        return Unpooled.wrappedBuffer(Meta.hex(hexNode));
    }

    private static String hex(ByteBuf b) {
        return ByteBufUtil.hexDump(b);
    }

    private static CompressionCodec codec(JsonNode r) {
        return CompressionCodecProvider.getCompressionCodec(Meta.compression(r.get("codec")));
    }

    private static boolean checksum(JsonNode r) {
        return r.path("checksum").asBoolean(true);
    }

    private static Commands.ChecksumType checksumType(JsonNode r) {
        return checksum(r) ? Commands.ChecksumType.Crc32c : Commands.ChecksumType.None;
    }

    private static long unsignedInt(int v) {
        return Integer.toUnsignedLong(v);
    }

    // --- operations ------------------------------------------------------------------------------------------

    private static JsonNode info() {
        ObjectNode o = F.objectNode();
        o.put("pulsar_common_version", Commands.class.getPackage().getImplementationVersion());
        o.put("java_version", System.getProperty("java.version"));
        return o;
    }

    /** CRC32C of parts[0], resumed over each further part; computed on heap and direct buffers, which take
     * different paths in circe-checksum, and both must agree. */
    private static JsonNode crc32c(JsonNode r) {
        ArrayNode steps = F.arrayNode();
        int heap = 0;
        int direct = 0;
        boolean first = true;
        for (JsonNode part : r.get("parts")) {
            byte[] b = Meta.hex(part);
            ByteBuf h = Unpooled.wrappedBuffer(b);
            ByteBuf d = Unpooled.directBuffer(Math.max(1, b.length)).writeBytes(b);
            if (first) {
                heap = Crc32cIntChecksum.computeChecksum(h);
                direct = Crc32cIntChecksum.computeChecksum(d);
                first = false;
            } else {
                heap = Crc32cIntChecksum.resumeChecksum(heap, h);
                direct = Crc32cIntChecksum.resumeChecksum(direct, d);
            }
            d.release();
            if (heap != direct) {
                throw new IllegalStateException("heap and direct CRC32C differ");
            }
            steps.add(unsignedInt(heap));
        }
        ObjectNode o = F.objectNode();
        o.put("crc", unsignedInt(heap));
        o.set("steps", steps);
        return o;
    }

    private static JsonNode serializeMetadataAndPayload(JsonNode r) {
        MessageMetadata md = Meta.messageMetadata(r.get("metadata"));
        ByteBuf out = Commands.serializeMetadataAndPayload(checksumType(r), md, buf(r.get("payload")));
        return F.textNode(hex(out));
    }

    /** A batch built as the Java producer's BatchMessageContainerImpl builds it (without a client). */
    private static JsonNode encodeBatch(JsonNode r) {
        JsonNode desc = r.get("metadata");
        MessageMetadata md = Meta.messageMetadata(desc);
        CompressionType type = Meta.compression(r.path("compression").isMissingNode() ? F.textNode("NONE") : r.get("compression"));
        ByteBuf batch = Unpooled.buffer();
        long lowest = 0;
        long highest = 0;
        int n = 0;
        for (JsonNode m : r.get("messages")) {
            SingleMessageMetadata smm = Meta.singleMessageMetadata(m);
            if (!smm.hasSequenceId()) {
                smm.setSequenceId(md.getSequenceId() + n);
            }
            if (n == 0) {
                lowest = smm.getSequenceId();
            }
            highest = smm.getSequenceId();
            Commands.serializeSingleMessageInBatchWithPayload(smm, buf(m.get("payload")), batch);
            n++;
        }
        int uncompressedSize = batch.readableBytes();
        String uncompressed = hex(batch);
        ByteBuf body = CompressionCodecProvider.getCompressionCodec(type).encode(batch);
        if (type != CompressionType.NONE) {
            md.setCompression(type);
            md.setUncompressedSize(uncompressedSize);
        } else if (r.path("always_uncompressed_size").asBoolean(false)) {
            md.setUncompressedSize(uncompressedSize);
        }
        md.setNumMessagesInBatch(n);
        if (!desc.has("sequence_id")) {
            md.setSequenceId(lowest);
        }
        if (!desc.has("highest_sequence_id")) {
            md.setHighestSequenceId(highest);
        }
        ByteBuf entry = Commands.serializeMetadataAndPayload(checksumType(r), md, body);
        ObjectNode o = F.objectNode();
        o.put("entry", hex(entry));
        o.put("uncompressed", uncompressed);
        o.set("metadata", Meta.json(md));
        return o;
    }

    /** Reads an entry the way the broker and consumer do, and reports every step. */
    private static JsonNode decodeEntry(JsonNode r) throws Exception {
        ByteBuf b = buf(r.get("data"));
        ObjectNode o = F.objectNode();
        BrokerEntryMetadata peeked = Commands.peekBrokerEntryMetadataIfExist(b);
        if (b.readerIndex() != 0) {
            throw new IllegalStateException("peek moved the reader index");
        }
        BrokerEntryMetadata bem = Commands.parseBrokerEntryMetadataIfExist(b);
        o.set("broker_entry_metadata", Meta.json(bem));
        o.put("peek_agrees", Meta.json(peeked).equals(Meta.json(bem)));
        int headers = b.readerIndex();
        o.put("headers_offset", headers);
        boolean hasChecksum = Commands.hasChecksum(b);
        o.put("has_checksum", hasChecksum);
        if (hasChecksum) {
            int stored = Commands.readChecksum(b);
            int computed = Crc32cIntChecksum.computeChecksum(b);
            o.put("checksum", unsignedInt(stored));
            o.put("checksum_ok", stored == computed);
            b.readerIndex(headers);
        }
        MessageMetadata md = new MessageMetadata();
        Commands.parseMessageMetadata(b, md);
        o.set("metadata", Meta.json(md));
        o.put("payload_offset", b.readerIndex());
        if (r.path("metadata_only").asBoolean(false)) {
            return o;
        }
        ByteBuf payload = b.slice();
        CompressionCodec codec = CompressionCodecProvider.getCompressionCodec(md.getCompression());
        ByteBuf body = codec.decode(payload, md.getUncompressedSize());
        ArrayNode msgs = o.putArray("messages");
        if (md.hasNumMessagesInBatch()) {
            int n = md.getNumMessagesInBatch();
            for (int i = 0; i < n; i++) {
                SingleMessageMetadata smm = new SingleMessageMetadata();
                ByteBuf p = Commands.deSerializeSingleMessageInBatch(body, smm, i, n);
                msgs.add(Meta.message(smm, ByteBufUtil.getBytes(p)));
                p.release();
            }
            o.put("trailing_bytes", body.readableBytes());
        } else {
            msgs.add(Meta.message(md, ByteBufUtil.getBytes(body)));
        }
        return o;
    }

    /** Sets fixed values, so the output does not depend on the wall clock or interceptor state. */
    private record Fixed(Long timestamp, Long index) implements BrokerEntryMetadataInterceptor {
        @Override
        public BrokerEntryMetadata intercept(BrokerEntryMetadata m) {
            return timestamp == null ? m : m.setBrokerTimestamp(timestamp);
        }

        @Override
        public BrokerEntryMetadata interceptWithNumberOfMessages(BrokerEntryMetadata m, int numberOfMessages) {
            return index == null ? m : m.setIndex(index);
        }
    }

    private static Long optLong(JsonNode r, String name) {
        JsonNode v = r.get(name);
        return v == null || v.isNull() ? null : Meta.u64(v);
    }

    private static JsonNode addBrokerEntryMetadata(JsonNode r) {
        Set<BrokerEntryMetadataInterceptor> set = Set.of(new Fixed(optLong(r, "broker_timestamp"), optLong(r, "index")));
        // The index is only applied when a message count is passed, as on the broker's add path.
        ByteBuf out = Commands.addBrokerEntryMetadata(buf(r.get("data")), set, r.path("num_messages").asInt(1));
        return F.textNode(hex(out));
    }

    /** Runs a fresh AppendIndexMetadataInterceptor over a sequence of entries, as one topic's broker does. */
    private static JsonNode appendIndex(JsonNode r) {
        Set<BrokerEntryMetadataInterceptor> set = new LinkedHashSet<>();
        Long ts = optLong(r, "broker_timestamp");
        if (ts != null) {
            set.add(new Fixed(ts, null));
        }
        set.add(new AppendIndexMetadataInterceptor());
        ArrayNode out = F.arrayNode();
        JsonNode counts = r.get("num_messages");
        int i = 0;
        for (JsonNode e : r.get("entries")) {
            out.add(hex(Commands.addBrokerEntryMetadata(buf(e), set, counts.get(i++).intValue())));
        }
        return out;
    }

    private static JsonNode peekBrokerEntryMetadata(JsonNode r) {
        ByteBuf b = buf(r.get("data"));
        ObjectNode o = F.objectNode();
        o.set("broker_entry_metadata", Meta.json(Commands.peekBrokerEntryMetadataIfExist(b)));
        o.put("reader_index", b.readerIndex());
        Commands.skipBrokerEntryMetadataIfExist(b);
        o.put("headers_and_payload", hex(b));
        return o;
    }

    /** A SEND frame from Commands.newSend, coalesced into the bytes that go on the wire. */
    private static JsonNode newSend(JsonNode r) {
        MessageMetadata md = Meta.messageMetadata(r.get("metadata"));
        ByteBufPair pair = Commands.newSend(
                Meta.u64(r.get("producer_id")),
                Meta.u64(r.get("sequence_id")),
                r.has("highest_sequence_id") ? Meta.u64(r.get("highest_sequence_id")) : -1,
                r.path("num_messages").asInt(1),
                r.has("txnid_least_bits") ? Meta.u64(r.get("txnid_least_bits")) : -1,
                r.has("txnid_most_bits") ? Meta.u64(r.get("txnid_most_bits")) : -1,
                checksumType(r),
                -1,
                -1,
                md,
                buf(r.get("payload")));
        ByteBuf frame = ByteBufPair.coalesce(pair);
        return F.textNode(hex(frame));
    }
}
