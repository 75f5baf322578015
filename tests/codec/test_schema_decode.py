"""Payloads decoded with Pulsar schemas (``pulsarkit.codec.schema``): every primitive against its reference encoding
(the layouts of Pulsar's Java schemas, packed here with ``struct``), the KEY_VALUE framing, Avro's resolution
between versions (and the error naming both versions when they cannot be reconciled), JSON, PROTOBUF_NATIVE, the
topic-level rules (no version, unknown version, null value, encrypted), and a bounded fuzz of every decoder: any
bytes give a value or an error row, never another exception."""

from __future__ import annotations

import base64
import json
import struct

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given, settings
from hypothesis import strategies as st
from pulsarkit.codec.protobuf_wire import encode_varint
from pulsarkit.codec.schema import SchemaEvolutionError, SchemaInfo, TopicSchema
from pulsarkit.codec.schema.info import SchemaDecodeError, key_value_parts, split_inline
from pulsarkit.codec.schema.primitive import NANOS_PER_DAY, PrimitiveCodec

I64 = st.integers(-(1 << 63), (1 << 63) - 1)


def _decode(type_name: str, payloads: list[bytes | None]) -> tuple[list, list]:
    values, errors = PrimitiveCodec(type_name).decode(pa.array(payloads, pa.binary()))
    if pa.types.is_temporal(values.type):
        values = values.cast(pa.int32() if pa.types.is_date32(values.type) else pa.int64())
    return values.to_pylist(), errors


# (type, strategy of values, the reference encoding, the value as read back (an integer for the temporal ones))
REFERENCE = {
    "BOOLEAN": (st.booleans(), lambda v: bytes([v])),
    "INT8": (st.integers(-128, 127), lambda v: struct.pack(">b", v)),
    "INT16": (st.integers(-(1 << 15), (1 << 15) - 1), lambda v: struct.pack(">h", v)),
    "INT32": (st.integers(-(1 << 31), (1 << 31) - 1), lambda v: struct.pack(">i", v)),
    "INT64": (I64, lambda v: struct.pack(">q", v)),
    "FLOAT": (st.floats(width=32, allow_nan=False), lambda v: struct.pack(">f", v)),
    "DOUBLE": (st.floats(allow_nan=False), lambda v: struct.pack(">d", v)),
    "DATE": (I64, lambda v: struct.pack(">q", v)),
    "TIME": (I64, lambda v: struct.pack(">q", v)),
    "TIMESTAMP": (I64, lambda v: struct.pack(">q", v)),
    "LOCAL_DATE": (st.integers(-(1 << 31), (1 << 31) - 1), lambda v: struct.pack(">q", v)),
    "LOCAL_TIME": (st.integers(0, NANOS_PER_DAY - 1), lambda v: struct.pack(">q", v)),
    "STRING": (st.text(), lambda v: v.encode("utf-8")),
    "BYTES": (st.binary(), lambda v: v),
}


@pytest.mark.parametrize("type_name", sorted(REFERENCE))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_primitive_round_trip(type_name, data):
    values_st, encode = REFERENCE[type_name]
    values = data.draw(st.lists(st.one_of(st.none(), values_st), max_size=20))
    got, errors = _decode(type_name, [None if v is None else encode(v) for v in values])
    assert errors == [None] * len(values)
    assert got == values


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-(1 << 40), 1 << 40), st.integers(-(1 << 31), (1 << 31) - 1)), max_size=10))
def test_instant_is_second_and_nanosecond(values):
    got, errors = _decode("INSTANT", [struct.pack(">qi", s, n) for s, n in values])
    for (s, n), v, e in zip(values, got, errors, strict=True):
        total = s * 1_000_000_000 + n
        if -(1 << 63) <= total < 1 << 63:
            assert (v, e) == (total, None)
        else:
            assert v is None and "outside timestamp[ns]" in e


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-200_000, 200_000), st.integers(-5, NANOS_PER_DAY + 5)), max_size=10))
def test_local_date_time_is_epoch_day_and_nanosecond_of_day(values):
    got, errors = _decode("LOCAL_DATE_TIME", [struct.pack(">qq", d, n) for d, n in values])
    for (d, n), v, e in zip(values, got, errors, strict=True):
        if 0 <= n < NANOS_PER_DAY and abs(d) <= 106_000:
            assert (v, e) == (d * NANOS_PER_DAY + n, None)
        else:
            assert v is None and e


