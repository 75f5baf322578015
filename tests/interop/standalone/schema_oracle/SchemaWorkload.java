import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;
import com.google.protobuf.DescriptorProtos.DescriptorProto;
import com.google.protobuf.DescriptorProtos.EnumDescriptorProto;
import com.google.protobuf.DescriptorProtos.EnumValueDescriptorProto;
import com.google.protobuf.DescriptorProtos.FieldDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors;
import com.google.protobuf.DynamicMessage;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.*;
import org.apache.pulsar.client.api.schema.GenericObject;
import org.apache.pulsar.client.api.schema.GenericRecord;
import org.apache.pulsar.client.api.schema.SchemaDefinition;
import org.apache.pulsar.common.schema.KeyValue;
import org.apache.pulsar.common.schema.KeyValueEncodingType;
import org.apache.pulsar.common.schema.SchemaInfo;
import org.apache.pulsar.common.schema.SchemaType;
import pulsarkit.oracle.ShopProto;

/** Topics written with Pulsar schemas by the real Java client, then read back by a Reader with
 * Schema.AUTO_CONSUME(), one JSON line per message ("REC {...}"), and each topic's schema versions as the admin
 * API gives them ("SCHEMA {...}": type, definition in base64, properties): args = brokerUrl webUrl.
 *
 * <p>Values are dumped as plain JSON: records as objects (field -> value), bytes in base64, enums by name, dates
 * and times as the numbers Pulsar's schemas store (millis, epoch days, nanos of day, an Instant as epoch nanos).
 * A message the consumer cannot decode is dumped with "error"; a topic AUTO_CONSUME has no reader for (PROTOBUF)
 * with "NOREADER {...}". The PROTOBUF topic is also read with its generated class ("GENERATED {...}"): the class
 * is compiled from shop.proto by the test and given on the class path. */
public class SchemaWorkload {
  static final String NS = "persistent://public/default/";
  static final ObjectMapper JSON = new ObjectMapper();

  public enum Color { RED, GREEN, BLUE }

  public static class Inner {
    public int x;
    public String y;
    public Inner() {}
    public Inner(int x, String y) { this.x = x; this.y = y; }
  }

  /** Version 1 of the evolving record (its Avro name is "Item", as is version 2's). */
  public static class A {
    public static class Item {
      public long id;
      public String name;
      public Color color;
      public Inner inner;
      public List<String> tags;
      public Map<String, Integer> counts;
      public byte[] blob;
    }
  }

  /** Version 2: one more nullable field (default null) and one more primitive with a default. */
  public static class B {
    public static class Item {
      public long id;
      public String name;
      public Color color;
      public Inner inner;
      public List<String> tags;
      public Map<String, Integer> counts;
      public byte[] blob;
      public Double score;
    }
  }

  public static class Person {
    public String name;
    public int age;
    public Double height;
    public boolean active;
    public List<String> nicknames;
    public Inner address;
  }

