"""Pulsar's record schemas as Arrow types and their payloads as Arrow values, one message at a time.

``AVRO``: the definition is an Avro schema (JSON), the payload the bare binary datum (:mod:`..avro`); an older
version is read as the newest by Avro's resolution rules (:class:`..avro.Resolution`). ``JSON``: the definition is
an Avro-style record schema too, the payload JSON text (Jackson's: ``byte[]`` in base64, null fields left out); the
text is checked against the newest version's record (a field an older version lacks takes its default, or null).
``PROTOBUF_NATIVE``: the definition is JSON naming a ``FileDescriptorSet`` (base64), the root message's full name and
its file; the payload is the message's protobuf bytes, read with the newest version's descriptor (protobuf's own
rule: fields by number, unknown ones skipped). Values are as the Java client's ``GenericRecord`` gives them: unset
proto3 scalars at their default, an unset message field null, enums by name. ``PROTOBUF`` (a generated class) stores
an Avro-style schema derived from the class and, in its ``__PARSING_INFO__`` property, the number, name, type and
label of each of the root message's fields: those fields are read (the table typed by the Avro schema); a nested
message's fields and an enum's values have no numbers there, so a payload setting such a field is an error row.

Avro types map to Arrow as: ``int``/``long`` int32/int64, ``float``/``double`` float32/float64, ``bytes`` binary,
``fixed`` fixed_size_binary, ``string`` and ``enum`` string, ``record`` struct, ``array`` list, ``map`` map<string, _>,
``[null, T]`` T (nullable), a union of more types a struct with one field per branch (the branch taken set); the
logical types ``date`` date32, ``time-millis``/``-micros`` time32/time64, ``timestamp-*`` timestamp (UTC),
``local-timestamp-*`` timestamp (no zone), ``decimal`` decimal128/256."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from .. import avro
from .info import SchemaDecodeError, SchemaEvolutionError, SchemaInfo

_AVRO_PRIMITIVES = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_LOGICAL = {
    "date": pa.date32(),
    "time-millis": pa.time32("ms"),
    "time-micros": pa.time64("us"),
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "timestamp-nanos": pa.timestamp("ns", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "local-timestamp-nanos": pa.timestamp("ns"),
    "uuid": pa.string(),
}


def parse_avro(info: SchemaInfo) -> avro.Schema:
    try:
        return avro.Schema(bytes(info.definition))
    except (avro.AvroError, KeyError, TypeError, ValueError) as e:
        raise SchemaEvolutionError(f"{info.label}: its definition is no Avro schema: {e}") from None


def avro_arrow_type(schema: avro.Schema, s: Any = None, seen: frozenset[str] = frozenset()) -> pa.DataType:
    """The Arrow type of values of ``s`` (the schema's root by default)."""
    s = schema.resolve(schema.root if s is None else s)
    if isinstance(s, list):
        nullable, others = avro.union_shape(schema, s)
        if not others:
            return pa.null()
        if len(others) == 1:
            return avro_arrow_type(schema, s[others[0]], seen)
        return pa.struct([(avro.type_name(schema, s[i]), avro_arrow_type(schema, s[i], seen)) for i in others])
    if isinstance(s, str):
        return _AVRO_PRIMITIVES[s]
    t = s["type"]
    lt = s.get("logicalType")
    if lt == "decimal" and t in ("bytes", "fixed"):
        p, sc = int(s.get("precision", 38)), int(s.get("scale", 0))
        return pa.decimal128(p, sc) if p <= 38 else pa.decimal256(p, sc)
    if t in _AVRO_PRIMITIVES:
        ty = _LOGICAL.get(lt, _AVRO_PRIMITIVES[t]) if lt else _AVRO_PRIMITIVES[t]
        return ty
    if t == "record":
        if s["name"] in seen:
            raise SchemaEvolutionError(f"record {s['name']} contains itself: no Arrow type holds it")
        return pa.struct([(n, avro_arrow_type(schema, ft, seen | {s["name"]})) for n, ft in s["fields"]])
    if t == "enum":
        return pa.string()
    if t == "fixed":
        return pa.binary(int(s["size"]))
    if t == "array":
        return pa.list_(avro_arrow_type(schema, s["items"], seen))
    if t == "map":
        return pa.map_(pa.string(), avro_arrow_type(schema, s["values"], seen))
    raise SchemaEvolutionError(f"Avro type {t!r} has no Arrow type")


class RowCodec:
    """A decoder of one message at a time (``decode_one``) over a column: values of ``type``."""

    type: pa.DataType

    def decode_one(self, payload: bytes) -> Any:
        raise NotImplementedError

    def decode(self, payloads: pa.Array) -> tuple[pa.Array, list[str | None]]:
        values: list[Any] = []
        errors: list[str | None] = []
        for p in payloads.to_pylist():
            if p is None:
                values.append(None)
                errors.append(None)
                continue
            try:
                values.append(self.decode_one(p))
                errors.append(None)
            except SchemaDecodeError as e:
                values.append(None)
                errors.append(str(e))
            except (avro.AvroError, DecodeError, ValueError, TypeError, KeyError, RecursionError, OverflowError) as e:
                values.append(None)
                errors.append(f"{self.what}: {e}")
        return _to_arrow(values, errors, self.type), errors

    @property
    def what(self) -> str:
        return type(self).__name__.removesuffix("Codec").upper()


def _to_arrow(values: list[Any], errors: list[str | None], type_: pa.DataType) -> pa.Array:
    try:
        return pa.array(values, type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        pass
    out = []
    for i, v in enumerate(values):  # the rows Arrow's type cannot hold become errors
        try:
            pa.array([v], type_)
            out.append(v)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
            errors[i] = f"the value does not fit {type_}: {e}"
            out.append(None)
    return pa.array(out, type_)


class AvroCodec(RowCodec):
    """``AVRO``: the writer's datum read as the reader's (newest) schema."""

    def __init__(self, writer: SchemaInfo, reader: SchemaInfo) -> None:
        w, r = parse_avro(writer), parse_avro(reader)
        self.type = avro_arrow_type(r)
        try:
            self.resolution = avro.resolve(w, r)
        except avro.AvroError as e:
            raise SchemaEvolutionError(f"AVRO {writer.label} cannot be read as {reader.label}: {e}") from None

    def decode_one(self, payload: bytes) -> Any:
        return self.resolution.decode(payload)


class JsonCodec(RowCodec):
    """``JSON``: the text checked against the reader's (newest) record schema."""

    def __init__(self, writer: SchemaInfo, reader: SchemaInfo) -> None:
        w, r = parse_avro(writer), parse_avro(reader)
        self.schema = r
        self.shapes: dict[int, tuple[Any, bool, list[int]]] = {}  # conform's memo of the schema's unions
        self.type = avro_arrow_type(r)
        try:
            avro.resolve(w, r)  # the versions must resolve as Avro schemas do
        except avro.AvroError as e:
            raise SchemaEvolutionError(f"JSON {writer.label} cannot be read as {reader.label}: {e}") from None

    def decode_one(self, payload: bytes) -> Any:
        try:
            doc = json.loads(payload)
        except (ValueError, UnicodeDecodeError) as e:
            raise SchemaDecodeError(f"JSON: the payload is not JSON text: {e}") from None
        return conform(self.schema, self.schema.root, doc, "", self.shapes)


def conform(
    schema: avro.Schema, s: Any, v: Any, path: str, shapes: dict[int, tuple[Any, bool, list[int]]] | None = None
) -> Any:
    """A JSON value as a value of the Avro type ``s`` (raises :class:`SchemaDecodeError` when it is not one).
    ``shapes``: a memo of ``schema``'s unions' shapes (by identity), kept by the caller for its schema."""
    s = schema.resolve(s)
    where = path or "the value"
    if isinstance(s, list):
        # the union's shape once per union, not once per value (it was a fifth of a decode)
        shape = shapes.get(id(s)) if shapes is not None else None
        if shape is None or shape[0] is not s:
            shape = (s, *avro.union_shape(schema, s))
            if shapes is not None:
                shapes[id(s)] = shape
        _, nullable, others = shape
        if v is None:
            if nullable:
                return None
            raise SchemaDecodeError(f"JSON: {where} is null, not {avro.type_name(schema, s[others[0]])}")
        fails = []
        for i in others:
            try:
                got = conform(schema, s[i], v, path, shapes)
            except SchemaDecodeError as e:
                fails.append(str(e))
                continue
            if len(others) == 1:
                return got
            out = dict.fromkeys(avro.type_name(schema, s[k]) for k in others)
            out[avro.type_name(schema, s[i])] = got
            return out
        raise SchemaDecodeError(fails[0] if len(fails) == 1 else f"JSON: {where} matches no branch of its union")
    t = s if isinstance(s, str) else s["type"]

    def bad() -> SchemaDecodeError:  # built only on a mismatch: formatting it per value cost ~10 % of a decode
        return SchemaDecodeError(f"JSON: {where} is {type(v).__name__} {str(v)[:40]!r}, not {t}")

    if t == "null":
        if v is not None:
            raise bad()
        return None
    if v is None:
        raise SchemaDecodeError(f"JSON: {where} is null, not {t}")
    if t == "record":
        if not isinstance(v, dict):
            raise bad()
        out = {}
        for name, ft in s["fields"]:
            if name in v:
                out[name] = conform(schema, ft, v[name], f"{path}.{name}" if path else name, shapes)
            elif name in s.get("defaults", {}):
                out[name] = avro.default_value(schema, ft, s["defaults"][name])
            else:  # Jackson leaves null fields out
                out[name] = conform(schema, ft, None, f"{path}.{name}" if path else name, shapes)
        return out
    if t == "boolean":
        if not isinstance(v, bool):
            raise bad()
        return v
    if t in ("int", "long"):
        if isinstance(v, bool) or not isinstance(v, int):
            raise bad()
        bits = 31 if t == "int" else 63
        if not -(1 << bits) <= v < 1 << bits:
            raise SchemaDecodeError(f"JSON: {where}: {v} out of {t}'s range")
        return v
    if t in ("float", "double"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise bad()
        return float(v)
    if t == "string":
        if not isinstance(v, str):
            raise bad()
        return v
    if t in ("bytes", "fixed"):
        if not isinstance(v, str):
            raise bad()
        try:
            raw = base64.b64decode(v, validate=True)
        except ValueError:
            raise SchemaDecodeError(f"JSON: {where} is not base64 bytes") from None
        if t == "fixed" and len(raw) != s["size"]:
            raise SchemaDecodeError(f"JSON: {where} has {len(raw)} bytes, not {s['size']}")
        return raw
    if t == "enum":
        if not isinstance(v, str) or v not in s["symbols"]:
            raise SchemaDecodeError(f"JSON: {where}: {str(v)[:40]!r} is no symbol of {s['name']}")
        return v
    if t == "array":
        if not isinstance(v, list):
            raise bad()
        return [conform(schema, s["items"], x, f"{where}[{i}]", shapes) for i, x in enumerate(v)]
    if t == "map":
        if not isinstance(v, dict):
            raise bad()
        return [(k, conform(schema, s["values"], x, f"{where}[{k!r}]", shapes)) for k, x in v.items()]
    raise bad()


# ------------------------------------------------------------------------------ protobuf

_PROTO_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_FLOAT: pa.float32(),
    FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_SINT64: pa.int64(),
    FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_UINT64: pa.uint64(),
    FieldDescriptor.TYPE_FIXED64: pa.uint64(),
    FieldDescriptor.TYPE_INT32: pa.int32(),
    FieldDescriptor.TYPE_SINT32: pa.int32(),
    FieldDescriptor.TYPE_SFIXED32: pa.int32(),
    FieldDescriptor.TYPE_UINT32: pa.uint32(),
    FieldDescriptor.TYPE_FIXED32: pa.uint32(),
    FieldDescriptor.TYPE_BOOL: pa.bool_(),
    FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(),
    FieldDescriptor.TYPE_ENUM: pa.string(),
}


def protobuf_descriptor(info: SchemaInfo) -> Descriptor:
    """The root message of a ``PROTOBUF_NATIVE`` definition."""
    try:
        d = json.loads(bytes(info.definition))
        fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(d["fileDescriptorSet"]))
        root = str(d["rootMessageTypeName"])
    except (ValueError, KeyError, TypeError, DecodeError) as e:
        raise SchemaEvolutionError(f"PROTOBUF_NATIVE {info.label}: its definition is not readable: {e!r}") from None
    pool = descriptor_pool.DescriptorPool()
    pending = list(fds.file)
    while pending:  # a file goes in after the files it imports
        added = [f for f in pending if all(_has_file(pool, dep) for dep in f.dependency)]
        if not added:
            raise SchemaEvolutionError(f"PROTOBUF_NATIVE {info.label}: {pending[0].name} imports a file it lacks")
        for f in added:
            try:
                pool.Add(f)
            except (TypeError, ValueError) as e:
                raise SchemaEvolutionError(f"PROTOBUF_NATIVE {info.label}: {f.name}: {e}") from None
            pending.remove(f)
    try:
        return pool.FindMessageTypeByName(root)
    except KeyError:
        raise SchemaEvolutionError(f"PROTOBUF_NATIVE {info.label}: no message {root} in its descriptor") from None


def _has_file(pool: descriptor_pool.DescriptorPool, name: str) -> bool:
    try:
        pool.FindFileByName(name)
        return True
    except KeyError:
        return False


def protobuf_arrow_type(desc: Descriptor, seen: frozenset[str] = frozenset()) -> pa.DataType:
    if desc.full_name in seen:
        raise SchemaEvolutionError(f"message {desc.full_name} contains itself: no Arrow type holds it")
    return pa.struct([(f.name, _proto_field_type(f, seen | {desc.full_name})) for f in desc.fields])


def _is_repeated(f: FieldDescriptor) -> bool:
    return bool(f.is_repeated)


def _proto_field_type(f: FieldDescriptor, seen: frozenset[str]) -> pa.DataType:
    if f.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        if _is_repeated(f) and f.message_type.GetOptions().map_entry:
            k, v = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            return pa.map_(_proto_field_type(k, seen), _proto_field_type(v, seen))
        inner = protobuf_arrow_type(f.message_type, seen)
    else:
        inner = _PROTO_SCALARS[f.type]
    return pa.list_(inner) if _is_repeated(f) else inner


def _proto_value(f: FieldDescriptor, v: Any) -> Any:
    if f.type == FieldDescriptor.TYPE_ENUM:
        ev = f.enum_type.values_by_number.get(v)
        if ev is None:
            raise SchemaDecodeError(f"PROTOBUF_NATIVE: {f.full_name}: {v} is no value of {f.enum_type.full_name}")
        return ev.name
    if f.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        return proto_dict(v)
    return v


def proto_dict(m: Message) -> dict[str, Any]:
    """A message's fields by name (every field: unset scalars at their default, an unset message None)."""
    out: dict[str, Any] = {}
    for f in m.DESCRIPTOR.fields:
        v = getattr(m, f.name)
        if _is_repeated(f):
            if f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
                vf = f.message_type.fields_by_name["value"]
                out[f.name] = [(k, _proto_value(vf, v[k])) for k in v]
            else:
                out[f.name] = [_proto_value(f, x) for x in v]
        elif f.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP) and not m.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = _proto_value(f, v)
    return out