def test_primitive_errors_name_the_type_and_size():
    got, errors = _decode("INT32", [b"\x00\x00\x00\x07", b"\x01", b"", None])
    assert got == [7, None, None, None]
    assert errors == [None, "INT32 needs 4 bytes, got 1", "INT32 needs 4 bytes, got 0", None]
    got, errors = _decode("STRING", [b"ok", b"\xff\xfe"])
    assert got == ["ok", None] and "not UTF-8" in errors[1]
    got, errors = _decode("LOCAL_TIME", [struct.pack(">q", NANOS_PER_DAY)])
    assert got == [None] and "no nanosecond of a day" in errors[0]
    # a STRING schema's charset property
    v, e = PrimitiveCodec("STRING", {"__charset": "ISO-8859-1"}).decode(pa.array(["é".encode("latin-1")], pa.binary()))
    assert v.to_pylist() == ["é"] and e == [None]


# ------------------------------------------------------------------------------------- KEY_VALUE


def _frame(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.binary(max_size=30)), st.one_of(st.none(), st.binary(max_size=30)))
def test_inline_framing_round_trip(key, value):
    raw = _frame(key) + _frame(value)
    assert split_inline(raw) == (key, value)
    for cut in range(len(raw)):
        with pytest.raises(SchemaDecodeError):
            split_inline(raw[:cut])
    with pytest.raises(SchemaDecodeError):
        split_inline(raw + b"x")


def _kv_info(key: SchemaInfo, value: SchemaInfo, encoding: str = "INLINE", version: int = 0) -> SchemaInfo:
    definition = _frame(key.definition) + _frame(value.definition)
    props = {
        "key.schema.type": key.type,
        "value.schema.type": value.type,
        "key.schema.properties": json.dumps(dict(key.properties)),
        "value.schema.properties": "{}",
        "kv.encoding.type": encoding,
    }
    return SchemaInfo("KEY_VALUE", definition, props, version)


V0 = struct.pack(">q", 0)


def test_key_value_inline_and_separated():
    inline = _kv_info(SchemaInfo("INT32"), SchemaInfo("STRING"))
    assert key_value_parts(inline)[2] == "INLINE"
    ts = TopicSchema([(inline, False)])
    assert (ts.key_type, ts.value_type) == (pa.int32(), pa.string())
    payloads = [_frame(struct.pack(">i", 5)) + _frame(b"five"), _frame(struct.pack(">i", 6)) + _frame(None), b"\x00"]
    d = ts.decode(pa.array(payloads, pa.binary()), pa.array([V0] * 3), pa.nulls(3, pa.string()))
    assert d.key.to_pylist() == [5, 6, None] and d.value.to_pylist() == ["five", None, None]
    assert d.decode_error.to_pylist()[:2] == [None, None] and "KEY_VALUE INLINE" in d.decode_error[2].as_py()

    sep = _kv_info(SchemaInfo("STRING"), SchemaInfo("INT64"), "SEPARATED")
    ts = TopicSchema([(sep, False)])
    keys = [base64.b64encode("clé".encode()).decode(), "not base64!", None]
    d = ts.decode(pa.array([struct.pack(">q", -3)] * 3, pa.binary()), pa.array([V0] * 3), pa.array(keys))
    assert d.key.to_pylist() == ["clé", None, None] and d.value.to_pylist() == [-3, None, -3]
    assert d.decode_error.to_pylist()[0] is None and "not base64" in d.decode_error[1].as_py()


# ------------------------------------------------------------------------------------- AVRO and JSON


def _zigzag(n: int) -> bytes:
    return encode_varint((n << 1) ^ (n >> 63))


def _str(s: str) -> bytes:
    b = s.encode()
    return _zigzag(len(b)) + b


V1_FIELDS = [
    {"name": "id", "type": "int"},
    {"name": "name", "type": "string"},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
    {"name": "gone", "type": "string"},
]
V2_FIELDS = [
    {"name": "id", "type": "long"},  # int promoted to long
    {"name": "label", "type": ["null", "string"], "aliases": ["name"], "default": None},  # renamed by an alias
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"], "default": "RED"}},
    {"name": "score", "type": ["null", "double"], "default": None},  # added with a default
    {"name": "either", "type": ["null", "int", "string"], "default": None},
]


