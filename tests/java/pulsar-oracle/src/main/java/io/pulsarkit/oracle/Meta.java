package io.pulsarkit.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBufUtil;
import java.math.BigInteger;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.common.api.proto.BrokerEntryMetadata;
import org.apache.pulsar.common.api.proto.CompressionType;
import org.apache.pulsar.common.api.proto.EncryptionKeys;
import org.apache.pulsar.common.api.proto.KeyValue;
import org.apache.pulsar.common.api.proto.MessageMetadata;
import org.apache.pulsar.common.api.proto.SingleMessageMetadata;

/**
 * JSON <-> LightProto conversions. The JSON shape uses the proto field names; bytes are hex, properties are
 * a list of [key, value] pairs (order kept), compression is the enum number (a name is accepted on input),
 * and unsigned 64-bit fields are written unsigned. Only fields that are present are written.
 */
final class Meta {
    private static final JsonNodeFactory F = JsonNodeFactory.instance;

    private Meta() {}

    static byte[] hex(JsonNode n) {
        return ByteBufUtil.decodeHexDump(n.asText());
    }

    static String hex(byte[] b) {
        return ByteBufUtil.hexDump(b);
    }

    /** Reads an integer that may be written unsigned (up to 2^64-1) into a Java long, two's complement. */
    static long u64(JsonNode n) {
        if (n.isBigInteger() || n.isBigDecimal()) {
            return n.bigIntegerValue().longValue();
        }
        if (!n.isIntegralNumber()) {
            throw new IllegalArgumentException("expected an integer, got " + n);
        }
        return n.longValue();
    }

    static JsonNode unsigned(long v) {
        return v >= 0 ? F.numberNode(v) : F.numberNode(new BigInteger(Long.toUnsignedString(v)));
    }

    static CompressionType compression(JsonNode n) {
        if (n.isNumber()) {
            CompressionType t = CompressionType.valueOf(n.intValue());
            if (t == null) {
                throw new IllegalArgumentException("unknown compression " + n);
            }
            return t;
        }
        return CompressionType.valueOf(n.asText().toUpperCase());
    }

    private static Iterable<JsonNode> pairs(JsonNode props) {
        if (props.isObject()) {
            ArrayNode a = F.arrayNode();
            for (Iterator<Map.Entry<String, JsonNode>> it = props.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                a.add(F.arrayNode().add(e.getKey()).add(e.getValue().asText()));
            }
            return a;
        }
        return props;
    }

    private static ArrayNode pairsJson(List<KeyValue> kvs) {
        ArrayNode a = F.arrayNode();
        for (KeyValue kv : kvs) {
            a.add(F.arrayNode().add(kv.getKey()).add(kv.getValue()));
        }
        return a;
    }

    static MessageMetadata messageMetadata(JsonNode j) {
        MessageMetadata md = new MessageMetadata();
        for (Iterator<Map.Entry<String, JsonNode>> it = j.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            JsonNode v = e.getValue();
            if (v.isNull()) {
                continue;
            }
            switch (e.getKey()) {
                case "producer_name" -> md.setProducerName(v.asText());
                case "sequence_id" -> md.setSequenceId(u64(v));
                case "publish_time" -> md.setPublishTime(u64(v));
                case "properties" -> {
                    for (JsonNode p : pairs(v)) {
                        md.addProperty().setKey(p.get(0).asText()).setValue(p.get(1).asText());
                    }
                }
                case "replicated_from" -> md.setReplicatedFrom(v.asText());
                case "partition_key" -> md.setPartitionKey(v.asText());
                case "replicate_to" -> v.forEach(s -> md.addReplicateTo(s.asText()));
                case "compression" -> md.setCompression(compression(v));
                case "uncompressed_size" -> md.setUncompressedSize((int) u64(v));
                case "num_messages_in_batch" -> md.setNumMessagesInBatch(v.intValue());
                case "event_time" -> md.setEventTime(u64(v));
                case "encryption_keys" -> {
                    for (JsonNode k : v) {
                        EncryptionKeys ek = md.addEncryptionKey().setKey(k.get("key").asText()).setValue(hex(k.get("value")));
                        if (k.has("metadata")) {
                            for (JsonNode p : pairs(k.get("metadata"))) {
                                ek.addMetadata().setKey(p.get(0).asText()).setValue(p.get(1).asText());
                            }
                        }
                    }
                }
                case "encryption_algo" -> md.setEncryptionAlgo(v.asText());
                case "encryption_param" -> md.setEncryptionParam(hex(v));
                case "schema_version" -> md.setSchemaVersion(hex(v));
                case "partition_key_b64_encoded" -> md.setPartitionKeyB64Encoded(v.booleanValue());
                case "ordering_key" -> md.setOrderingKey(hex(v));
                case "deliver_at_time" -> md.setDeliverAtTime(v.longValue());
                case "marker_type" -> md.setMarkerType(v.intValue());
                case "txnid_least_bits" -> md.setTxnidLeastBits(u64(v));
                case "txnid_most_bits" -> md.setTxnidMostBits(u64(v));
                case "highest_sequence_id" -> md.setHighestSequenceId(u64(v));
                case "null_value" -> md.setNullValue(v.booleanValue());
                case "uuid" -> md.setUuid(v.asText());
                case "num_chunks_from_msg" -> md.setNumChunksFromMsg(v.intValue());
                case "total_chunk_msg_size" -> md.setTotalChunkMsgSize(v.intValue());
                case "chunk_id" -> md.setChunkId(v.intValue());
                case "null_partition_key" -> md.setNullPartitionKey(v.booleanValue());
                case "compacted_batch_indexes" -> v.forEach(i -> md.addCompactedBatchIndexe(i.intValue()));
                case "schema_id" -> md.setSchemaId(hex(v));
                default -> throw new IllegalArgumentException("unknown MessageMetadata field " + e.getKey());
            }
        }
        return md;
    }