class ProtobufNativeCodec(RowCodec):
    """``PROTOBUF_NATIVE``: the bytes read with the reader's (newest) descriptor."""

    what = "PROTOBUF_NATIVE"

    def __init__(self, writer: SchemaInfo, reader: SchemaInfo) -> None:
        w, r = protobuf_descriptor(writer), protobuf_descriptor(reader)
        if w.name != r.name:
            raise SchemaEvolutionError(
                f"PROTOBUF_NATIVE {writer.label} (message {w.full_name}) cannot be read as {reader.label} "
                f"(message {r.full_name})"
            )
        self.type = protobuf_arrow_type(r)
        self.cls: Callable[[], Message] = message_factory.GetMessageClass(r)

    def decode_one(self, payload: bytes) -> Any:
        m = self.cls()
        try:
            m.ParseFromString(payload)
        except DecodeError as e:
            raise SchemaDecodeError(f"PROTOBUF_NATIVE: not a {m.DESCRIPTOR.full_name}: {e}") from None
        return proto_dict(m)


#: ``__PARSING_INFO__``'s type names that are scalars on the wire, as descriptor types
_PARSING_SCALARS = {
    name: getattr(FieldDescriptor, f"TYPE_{name}")
    for name in ("DOUBLE", "FLOAT", "INT64", "UINT64", "INT32", "FIXED64", "FIXED32", "BOOL", "STRING", "BYTES",
                 "UINT32", "SFIXED32", "SFIXED64", "SINT32", "SINT64")
}  # fmt: skip
_UNSIGNED = {FieldDescriptor.TYPE_UINT32: 32, FieldDescriptor.TYPE_FIXED32: 32, FieldDescriptor.TYPE_UINT64: 64,
             FieldDescriptor.TYPE_FIXED64: 64}  # fmt: skip