def _avro(version: int, fields: list, type_name: str = "AVRO", name: str = "test.Item") -> SchemaInfo:
    return SchemaInfo(type_name, json.dumps({"type": "record", "name": name, "fields": fields}).encode(), {}, version)


def test_avro_versions_resolve_into_the_newest():
    ts = TopicSchema([(_avro(0, V1_FIELDS), False), (_avro(1, V2_FIELDS), False)])
    assert [f.name for f in ts.value_type] == ["id", "label", "color", "score", "either"]
    assert ts.value_type.field("either").type == pa.struct([("int", pa.int32()), ("string", pa.string())])
    old = _zigzag(7) + _str("seven") + _zigzag(2) + _str("dropped")  # BLUE: not in version 1, its default
    new = _zigzag(8) + b"\x02" + _str("eight") + _zigzag(1) + b"\x02" + struct.pack("<d", 1.5) + b"\x04" + _str("s")
    d = ts.decode(pa.array([old, new, old[:3]], pa.binary()), pa.array([V0, struct.pack(">q", 1), V0]), pa.nulls(3))
    assert d.value.to_pylist()[:2] == [
        {"id": 7, "label": "seven", "color": "RED", "score": None, "either": None},
        {"id": 8, "label": "eight", "color": "GREEN", "score": 1.5, "either": {"int": None, "string": "s"}},
    ]
    assert d.schema_version.to_pylist() == [0, 1, 0]
    assert d.decode_error[0].as_py() is None and "exceed" in d.decode_error[2].as_py()


def test_an_irreconcilable_change_names_both_versions():
    v1 = [{"name": "id", "type": "string"}]
    ts = TopicSchema([(_avro(0, V1_FIELDS), False), (_avro(3, v1), False)])
    with pytest.raises(SchemaEvolutionError, match=r"version 0 \(AVRO\).*version 3 \(AVRO\)"):
        ts.decode(pa.array([b"\x02"], pa.binary()), pa.array([V0]), pa.nulls(1))
    # a field the newest version adds without a default
    ts = TopicSchema([(_avro(0, V1_FIELDS), False), (_avro(1, [*V1_FIELDS, {"name": "x", "type": "int"}]), False)])
    with pytest.raises(SchemaEvolutionError, match="x is not written and has no default"):
        ts.decode(pa.array([b"\x02"], pa.binary()), pa.array([V0]), pa.nulls(1))
    # another type altogether
    ts = TopicSchema([(SchemaInfo("STRING", b"", {}, 0), False), (_avro(1, V1_FIELDS), False)])
    with pytest.raises(SchemaEvolutionError, match=r"version 0 \(STRING\).*version 1 \(AVRO\)"):
        ts.decode(pa.array([b"x"], pa.binary()), pa.array([V0]), pa.nulls(1))


def test_json_payloads_are_checked_against_the_record():
    fields = [*V2_FIELDS, {"name": "blob", "type": ["null", "bytes"], "default": None}]
    ts = TopicSchema([(_avro(0, fields, "JSON"), False)])
    docs = [
        {"id": 1, "label": "a", "color": "GREEN", "score": 2, "blob": base64.b64encode(b"\x00").decode()},
        {"id": 2, "color": "RED"},  # Jackson leaves nulls out
        {"id": "3", "color": "RED"},
        {"id": 4, "color": "BLUE"},
    ]
    payloads = [json.dumps(x).encode() for x in docs] + [b"{not json"]
    d = ts.decode(pa.array(payloads, pa.binary()), pa.array([V0] * 5), pa.nulls(5))
    v, e = d.value.to_pylist(), d.decode_error.to_pylist()
    assert v[0] == {"id": 1, "label": "a", "color": "GREEN", "score": 2.0, "either": None, "blob": b"\x00"}
    assert v[1]["label"] is None and e[:2] == [None, None]
    assert "id is str" in e[2] and "BLUE" in e[3] and "not JSON" in e[4]


# ------------------------------------------------------------------------------------- PROTOBUF_NATIVE