  public static void main(String[] a) throws Exception {
    PulsarClient c = PulsarClient.builder().serviceUrl(a[0]).build();
    List<String> topics = new ArrayList<>();

    // AVRO, two compatible versions of the same record, one null value
    String avro = NS + "schema-avro";
    topics.add(avro);
    try (Producer<A.Item> p = c.newProducer(Schema.AVRO(A.Item.class)).topic(avro).enableBatching(false).create()) {
      for (int i = 0; i < 30; i++) {
        A.Item it = new A.Item();
        it.id = i;
        it.name = i % 7 == 3 ? null : "item-" + i;
        it.color = i % 5 == 4 ? null : Color.values()[i % 3];
        it.inner = i % 4 == 1 ? null : new Inner(i * 3, i % 2 == 0 ? "y" + i : null);
        it.tags = i % 6 == 5 ? null : List.of("t" + i, "u");
        it.counts = i % 3 == 0 ? null : Map.of("k" + i, i);
        it.blob = i % 2 == 0 ? null : new byte[] {(byte) i, 0, (byte) 255};
        p.newMessage().key("k" + i).value(it).send();
      }
      p.newMessage().key("null-value").value(null).send();
    }
    try (Producer<B.Item> p = c.newProducer(Schema.AVRO(B.Item.class)).topic(avro).create()) {
      for (int i = 30; i < 60; i++) {
        B.Item it = new B.Item();
        it.id = i;
        it.name = "item-" + i;
        it.color = Color.values()[i % 3];
        it.inner = new Inner(-i, "z");
        it.tags = List.of();
        it.counts = Map.of();
        it.blob = new byte[0];
        it.score = i % 4 == 0 ? null : i / 4.0;
        p.sendAsync(it); // batched
      }
      p.flush();
    }

    // JSON (a POJO's Avro-style definition, JSON text payloads), batched
    String json = NS + "schema-json";
    topics.add(json);
    try (Producer<Person> p = c.newProducer(Schema.JSON(Person.class)).topic(json).create()) {
      for (int i = 0; i < 30; i++) {
        Person x = new Person();
        x.name = i % 9 == 8 ? null : "person \"" + i + "\" é";
        x.age = 20 + i;
        x.height = i % 5 == 0 ? null : 1.5 + i / 100.0;
        x.active = i % 2 == 0;
        x.nicknames = i % 4 == 0 ? null : List.of("n" + i);
        x.address = i % 3 == 0 ? null : new Inner(i, "street " + i);
        p.sendAsync(x);
      }
      p.flush();
    }

    // PROTOBUF_NATIVE: a descriptor built here, messages as DynamicMessage bytes
    String proto = NS + "schema-protobuf-native";
    topics.add(proto);
    Descriptors.Descriptor order = orderDescriptor();
    String def = JSON.writeValueAsString(Map.of(
        "fileDescriptorSet", Base64.getEncoder().encodeToString(
            FileDescriptorSet.newBuilder().addFile(order.getFile().toProto()).build().toByteArray()),
        "rootMessageTypeName", order.getFullName(),
        "rootFileDescriptorName", order.getFile().getName()));
    SchemaInfo protoInfo = SchemaInfo.builder().name("Order").type(SchemaType.PROTOBUF_NATIVE)
        .schema(def.getBytes(StandardCharsets.UTF_8)).properties(Collections.emptyMap()).build();
    try (Producer<byte[]> p = c.newProducer(Schema.AUTO_PRODUCE_BYTES(Schema.getSchema(protoInfo)))
        .topic(proto).enableBatching(false).create()) {
      Descriptors.Descriptor item = order.findNestedTypeByName("Line");
      for (int i = 0; i < 25; i++) {
        DynamicMessage.Builder b = DynamicMessage.newBuilder(order);
        b.setField(order.findFieldByName("id"), "order-" + i);
        if (i % 3 != 0) b.setField(order.findFieldByName("amount"), (long) i * 1_000_000_007L);
        b.setField(order.findFieldByName("price"), i / 8.0);
        b.setField(order.findFieldByName("ratio"), (float) i / 2);
        b.setField(order.findFieldByName("paid"), i % 2 == 1);
        b.setField(order.findFieldByName("status"), order.getFile().findEnumTypeByName("Status").getValues().get(i % 3));
        b.setField(order.findFieldByName("blob"), ByteString.copyFrom(new byte[] {(byte) i, 7}));
        b.setField(order.findFieldByName("count"), -i);
        b.setField(order.findFieldByName("big"), (long) i << 40);
        for (int j = 0; j < i % 3; j++) {
          b.addRepeatedField(order.findFieldByName("tags"), "tag" + j);
          b.addRepeatedField(order.findFieldByName("lines"), DynamicMessage.newBuilder(item)
              .setField(item.findFieldByName("sku"), "sku" + j).setField(item.findFieldByName("qty"), j + 1).build());
        }
        if (i % 4 != 0) {
          b.setField(order.findFieldByName("main"), DynamicMessage.newBuilder(item)
              .setField(item.findFieldByName("sku"), "main" + i).build());
        }
        p.send(b.build().toByteArray());
      }
    }

    // PROTOBUF: the generated class of shop.proto (Pulsar stores an Avro-style schema derived from it and the root
    // message's field numbers); nested messages, repeated fields, an enum, a map, unset fields and empty values
    String generated = NS + "schema-protobuf";
    topics.add(generated);
    try (Producer<ShopProto.Purchase> p = c.newProducer(Schema.PROTOBUF(ShopProto.Purchase.class)).topic(generated)
        .enableBatching(false).create()) {
      for (int i = 0; i < 20; i++) p.send(purchase(i));
      p.send(ShopProto.Purchase.getDefaultInstance()); // every field unset: an empty payload
    }

    // primitives, one topic each
    primitive(c, topics, "string", Schema.STRING, List.of("hello", "", "héllo wörld ✓", "x".repeat(300)));
    primitive(c, topics, "int64", Schema.INT64, List.of(0L, 1L, -1L, Long.MAX_VALUE, Long.MIN_VALUE, 1234567890123L));
    primitive(c, topics, "bytes", Schema.BYTES, List.of(new byte[0], new byte[] {0, 1, (byte) 0xff}));
    primitive(c, topics, "boolean", Schema.BOOL, List.of(true, false));
    primitive(c, topics, "int8", Schema.INT8, List.of((byte) 0, (byte) -128, (byte) 127));
    primitive(c, topics, "int16", Schema.INT16, List.of((short) 0, (short) -32768, (short) 12345));
    primitive(c, topics, "int32", Schema.INT32, List.of(0, Integer.MIN_VALUE, Integer.MAX_VALUE, -7));
    primitive(c, topics, "float", Schema.FLOAT, List.of(0.0f, -1.5f, 3.25e10f, Float.MIN_VALUE));
    primitive(c, topics, "double", Schema.DOUBLE, List.of(0.0, -1.5, 1e300, Math.PI));
    primitive(c, topics, "date", Schema.DATE, List.of(new java.util.Date(0), new java.util.Date(1700000000123L)));
    primitive(c, topics, "time", Schema.TIME, List.of(new java.sql.Time(0), new java.sql.Time(45296789L)));
    primitive(c, topics, "timestamp", Schema.TIMESTAMP,
        List.of(new java.sql.Timestamp(1700000000123L), new java.sql.Timestamp(-1000L)));
    primitive(c, topics, "instant", Schema.INSTANT,
        List.of(Instant.ofEpochSecond(1700000000L, 123456789), Instant.ofEpochSecond(-5, 1)));
    primitive(c, topics, "local-date", Schema.LOCAL_DATE, List.of(LocalDate.of(2024, 2, 29), LocalDate.of(1900, 1, 1)));
    primitive(c, topics, "local-time", Schema.LOCAL_TIME, List.of(LocalTime.of(23, 59, 59, 999999999), LocalTime.MIDNIGHT));
    primitive(c, topics, "local-date-time", Schema.LOCAL_DATE_TIME,
        List.of(LocalDateTime.of(2024, 2, 29, 12, 30, 45, 123456789), LocalDateTime.of(1969, 12, 31, 23, 59, 59)));

    // KEY_VALUE, INLINE (key and value in the payload) and SEPARATED (the key in the message's key, base64)
    String inline = NS + "schema-kv-inline";
    topics.add(inline);
    try (Producer<KeyValue<Integer, Inner>> p = c.newProducer(
        Schema.KeyValue(Schema.INT32, Schema.AVRO(Inner.class), KeyValueEncodingType.INLINE)).topic(inline).create()) {
      for (int i = 0; i < 12; i++) p.sendAsync(new KeyValue<>(i * 11, i % 5 == 4 ? null : new Inner(i, "v" + i)));
      p.flush();
    }
    String separated = NS + "schema-kv-separated";
    topics.add(separated);
    try (Producer<KeyValue<String, Long>> p = c.newProducer(
        Schema.KeyValue(Schema.STRING, Schema.INT64, KeyValueEncodingType.SEPARATED)).topic(separated)
        .enableBatching(false).create()) {
      for (int i = 0; i < 12; i++) p.send(new KeyValue<>("key-" + i + (i % 2 == 0 ? "é" : ""), (long) i * i - 3));
    }

    // a payload that does not match the topic's INT64 schema, from a producer without a schema (allowed while
    // the namespace does not enforce schema validation: the message has no schema version)
    try (Producer<byte[]> p = c.newProducer(Schema.BYTES).topic(NS + "schema-int64").enableBatching(false).create()) {
      p.send(new byte[] {1, 2, 3});
    }

    // payloads that carry the topic's schema version but do not match it, through AUTO_PRODUCE_BYTES (its
    // validation lets them through): text that is not UTF-8, and JSON whose fields are not the record's
    try (Producer<byte[]> p = c.newProducer(Schema.AUTO_PRODUCE_BYTES()).topic(NS + "schema-string")
        .enableBatching(false).create()) {
      p.newMessage().key("mismatch").value(new byte[] {(byte) 0xff, 'a'}).send();
    }
    try (Producer<byte[]> p = c.newProducer(Schema.AUTO_PRODUCE_BYTES()).topic(json).enableBatching(false).create()) {
      p.newMessage().key("mismatch").value("{\"name\": 5, \"age\": \"old\"}".getBytes(StandardCharsets.UTF_8)).send();
    }

    for (String t : topics) {
      try {
        dump(c, t);
      } catch (Exception e) { // recorded, for the test to judge (a reader that cannot start at all)
        if (!t.equals(generated)) throw e;
        System.out.println("NOREADER " + JSON.writeValueAsString(Map.of("topic", t, "error", e.toString())));
      }
    }
    dumpGenerated(c, generated);
    try (org.apache.pulsar.client.admin.PulsarAdmin admin =
        org.apache.pulsar.client.admin.PulsarAdmin.builder().serviceHttpUrl(a[1]).build()) {
      for (String t : topics) {
        List<SchemaInfo> all = admin.schemas().getAllSchemas(t);
        for (int v = 0; v < all.size(); v++) {
          Map<String, Object> rec = new LinkedHashMap<>();
          rec.put("topic", t);
          rec.put("version", v);
          rec.put("type", all.get(v).getType().name());
          rec.put("definition", Base64.getEncoder().encodeToString(all.get(v).getSchema()));
          rec.put("properties", all.get(v).getProperties());
          System.out.println("SCHEMA " + JSON.writeValueAsString(rec));
        }
      }
    }
    c.close();
    System.exit(0);
  }