    static ObjectNode json(MessageMetadata md) {
        ObjectNode o = F.objectNode();
        if (md.hasProducerName()) o.put("producer_name", md.getProducerName());
        if (md.hasSequenceId()) o.set("sequence_id", unsigned(md.getSequenceId()));
        if (md.hasPublishTime()) o.set("publish_time", unsigned(md.getPublishTime()));
        if (md.getPropertiesCount() > 0) o.set("properties", pairsJson(md.getPropertiesList()));
        if (md.hasReplicatedFrom()) o.put("replicated_from", md.getReplicatedFrom());
        if (md.hasPartitionKey()) o.put("partition_key", md.getPartitionKey());
        if (md.getReplicateTosCount() > 0) {
            ArrayNode a = o.putArray("replicate_to");
            md.getReplicateTosList().forEach(a::add);
        }
        if (md.hasCompression()) o.put("compression", md.getCompression().getValue());
        if (md.hasUncompressedSize()) o.put("uncompressed_size", Integer.toUnsignedLong(md.getUncompressedSize()));
        if (md.hasNumMessagesInBatch()) o.put("num_messages_in_batch", md.getNumMessagesInBatch());
        if (md.hasEventTime()) o.set("event_time", unsigned(md.getEventTime()));
        if (md.getEncryptionKeysCount() > 0) {
            ArrayNode a = o.putArray("encryption_keys");
            for (EncryptionKeys k : md.getEncryptionKeysList()) {
                ObjectNode ko = a.addObject().put("key", k.getKey()).put("value", hex(k.getValue()));
                if (k.getMetadatasCount() > 0) ko.set("metadata", pairsJson(k.getMetadatasList()));
            }
        }
        if (md.hasEncryptionAlgo()) o.put("encryption_algo", md.getEncryptionAlgo());
        if (md.hasEncryptionParam()) o.put("encryption_param", hex(md.getEncryptionParam()));
        if (md.hasSchemaVersion()) o.put("schema_version", hex(md.getSchemaVersion()));
        if (md.hasPartitionKeyB64Encoded()) o.put("partition_key_b64_encoded", md.isPartitionKeyB64Encoded());
        if (md.hasOrderingKey()) o.put("ordering_key", hex(md.getOrderingKey()));
        if (md.hasDeliverAtTime()) o.put("deliver_at_time", md.getDeliverAtTime());
        if (md.hasMarkerType()) o.put("marker_type", md.getMarkerType());
        if (md.hasTxnidLeastBits()) o.set("txnid_least_bits", unsigned(md.getTxnidLeastBits()));
        if (md.hasTxnidMostBits()) o.set("txnid_most_bits", unsigned(md.getTxnidMostBits()));
        if (md.hasHighestSequenceId()) o.set("highest_sequence_id", unsigned(md.getHighestSequenceId()));
        if (md.hasNullValue()) o.put("null_value", md.isNullValue());
        if (md.hasUuid()) o.put("uuid", md.getUuid());
        if (md.hasNumChunksFromMsg()) o.put("num_chunks_from_msg", md.getNumChunksFromMsg());
        if (md.hasTotalChunkMsgSize()) o.put("total_chunk_msg_size", md.getTotalChunkMsgSize());
        if (md.hasChunkId()) o.put("chunk_id", md.getChunkId());
        if (md.hasNullPartitionKey()) o.put("null_partition_key", md.isNullPartitionKey());
        if (md.getCompactedBatchIndexesCount() > 0) {
            ArrayNode a = o.putArray("compacted_batch_indexes");
            for (int i = 0; i < md.getCompactedBatchIndexesCount(); i++) a.add(md.getCompactedBatchIndexeAt(i));
        }
        if (md.hasSchemaId()) o.put("schema_id", hex(md.getSchemaId()));
        return o;
    }