def _order_file() -> descriptor_pb2.FileDescriptorProto:
    f = descriptor_pb2.FileDescriptorProto(name="t/order.proto", package="t", syntax="proto3")
    e = f.enum_type.add(name="State")
    e.value.add(name="A", number=0)
    e.value.add(name="B", number=3)
    m = f.message_type.add(name="Order")
    T = descriptor_pb2.FieldDescriptorProto
    m.field.add(name="id", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    m.field.add(name="n", number=2, type=T.TYPE_SINT64, label=T.LABEL_OPTIONAL)
    m.field.add(name="state", number=3, type=T.TYPE_ENUM, type_name=".t.State", label=T.LABEL_OPTIONAL)
    m.field.add(name="tags", number=4, type=T.TYPE_STRING, label=T.LABEL_REPEATED)
    m.field.add(name="sub", number=5, type=T.TYPE_MESSAGE, type_name=".t.Order.Sub", label=T.LABEL_OPTIONAL)
    entry = m.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=T.TYPE_INT32, label=T.LABEL_OPTIONAL)
    m.field.add(name="attrs", number=6, type=T.TYPE_MESSAGE, type_name=".t.Order.AttrsEntry", label=T.LABEL_REPEATED)
    sub = m.nested_type.add(name="Sub")
    sub.field.add(name="x", number=1, type=T.TYPE_DOUBLE, label=T.LABEL_OPTIONAL)
    return f


def _native_info(f: descriptor_pb2.FileDescriptorProto, version: int = 0) -> SchemaInfo:
    fds = descriptor_pb2.FileDescriptorSet(file=[f]).SerializeToString()
    definition = {
        "fileDescriptorSet": base64.b64encode(fds).decode(),
        "rootMessageTypeName": "t.Order",
        "rootFileDescriptorName": f.name,
    }
    return SchemaInfo("PROTOBUF_NATIVE", json.dumps(definition).encode(), {}, version)


def test_protobuf_native_messages():
    f = _order_file()
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    Order = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.Order"))
    a = Order(id="a", n=-5, state=3, tags=["x", "y"])
    a.sub.x = 0.5
    a.attrs["k"] = 2
    ts = TopicSchema([(_native_info(f), False)])
    assert ts.value_type.field("attrs").type == pa.map_(pa.string(), pa.int32())
    payloads = [a.SerializeToString(), Order().SerializeToString(), b"\xff\xff"]
    d = ts.decode(pa.array(payloads, pa.binary()), pa.array([V0] * 3), pa.nulls(3))
    v, e = d.value.to_pylist(), d.decode_error.to_pylist()
    assert v[0] == {"id": "a", "n": -5, "state": "B", "tags": ["x", "y"], "sub": {"x": 0.5}, "attrs": [("k", 2)]}
    assert v[1] == {"id": "", "n": 0, "state": "A", "tags": [], "sub": None, "attrs": []}
    assert e[:2] == [None, None] and "PROTOBUF_NATIVE" in e[2]


# ------------------------------------------------------------------------------------- topic rules


def test_rows_without_a_readable_version_are_error_rows():
    ts = TopicSchema([(SchemaInfo("INT64", b"", {}, 0), False), (SchemaInfo("INT64", b"", {}, 1), True)])
    payloads = pa.array([struct.pack(">q", 9)] * 6, pa.binary())
    versions = pa.array([V0, None, struct.pack(">q", 1), struct.pack(">q", 4), b"\x01", V0], pa.binary())
    d = ts.decode(payloads, versions, pa.nulls(6, pa.string()), null_value=pa.array([False] * 5 + [True]))
    e = d.decode_error.to_pylist()
    assert d.value.to_pylist() == [9, None, None, None, None, None]
    assert e[0] is None and "without a schema version" in e[1]
    assert "version 1 is not in" in e[2] and "version 4 is not in" in e[3] and "1 bytes" in e[4]
    assert e[5] is None  # a null value
    d = ts.decode(payloads[:1], versions[:1], pa.nulls(1, pa.string()), encrypted=pa.array([True]))
    assert d.value.to_pylist() == [None] and "encrypted" in d.decode_error[0].as_py()
    # no schema at all: the bytes
    d = TopicSchema([]).decode(payloads[:2], pa.nulls(2, pa.binary()), pa.nulls(2, pa.string()))
    assert d.value.to_pylist() == [struct.pack(">q", 9)] * 2 and d.decode_error.to_pylist() == [None, None]