  static <T> void primitive(PulsarClient c, List<String> topics, String name, Schema<T> schema, List<T> values)
      throws Exception {
    String t = NS + "schema-" + name;
    topics.add(t);
    try (Producer<T> p = c.newProducer(schema).topic(t).enableBatching(false).create()) {
      for (T v : values) p.send(v);
    }
  }

  /** Purchase i: from 10 on, nested messages, a map and an enum past its first value are set. */
  static ShopProto.Purchase purchase(int i) {
    boolean nested = i >= 10;
    ShopProto.Purchase.Builder b = ShopProto.Purchase.newBuilder()
        .setId(i % 5 == 4 ? "" : "p-" + i)
        .setVersion(i % 3)
        .setAmount(i % 4 == 0 ? 0 : i * 1_000_000_007L)
        .setTotal(i / 3.0)
        .setRatio(i / 4f)
        .setPaid(i % 2 == 1)
        .setNote(ByteString.copyFrom(i % 3 == 0 ? new byte[0] : new byte[] {(byte) i, (byte) 0xfe}))
        .setDelta(-i)
        .setBig(i % 5 == 1 ? -1L : (long) i << 33) // -1: 2^64 - 1 unsigned
        .setCode(i % 6 == 2 ? -1 : i * 1000) // -1: 2^32 - 1 unsigned
        .setChannel(ShopProto.Purchase.Channel.forNumber(nested ? 1 + i % 2 : 0));
    for (int j = 0; j < i % 3; j++) b.addTags("tag" + j);
    for (int j = 0; j < i % 2; j++) b.addScores(-i * 10L - j);
    if (i % 2 == 0) b.setComment(i == 4 ? "" : "comment " + i); // proto3 optional
    if (!nested) return b.build();
    if (i % 4 != 0) b.setAddress(ShopProto.Purchase.Address.newBuilder().setStreet("street " + i).setZip(i * 7));
    for (int j = 0; j < i % 3; j++) {
      b.addLines(ShopProto.Purchase.Line.newBuilder().setSku("sku" + j).setQty(j).setPrice(j * 1.25));
    }
    for (int j = 0; j < i % 4; j++) b.putCounts("k" + j, i - j);
    return b.build();
  }