    /** A batch record's metadata from a message description (payload_size is set by the serializer). */
    static SingleMessageMetadata singleMessageMetadata(JsonNode j) {
        SingleMessageMetadata s = new SingleMessageMetadata();
        for (Iterator<Map.Entry<String, JsonNode>> it = j.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            JsonNode v = e.getValue();
            if (v.isNull()) {
                continue;
            }
            switch (e.getKey()) {
                case "payload" -> { }
                case "properties" -> {
                    for (JsonNode p : pairs(v)) {
                        s.addProperty().setKey(p.get(0).asText()).setValue(p.get(1).asText());
                    }
                }
                case "key", "partition_key" -> s.setPartitionKey(v.asText());
                case "compacted_out" -> s.setCompactedOut(v.booleanValue());
                case "event_time" -> s.setEventTime(u64(v));
                case "partition_key_b64_encoded" -> s.setPartitionKeyB64Encoded(v.booleanValue());
                case "ordering_key" -> s.setOrderingKey(hex(v));
                case "sequence_id" -> s.setSequenceId(u64(v));
                case "null_value" -> s.setNullValue(v.booleanValue());
                case "null_partition_key" -> s.setNullPartitionKey(v.booleanValue());
                default -> throw new IllegalArgumentException("unknown SingleMessageMetadata field " + e.getKey());
            }
        }
        return s;
    }

    /** A message as a consumer sees its fields; null where the field is absent. */
    static ObjectNode message(SingleMessageMetadata s, byte[] payload) {
        ObjectNode o = F.objectNode();
        o.put("payload", hex(payload));
        o.put("payload_size", s.getPayloadSize());
        o.put("key", s.hasPartitionKey() ? s.getPartitionKey() : null);
        o.put("partition_key_b64_encoded", s.isPartitionKeyB64Encoded());
        o.put("ordering_key", s.hasOrderingKey() ? hex(s.getOrderingKey()) : null);
        o.set("properties", pairsJson(s.getPropertiesList()));
        o.set("event_time", s.hasEventTime() ? unsigned(s.getEventTime()) : F.nullNode());
        o.set("sequence_id", s.hasSequenceId() ? unsigned(s.getSequenceId()) : F.nullNode());
        o.put("null_value", s.isNullValue());
        o.put("null_partition_key", s.isNullPartitionKey());
        o.put("compacted_out", s.isCompactedOut());
        return o;
    }

    /** A non-batched entry's single message, with the fields the consumer takes from MessageMetadata. */
    static ObjectNode message(MessageMetadata md, byte[] payload) {
        ObjectNode o = F.objectNode();
        o.put("payload", hex(payload));
        o.put("key", md.hasPartitionKey() ? md.getPartitionKey() : null);
        o.put("partition_key_b64_encoded", md.isPartitionKeyB64Encoded());
        o.put("ordering_key", md.hasOrderingKey() ? hex(md.getOrderingKey()) : null);
        o.set("properties", pairsJson(md.getPropertiesList()));
        o.set("event_time", md.hasEventTime() ? unsigned(md.getEventTime()) : F.nullNode());
        o.set("sequence_id", unsigned(md.getSequenceId()));
        o.put("null_value", md.isNullValue());
        o.put("null_partition_key", md.isNullPartitionKey());
        o.put("compacted_out", false);
        return o;
    }

    static JsonNode json(BrokerEntryMetadata b) {
        if (b == null) {
            return F.nullNode();
        }
        ObjectNode o = F.objectNode();
        o.set("broker_timestamp", b.hasBrokerTimestamp() ? unsigned(b.getBrokerTimestamp()) : F.nullNode());
        o.set("index", b.hasIndex() ? unsigned(b.getIndex()) : F.nullNode());
        return o;
    }
}