# ------------------------------------------------------------------------------------- fuzz

FUZZED = {
    **{t: SchemaInfo(t, b"", {}, 0) for t in [*REFERENCE, "INSTANT", "LOCAL_DATE_TIME"]},
    "AVRO": _avro(0, V2_FIELDS),
    "JSON": _avro(0, V2_FIELDS, "JSON"),
    "PROTOBUF_NATIVE": _native_info(_order_file()),
    "PROTOBUF": SchemaInfo(
        "PROTOBUF",
        _avro(0, V1_FIELDS).definition,
        {
            "__PARSING_INFO__": json.dumps(
                [
                    {"number": 1, "name": "id", "type": "INT32", "label": "LABEL_OPTIONAL"},
                    {"number": 2, "name": "color", "type": "ENUM", "label": "LABEL_OPTIONAL"},
                ]
            )
        },
        0,
    ),  # fmt: skip
    "KV_INLINE": _kv_info(SchemaInfo("INT32"), _avro(None, V2_FIELDS)),
    "KV_SEPARATED": _kv_info(_avro(None, V1_FIELDS), SchemaInfo("DOUBLE"), "SEPARATED"),
}


@pytest.mark.parametrize("name", sorted(FUZZED))
@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=64)), max_size=12), st.data())
def test_any_bytes_decode_or_give_an_error_row(name, payloads, data):
    keys = data.draw(
        st.lists(st.one_of(st.none(), st.text(max_size=20)), min_size=len(payloads), max_size=len(payloads))
    )
    keys = [k if k is None or data.draw(st.booleans()) else base64.b64encode(k.encode()).decode() for k in keys]
    ts = TopicSchema([(FUZZED[name], False)])
    d = ts.decode(pa.array(payloads, pa.binary()), pa.array([V0] * len(payloads)), pa.array(keys, pa.string()))
    assert len(d.value) == len(d.decode_error) == len(payloads)
    # (validity, not values: an arbitrary timestamp is an Arrow value Python's datetime cannot hold)
    for valid, e in zip(d.value.is_valid().to_pylist(), d.decode_error.to_pylist(), strict=True):
        assert not valid or e is None


def test_decoded_values_as_json():
    import datetime as dt

    from pulsarkit.analysis.decoded import json_value

    ty = pa.struct([("m", pa.map_(pa.string(), pa.int32())), ("b", pa.binary()), ("t", pa.timestamp("ms", tz="UTC"))])
    v = pa.array([{"m": [], "b": b"\x00", "t": 0}], ty)[0].as_py()
    assert json_value(v, ty) == {"m": {}, "b": "AA==", "t": dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc).isoformat()}
    assert json_value([("k", 1)], pa.map_(pa.string(), pa.int32())) == {"k": 1} and json_value(None, ty) is None