  static void dumpGenerated(PulsarClient c, String t) throws Exception {
    try (Reader<ShopProto.Purchase> r = c.newReader(Schema.PROTOBUF(ShopProto.Purchase.class)).topic(t)
        .startMessageId(MessageId.earliest).create()) {
      while (r.hasMessageAvailable()) {
        Message<ShopProto.Purchase> m = r.readNext(30, TimeUnit.SECONDS);
        if (m == null) throw new IllegalStateException("no message though one was available: " + t);
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("topic", t);
        rec.put("id", m.getMessageId().toString());
        rec.put("value", conv(m.getValue()));
        System.out.println("GENERATED " + JSON.writeValueAsString(rec));
      }
    }
  }

  static Descriptors.Descriptor orderDescriptor() throws Exception {
    FieldDescriptorProto.Type S = FieldDescriptorProto.Type.TYPE_STRING;
    FileDescriptorProto file = FileDescriptorProto.newBuilder()
        .setName("shop/order.proto").setPackage("shop").setSyntax("proto3")
        .addEnumType(EnumDescriptorProto.newBuilder().setName("Status")
            .addValue(EnumValueDescriptorProto.newBuilder().setName("NEW").setNumber(0))
            .addValue(EnumValueDescriptorProto.newBuilder().setName("PAID").setNumber(1))
            .addValue(EnumValueDescriptorProto.newBuilder().setName("SHIPPED").setNumber(5)))
        .addMessageType(DescriptorProto.newBuilder().setName("Order")
            .addField(field("id", 1, S))
            .addField(field("amount", 2, FieldDescriptorProto.Type.TYPE_INT64))
            .addField(field("price", 3, FieldDescriptorProto.Type.TYPE_DOUBLE))
            .addField(field("ratio", 4, FieldDescriptorProto.Type.TYPE_FLOAT))
            .addField(field("paid", 5, FieldDescriptorProto.Type.TYPE_BOOL))
            .addField(field("status", 6, FieldDescriptorProto.Type.TYPE_ENUM).setTypeName(".shop.Status"))
            .addField(field("blob", 7, FieldDescriptorProto.Type.TYPE_BYTES))
            .addField(field("count", 8, FieldDescriptorProto.Type.TYPE_SINT32))
            .addField(field("big", 9, FieldDescriptorProto.Type.TYPE_UINT64))
            .addField(field("tags", 10, S).setLabel(FieldDescriptorProto.Label.LABEL_REPEATED))
            .addField(field("lines", 11, FieldDescriptorProto.Type.TYPE_MESSAGE).setTypeName(".shop.Order.Line")
                .setLabel(FieldDescriptorProto.Label.LABEL_REPEATED))
            .addField(field("main", 12, FieldDescriptorProto.Type.TYPE_MESSAGE).setTypeName(".shop.Order.Line"))
            .addNestedType(DescriptorProto.newBuilder().setName("Line")
                .addField(field("sku", 1, S))
                .addField(field("qty", 2, FieldDescriptorProto.Type.TYPE_INT32))))
        .build();
    return Descriptors.FileDescriptor.buildFrom(file, new Descriptors.FileDescriptor[0]).findMessageTypeByName("Order");
  }