class ProtobufCodec(RowCodec):
    """``PROTOBUF`` (a generated class): typed as its Avro-style definition, the payload read with the root
    message's field numbers its ``__PARSING_INFO__`` property lists (number, name, type, label of each field).
    That list has no numbers for the fields of a nested message, nor an enum's values: a payload that sets such a
    field is an error row naming it (the rest of the fields read as a Java consumer reads them; unsigned fields
    as Java's signed int and long)."""

    what = "PROTOBUF"

    def __init__(self, writer: SchemaInfo, reader: SchemaInfo) -> None:
        schema = parse_avro(reader)
        self.type = avro_arrow_type(schema)
        try:
            info = json.loads(dict(reader.properties)["__PARSING_INFO__"])
            fields = [(int(f["number"]), str(f["name"]), str(f["type"]), str(f["label"])) for f in info]
        except (KeyError, ValueError, TypeError) as e:
            self.cls = None
            self.why = f"PROTOBUF {reader.label}: no readable __PARSING_INFO__ property ({e!r}): no field numbers"
            return
        names = [f.name for f in self.type] if pa.types.is_struct(self.type) else []
        proto = descriptor_pb2.FileDescriptorProto(
            name="pulsarkit_protobuf.proto", package="pulsarkit", syntax="proto3"
        )
        root = proto.message_type.add(name="Root")
        self.unreadable: set[str] = set()
        for number, name, type_name, label in fields:
            if name not in names:
                continue  # a field the Avro definition does not type: skipped as an unknown field
            scalar = _PARSING_SCALARS.get(type_name)
            if scalar is None:  # MESSAGE, ENUM, GROUP: length-delimited or varint, read only to see it is there
                self.unreadable.add(name)
                scalar = FieldDescriptor.TYPE_INT64 if type_name == "ENUM" else FieldDescriptor.TYPE_BYTES
            root.field.add(
                name=name,
                number=number,
                type=scalar,
                label=FieldDescriptor.LABEL_REPEATED if label == "LABEL_REPEATED" else FieldDescriptor.LABEL_OPTIONAL,
            )
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)
        self.desc = pool.FindMessageTypeByName("pulsarkit.Root")
        # an unset enum reads as its value numbered 0, which proto3 requires to be the first (the first symbol)
        self.enum_default: dict[str, str] = {}
        if isinstance(schema.root, dict) and schema.root.get("type") == "record":
            for name, ft in schema.root["fields"]:
                t = schema.resolve(ft)
                branches = [schema.resolve(b) for b in t] if isinstance(t, list) else [t]
                enums = [b for b in branches if isinstance(b, dict) and b["type"] == "enum" and b["symbols"]]
                if enums:
                    self.enum_default[name] = enums[0]["symbols"][0]
        self.cls = message_factory.GetMessageClass(self.desc)
        self.names = names

    def decode_one(self, payload: bytes) -> Any:
        if self.cls is None:
            raise SchemaDecodeError(self.why)
        m = self.cls()
        try:
            m.ParseFromString(payload)
        except DecodeError as e:
            raise SchemaDecodeError(f"PROTOBUF: not the message its __PARSING_INFO__ describes: {e}") from None
        out: dict[str, Any] = dict.fromkeys(self.names)
        for f in self.desc.fields:
            v = getattr(m, f.name)
            if f.name in self.unreadable:
                if len(v) if _is_repeated(f) else m.HasField(f.name) if f.has_presence else v:
                    raise SchemaDecodeError(
                        f"PROTOBUF: field {f.name} is set, and the stored schema has no field numbers for a nested "
                        "message's fields or an enum's values"
                    )
                # unset, it reads as proto's unset value: none repeated (the Avro array, not null), an enum's first
                if _is_repeated(f):
                    out[f.name] = []
                elif f.name in self.enum_default:
                    out[f.name] = self.enum_default[f.name]
                continue
            bits = _UNSIGNED.get(f.type)
            if bits:  # Java reads them into its signed int and long
                wrap: Callable[[int], int] = lambda x: x - (1 << bits) if x >= 1 << (bits - 1) else x  # noqa: E731
                v = [wrap(x) for x in v] if _is_repeated(f) else wrap(v)
            out[f.name] = list(v) if _is_repeated(f) else v
        return out


__all__ = [
    "AvroCodec",
    "JsonCodec",
    "ProtobufCodec",
    "ProtobufNativeCodec",
    "RowCodec",
    "avro_arrow_type",
    "conform",
    "protobuf_arrow_type",
    "protobuf_descriptor",
]