def test_protobuf_reads_the_root_fields_its_parsing_info_numbers():
    T = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="p/root.proto", package="p", syntax="proto3")
    e = f.enum_type.add(name="Kind")
    e.value.add(name="A", number=0)
    e.value.add(name="B", number=1)
    m = f.message_type.add(name="Root")
    sub = f.message_type.add(name="Sub")
    sub.field.add(name="x", number=1, type=T.TYPE_INT32, label=T.LABEL_OPTIONAL)
    spec = [("name", 1, "STRING", "LABEL_OPTIONAL"), ("n", 2, "INT64", "LABEL_OPTIONAL"),
            ("xs", 3, "DOUBLE", "LABEL_REPEATED"), ("u", 4, "UINT32", "LABEL_OPTIONAL"),
            ("sub", 5, "MESSAGE", "LABEL_OPTIONAL"), ("kind", 6, "ENUM", "LABEL_OPTIONAL")]  # fmt: skip
    for name, number, type_name, label in spec:
        kw = {"type_name": ".p.Sub"} if name == "sub" else {"type_name": ".p.Kind"} if name == "kind" else {}
        m.field.add(name=name, number=number, type=getattr(T, f"TYPE_{type_name}"), label=getattr(T, label), **kw)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    Root = message_factory.GetMessageClass(pool.FindMessageTypeByName("p.Root"))
    # the Avro-style definition Pulsar derives from the class, and the field numbers it keeps beside it
    sub_def = {"type": "record", "name": "Sub", "fields": [{"name": "x", "type": "int"}]}
    avro_def = {
        "type": "record",
        "name": "Root",
        "fields": [
            {"name": "name", "type": "string", "default": ""},
            {"name": "n", "type": "long", "default": 0},
            {"name": "xs", "type": {"type": "array", "items": "double"}, "default": []},
            {"name": "u", "type": "int", "default": 0},
            {"name": "sub", "type": ["null", sub_def], "default": None},
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}, "default": "A"},
        ],
    }  # fmt: skip
    parsing = [{"number": n, "name": a, "type": t, "label": lb, "definition": None} for a, n, t, lb in spec]
    info = SchemaInfo("PROTOBUF", json.dumps(avro_def).encode(), {"__PARSING_INFO__": json.dumps(parsing)}, 0)
    ts = TopicSchema([(info, False)])
    ok = Root(name="r", n=-2, xs=[0.5, 1.5], u=(1 << 32) - 1).SerializeToString()
    nested = Root(name="s", sub={"x": 1}).SerializeToString()
    enum = Root(kind=1).SerializeToString()
    d = ts.decode(pa.array([ok, nested, enum, b"\xff"], pa.binary()), pa.array([V0] * 4), pa.nulls(4, pa.string()))
    v, e = d.value.to_pylist(), d.decode_error.to_pylist()
    assert v[0] == {"name": "r", "n": -2, "xs": [0.5, 1.5], "u": -1, "sub": None, "kind": "A"} and e[0] is None
    assert v[1] is None and "field sub is set" in e[1]
    assert v[2] is None and "field kind is set" in e[2]
    assert "PROTOBUF" in e[3]
    # without the property there are no numbers at all
    bare = TopicSchema([(SchemaInfo("PROTOBUF", info.definition, {}, 0), False)])
    d = bare.decode(pa.array([ok], pa.binary()), pa.array([V0]), pa.nulls(1, pa.string()))
    assert "no readable __PARSING_INFO__" in d.decode_error[0].as_py()


def test_protobuf_an_unset_repeated_message_field_is_an_empty_list():
    """A repeated message (a map is one of entries) has no numbered fields, but unset it is Avro's empty array, as
    the generated class gives it: an empty list, not null (a real Pulsar 4.0.7 topic showed null)."""
    T = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="p/lines.proto", package="p", syntax="proto3")
    m = f.message_type.add(name="Root")
    line = f.message_type.add(name="Line")
    line.field.add(name="sku", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    m.field.add(name="id", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    m.field.add(name="lines", number=14, type=T.TYPE_MESSAGE, label=T.LABEL_REPEATED, type_name=".p.Line")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    Root = message_factory.GetMessageClass(pool.FindMessageTypeByName("p.Root"))
    line_def = {"type": "record", "name": "Line", "fields": [{"name": "sku", "type": "string", "default": ""}]}
    avro_def = {"type": "record", "name": "Root", "fields": [
        {"name": "id", "type": "string", "default": ""},
        {"name": "lines", "type": {"type": "array", "items": line_def}, "default": []}]}  # fmt: skip
    parsing = [
        {"number": 1, "name": "id", "type": "STRING", "label": "LABEL_OPTIONAL", "definition": None},
        {"number": 14, "name": "lines", "type": "MESSAGE", "label": "LABEL_REPEATED", "definition": None},
    ]
    info = SchemaInfo("PROTOBUF", json.dumps(avro_def).encode(), {"__PARSING_INFO__": json.dumps(parsing)}, 0)
    payloads = [Root(id="a").SerializeToString(), b"", Root(lines=[{"sku": "x"}]).SerializeToString()]
    ts = TopicSchema([(info, False)])
    d = ts.decode(pa.array(payloads, pa.binary()), pa.array([V0] * 3), pa.nulls(3, pa.string()))
    v, e = d.value.to_pylist(), d.decode_error.to_pylist()
    assert v[:2] == [{"id": "a", "lines": []}, {"id": "", "lines": []}] and e[:2] == [None, None]
    assert v[2] is None and "field lines is set" in e[2]