  static FieldDescriptorProto.Builder field(String name, int number, FieldDescriptorProto.Type type) {
    return FieldDescriptorProto.newBuilder().setName(name).setNumber(number).setType(type)
        .setLabel(FieldDescriptorProto.Label.LABEL_OPTIONAL);
  }

  static void dump(PulsarClient c, String t) throws Exception {
    try (Reader<GenericRecord> r = c.newReader(Schema.AUTO_CONSUME()).topic(t).startMessageId(MessageId.earliest)
        .create()) {
      while (r.hasMessageAvailable()) {
        Message<GenericRecord> m = r.readNext(30, TimeUnit.SECONDS);
        if (m == null) throw new IllegalStateException("no message though one was available: " + t);
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("topic", t);
        rec.put("id", m.getMessageId().toString());
        rec.put("key", m.getKey());
        rec.put("schema_version", m.getSchemaVersion() == null ? null : ByteBuffer.wrap(m.getSchemaVersion()).getLong());
        try {
          rec.put("value", conv(m.getValue()));
        } catch (Exception e) {
          rec.put("error", e.toString());
        }
        System.out.println("REC " + JSON.writeValueAsString(rec));
      }
    }
  }

  /** A value as plain JSON data. */
  static Object conv(Object o) {
    if (o == null || o instanceof Boolean || o instanceof String) return o;
    if (o instanceof GenericObject g) return conv(g.getNativeObject());
    if (o instanceof Number) return o;
    if (o instanceof CharSequence) return o.toString();
    if (o instanceof byte[] b) return Base64.getEncoder().encodeToString(b);
    if (o instanceof ByteBuffer bb) {
      byte[] b = new byte[bb.remaining()];
      bb.duplicate().get(b);
      return Base64.getEncoder().encodeToString(b);
    }
    if (o instanceof ByteString bs) return Base64.getEncoder().encodeToString(bs.toByteArray());
    if (o instanceof java.util.Date d) return d.getTime(); // Date, java.sql.Time, java.sql.Timestamp
    if (o instanceof Instant i) return Math.addExact(Math.multiplyExact(i.getEpochSecond(), 1_000_000_000L), i.getNano());
    if (o instanceof LocalDate d) return d.toEpochDay();
    if (o instanceof LocalTime lt) return lt.toNanoOfDay();
    if (o instanceof LocalDateTime ldt) return Math.addExact(
        Math.multiplyExact(ldt.toLocalDate().toEpochDay(), 86_400_000_000_000L), ldt.toLocalTime().toNanoOfDay());
    if (o instanceof KeyValue<?, ?> kv) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("key", conv(kv.getKey()));
      m.put("value", conv(kv.getValue()));
      return m;
    }
    if (o instanceof org.apache.avro.generic.GenericRecord g) {
      Map<String, Object> m = new LinkedHashMap<>();
      for (org.apache.avro.Schema.Field f : g.getSchema().getFields()) m.put(f.name(), conv(g.get(f.name())));
      return m;
    }
    if (o instanceof org.apache.avro.generic.GenericEnumSymbol<?> e) return e.toString();
    if (o instanceof org.apache.avro.generic.GenericFixed f) return Base64.getEncoder().encodeToString(f.bytes());
    if (o instanceof JsonNode n) return JSON.convertValue(n, Object.class);
    if (o instanceof Descriptors.EnumValueDescriptor e) return e.getName();
    if (o instanceof com.google.protobuf.Message pm) {
      Map<String, Object> m = new LinkedHashMap<>();
      for (Descriptors.FieldDescriptor f : pm.getDescriptorForType().getFields()) {
        boolean unsetMessage = !f.isRepeated() && f.getJavaType() == Descriptors.FieldDescriptor.JavaType.MESSAGE
            && !pm.hasField(f);
        m.put(f.getName(), unsetMessage ? null : conv(pm.getField(f)));
      }
      return m;
    }
    if (o instanceof List<?> l) {
      List<Object> out = new ArrayList<>();
      for (Object x : l) out.add(conv(x));
      return out;
    }
    if (o instanceof Map<?, ?> mm) {
      Map<String, Object> m = new LinkedHashMap<>();
      for (Map.Entry<?, ?> e : mm.entrySet()) m.put(e.getKey().toString(), conv(e.getValue()));
      return m;
    }
    throw new IllegalArgumentException("cannot dump a " + o.getClass().getName());
  }
}
