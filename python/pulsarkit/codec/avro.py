"""Avro's binary encoding, read with the writer's schema: what a Pulsar producer with an ``AVRO`` schema
stores as a message's payload (the bare datum, no container header), decoded to plain Python values.

Pulsar keeps the schema a producer wrote with in its schema registry (a schema ledger's entry, found
through ``/schemas/<tenant>/<namespace>/<topic>``), so a reader needs no class of its own: field order,
unions and named types all come from that JSON. A record decodes to a dict (field name -> value), an
enum to its symbol, a union to its branch's value, bytes and fixed to ``bytes``.

Every count and length read from the datum is checked against the bytes that remain (an item of a
type that can take no bytes, as ``null``, is capped instead), and nesting is bounded, so a forged
datum costs no more than its own size.

:func:`resolve` reads a datum written with one schema (the writer's) as another (the reader's), by Avro's
schema resolution rules: record fields matched by name or alias (a reader field the writer lacks takes its
default, a writer field the reader lacks is skipped), named types matched by unqualified name or alias, the
numeric promotions (int to long, float, double; long to float, double; float to double), string and bytes
interchangeable, unions resolved branch by branch. Schemas that cannot be resolved fail when the resolution
is built, before any datum is read; a datum that takes a branch or symbol the reader lacks fails alone."""

from __future__ import annotations

import decimal
import json
import struct
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import PulsarkitError

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
#: deepest nesting of records, arrays, maps and unions a datum may have
MAX_DEPTH = 64
#: most items of a zero-width type (``null``, an empty record) one array or map may claim
MAX_EMPTY_ITEMS = 1 << 16


class AvroError(PulsarkitError):
    """A schema that is not Avro, or a datum that does not match its schema."""


class Schema:
    """A parsed Avro schema: its JSON with every named type known by its full name."""

    def __init__(self, schema: Any) -> None:
        if isinstance(schema, (str, bytes)) and not _is_primitive_name(schema):
            try:
                schema = json.loads(schema)
            except ValueError as e:
                raise AvroError(f"not an Avro schema (JSON: {e})") from None
        self.named: dict[str, dict[str, Any]] = {}
        self.root = self._parse(schema, "")

    def _parse(self, s: Any, namespace: str) -> Any:
        if isinstance(s, str):
            return s if s in PRIMITIVES else _full_name(s, namespace)
        if isinstance(s, list):
            return [self._parse(b, namespace) for b in s]
        if not isinstance(s, dict) or "type" not in s:
            raise AvroError(f"not an Avro schema: {str(s)[:80]}")
        t = s["type"]
        if t in ("record", "error", "enum", "fixed"):
            name = _full_name(str(s.get("name", "")), str(s.get("namespace", namespace)))
            node: dict[str, Any] = {"type": "record" if t == "error" else t, "name": name}
            node["aliases"] = [_full_name(str(a), name.rpartition(".")[0]) for a in s.get("aliases") or ()]
            self.named[name] = node
            inner = name.rpartition(".")[0]
            if t in ("record", "error"):
                fields = s.get("fields")
                if not isinstance(fields, list):
                    raise AvroError(f"record {name}: no fields list")
                try:
                    node["fields"] = [(str(f["name"]), self._parse(f["type"], inner)) for f in fields]
                except (KeyError, TypeError):
                    raise AvroError(f"record {name}: a field without name or type") from None
                # what resolution needs beside the fields: their defaults and aliases
                node["defaults"] = {str(f["name"]): f["default"] for f in fields if "default" in f}
                node["field_aliases"] = {str(f["name"]): [str(a) for a in f.get("aliases") or ()] for f in fields}
            elif t == "enum":
                node["symbols"] = [str(x) for x in s.get("symbols", [])]
                if "default" in s:
                    node["default"] = str(s["default"])
            else:
                node["size"] = int(s["size"])
                if "logicalType" in s:
                    node["logicalType"] = s["logicalType"]
                    node.update({k: s[k] for k in ("precision", "scale") if k in s})
            return node
        if t == "array":
            return {"type": "array", "items": self._parse(s["items"], namespace)}
        if t == "map":
            return {"type": "map", "values": self._parse(s["values"], namespace)}
        if isinstance(t, str) and t in PRIMITIVES and "logicalType" in s:
            # a logical type keeps its annotation (its binary encoding is the primitive's)
            extra = {k: s[k] for k in ("logicalType", "precision", "scale") if k in s}
            return {"type": t, **extra}
        return self._parse(t, namespace)  # {"type": "long"} and the like

    def resolve(self, s: Any) -> Any:
        """A named reference replaced by the type it names."""
        if isinstance(s, str) and s not in PRIMITIVES:
            try:
                return self.named[s]
            except KeyError:
                raise AvroError(f"unknown type {s!r}") from None
        return s

    def decode(self, data: bytes) -> Any:
        """The datum ``data`` (all of it) as Python values."""
        r = _Reader(memoryview(data), self)
        value = r.read(self.root, 0)
        if r.pos != len(data):
            raise AvroError(f"{len(data) - r.pos} byte(s) after the datum")
        return value


def _is_primitive_name(s: str | bytes) -> bool:
    return (s.decode() if isinstance(s, bytes) else s) in PRIMITIVES


def _full_name(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


class _Reader:
    def __init__(self, buf: memoryview, schema: Schema) -> None:
        self.buf, self.pos, self.schema = buf, 0, schema

    def long(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= len(self.buf) or shift > 63:
                raise AvroError(f"truncated or oversized varint at offset {self.pos}")
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise AvroError(f"{n} byte(s) at offset {self.pos} exceed the datum")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def count(self, item: Any) -> int:
        """The next block's item count (a negative one is followed by the block's size in bytes)."""
        n = self.long()
        if n < 0:
            n = -n
            self.long()
        width = _min_width(self.schema, item)
        if (width == 0 and n > MAX_EMPTY_ITEMS) or n * width > len(self.buf) - self.pos:
            raise AvroError(f"a block of {n} item(s) at offset {self.pos} exceeds the datum")
        return n

    def read(self, s: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise AvroError(f"nested deeper than {MAX_DEPTH} at offset {self.pos}")
        s = self.schema.resolve(s)
        if isinstance(s, list):
            i = self.long()
            if not 0 <= i < len(s):
                raise AvroError(f"union branch {i} of {len(s)} at offset {self.pos}")
            return self.read(s[i], depth + 1)
        t = s if isinstance(s, str) else s["type"]
        if t == "null":
            return None
        if t == "boolean":
            b = self.take(1)[0]
            if b > 1:
                raise AvroError(f"boolean byte {b} at offset {self.pos - 1}")
            return bool(b)
        if t in ("int", "long"):
            return self.long()
        if t == "float":
            return struct.unpack("<f", self.take(4))[0]
        if t == "double":
            return struct.unpack("<d", self.take(8))[0]
        if t == "bytes":
            return self.take(self.long())
        if t == "string":
            raw = self.take(self.long())
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise AvroError(f"string at offset {self.pos - len(raw)} is not UTF-8: {e}") from None
        if t == "record":
            return {name: self.read(ft, depth + 1) for name, ft in s["fields"]}
        if t == "enum":
            i = self.long()
            if not 0 <= i < len(s["symbols"]):
                raise AvroError(f"enum {s['name']}: symbol {i} of {len(s['symbols'])}")
            return s["symbols"][i]
        if t == "fixed":
            return self.take(s["size"])
        if t == "array":
            items: list[Any] = []
            while n := self.count(s["items"]):
                items += [self.read(s["items"], depth + 1) for _ in range(n)]
            return items
        if t == "map":
            out: dict[str, Any] = {}
            while n := self.count(s["values"]):
                for _ in range(n):
                    key = self.read("string", depth + 1)
                    out[key] = self.read(s["values"], depth + 1)
            return out
        raise AvroError(f"unknown type {t!r}")


_WIDTH = {"null": 0, "boolean": 1, "int": 1, "long": 1, "float": 4, "double": 8, "bytes": 1, "string": 1}


def _min_width(schema: Schema, s: Any, seen: frozenset[str] = frozenset()) -> int:
    """The fewest bytes one value of ``s`` takes (a bound on how many a block can hold)."""
    s = schema.resolve(s)
    if isinstance(s, list):
        return 1
    t = s if isinstance(s, str) else s["type"]
    if t in _WIDTH:
        return _WIDTH[t]
    if t == "record":
        if s["name"] in seen:
            return 1
        return sum(_min_width(schema, ft, seen | {s["name"]}) for _, ft in s["fields"])
    if t == "fixed":
        return int(s["size"])
    return 1  # enum, array, map: at least one varint


# ------------------------------------------------------------------------------ schema resolution

#: A compiled step of a resolution: reads one writer value from the reader, returns it in the reader's shape.
Step = Callable[["_Reader", int], Any]
#: The writer's primitive -> the reader primitives it may be read as (besides itself).
PROMOTIONS = {
    "int": ("long", "float", "double"),
    "long": ("float", "double"),
    "float": ("double",),
    "string": ("bytes",),
    "bytes": ("string",),
}


def type_name(schema: Schema, s: Any) -> str:
    """The name a union branch is known by: a named type's full name, else its type."""
    s = schema.resolve(s)
    if isinstance(s, list):
        return "union"
    if isinstance(s, str):
        return s
    return str(s.get("name") or s["type"])


def union_shape(schema: Schema, branches: list[Any]) -> tuple[bool, list[int]]:
    """A union as a value: (nullable, the indexes of its non-null branches). With one non-null branch the
    value is that branch's (None for null); with more, a dict naming the branch taken (:func:`type_name`)."""
    others = [i for i, b in enumerate(branches) if schema.resolve(b) != "null"]
    return len(others) < len(branches), others


class Resolution:
    """Data written with ``writer`` read as ``reader`` (Avro's resolution rules); built once per pair of
    schemas, raising :class:`AvroError` when they cannot be resolved."""

    def __init__(self, writer: Schema, reader: Schema) -> None:
        self.writer, self.reader = writer, reader
        self._records: dict[tuple[str, str], Step] = {}
        self.step = self._compile(writer.root, reader.root, "")

    def decode(self, data: bytes) -> Any:
        r = _Reader(memoryview(data), self.writer)
        value = self.step(r, 0)
        if r.pos != len(data):
            raise AvroError(f"{len(data) - r.pos} byte(s) after the datum")
        return value

    # -- building

    def _compile(self, w: Any, rd: Any, path: str) -> Step:
        ws, rs = self.writer.resolve(w), self.reader.resolve(rd)
        if isinstance(ws, list):
            branches = [self._try(b, rd, path) for b in ws]
            if all(isinstance(b, str) for b in branches):
                raise AvroError(f"{path or 'the value'}: no branch of the writer's union can be read ({branches[0]})")

            def union(r: _Reader, depth: int) -> Any:
                i = r.long()
                if not 0 <= i < len(branches):
                    raise AvroError(f"union branch {i} of {len(branches)} at offset {r.pos}")
                b = branches[i]
                if isinstance(b, str):
                    raise AvroError(b)
                return b(r, depth + 1)

            return union
        if isinstance(rs, list):
            nullable, others = union_shape(self.reader, rs)
            for j, b in enumerate(rs):
                step = self._try(w, b, path)
                if isinstance(step, str):
                    continue
                if len(others) <= 1:
                    return step
                key = type_name(self.reader, b)
                names = [type_name(self.reader, rs[k]) for k in others]
                return _branch(step, key, names)
            raise AvroError(
                f"{path or 'the value'}: the writer's {type_name(self.writer, ws)} is no branch of the reader's union"
            )
        wt = ws if isinstance(ws, str) else ws["type"]
        rt = rs if isinstance(rs, str) else rs["type"]
        if wt != rt and rt not in PROMOTIONS.get(wt, ()):
            raise AvroError(f"{path or 'the value'}: the writer's {wt} cannot be read as {rt}")
        if wt in ("record", "enum", "fixed") and not _same_name(ws, rs):
            raise AvroError(f"{path or 'the value'}: the writer's {wt} {ws['name']} is not the reader's {rs['name']}")
        if wt == "record":
            return self._record(ws, rs, path)
        if wt == "enum":
            symbols, default = rs["symbols"], rs.get("default")

            def enum(r: _Reader, depth: int) -> Any:
                i = r.long()
                if not 0 <= i < len(ws["symbols"]):
                    raise AvroError(f"enum {ws['name']}: symbol {i} of {len(ws['symbols'])}")
                sym = ws["symbols"][i]
                if sym in symbols:
                    return sym
                if default is not None:
                    return default
                raise AvroError(f"{path}: symbol {sym} is not in the reader's enum {rs['name']}")

            return enum
        if wt == "fixed":
            if ws["size"] != rs["size"]:
                raise AvroError(f"{path}: fixed {ws['name']} of {ws['size']} bytes read as {rs['size']}")
        if wt == "array":
            item = self._compile(ws["items"], rs["items"], path + "[]")

            def array(r: _Reader, depth: int) -> Any:
                out: list[Any] = []
                while n := r.count(ws["items"]):
                    out += [item(r, depth + 1) for _ in range(n)]
                return out

            return array
        if wt == "map":
            value = self._compile(ws["values"], rs["values"], path + "{}")

            def map_(r: _Reader, depth: int) -> Any:
                out: list[tuple[str, Any]] = []
                while n := r.count(ws["values"]):
                    for _ in range(n):
                        k = r.read("string", depth + 1)
                        out.append((k, value(r, depth + 1)))
                return out

            return map_
        logical = _logical(rs)

        def prim(r: _Reader, depth: int) -> Any:
            v = r.read(ws, depth)
            if rt in ("float", "double") and wt in ("int", "long"):
                v = float(v)
            elif rt == "bytes" and wt == "string":
                v = v.encode("utf-8")
            elif rt == "string" and wt == "bytes":
                try:
                    v = v.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise AvroError(f"{path}: bytes read as string are not UTF-8: {e}") from None
            if wt == "int" and rt == "int" and not -(1 << 31) <= v < 1 << 31:
                raise AvroError(f"{path}: int {v} out of range")
            return logical(v) if logical is not None else v

        return prim

    def _try(self, w: Any, rd: Any, path: str) -> Step | str:
        try:
            return self._compile(w, rd, path)
        except AvroError as e:
            return str(e)

    def _record(self, ws: dict[str, Any], rs: dict[str, Any], path: str) -> Step:
        key = (ws["name"], rs["name"])
        if key in self._records:  # a recursive record: the step being built, called later
            return lambda r, depth: self._records[key](r, depth)
        self._records[key] = lambda r, depth: None  # replaced below
        by_name = {name: (name, ft) for name, ft in ws["fields"]}
        plan: list[tuple[str | None, Any]] = []  # (reader field or None to skip, step or writer type)
        reader_fields = dict(rs["fields"])
        fills: dict[str, Any] = {}
        for rname, rft in rs["fields"]:
            names = [rname, *rs.get("field_aliases", {}).get(rname, [])]
            if not any(n in by_name for n in names):
                if rname not in rs.get("defaults", {}):
                    raise AvroError(
                        f"{path or rs['name']}: the reader's field {rname} is not written and has no default"
                    )
                fills[rname] = default_value(self.reader, rft, rs["defaults"][rname])
        target = {}
        for rname, _ in rs["fields"]:
            for cand in [rname, *rs.get("field_aliases", {}).get(rname, [])]:
                if cand in by_name:
                    target[cand] = rname
                    break
        for wname, wft in ws["fields"]:
            if wname in target:
                rname = target[wname]
                plan.append((rname, self._compile(wft, reader_fields[rname], f"{path}.{rname}" if path else rname)))
            else:
                plan.append((None, wft))
        order = [name for name, _ in rs["fields"]]

        def record(r: _Reader, depth: int) -> Any:
            if depth > MAX_DEPTH:
                raise AvroError(f"nested deeper than {MAX_DEPTH} at offset {r.pos}")
            got = dict(fills)
            for rname, step in plan:
                if rname is None:
                    r.read(step, depth + 1)
                else:
                    got[rname] = step(r, depth + 1)
            return {name: got[name] for name in order}

        self._records[key] = record
        return record


def _branch(step: Step, key: str, names: list[str]) -> Step:
    def branch(r: _Reader, depth: int) -> Any:
        out = dict.fromkeys(names)
        out[key] = step(r, depth)
        return out

    return branch


def _same_name(w: dict[str, Any], r: dict[str, Any]) -> bool:
    """Named types match by unqualified name, or by a reader alias naming the writer's full name."""
    return w["name"].rpartition(".")[2] == r["name"].rpartition(".")[2] or w["name"] in r.get("aliases", ())


def _logical(s: Any) -> Callable[[Any], Any] | None:
    """A logical type's value from its primitive's (None: the primitive's value as it is)."""
    if not isinstance(s, dict) or "logicalType" not in s:
        return None
    lt = s["logicalType"]
    if lt == "decimal" and s["type"] in ("bytes", "fixed"):
        scale = int(s.get("scale", 0))
        return lambda v: decimal.Decimal(int.from_bytes(v, "big", signed=True)).scaleb(-scale)
    return None  # dates, times and timestamps are their integers (typed by the caller); uuid its string


def default_value(schema: Schema, s: Any, value: Any) -> Any:
    """A field's JSON default as a value of its type (a union's default is its first branch's)."""
    s = schema.resolve(s)
    if isinstance(s, list):
        nullable, others = union_shape(schema, s)
        first = schema.resolve(s[0])
        if first == "null":
            return None
        v = default_value(schema, s[0], value)
        return (
            v
            if len(others) <= 1
            else {**dict.fromkeys(type_name(schema, s[k]) for k in others), type_name(schema, s[0]): v}
        )
    t = s if isinstance(s, str) else s["type"]
    if t in ("bytes", "fixed"):
        raw = str(value).encode("latin-1")
        f = _logical(s)
        return f(raw) if f else raw
    if t == "record":
        d = dict(value)
        defaults = s.get("defaults", {})
        return {n: default_value(schema, ft, d[n] if n in d else defaults.get(n)) for n, ft in s["fields"]}
    if t == "array":
        return [default_value(schema, s["items"], x) for x in value]
    if t == "map":
        return [(k, default_value(schema, s["values"], x)) for k, x in dict(value).items()]
    if t in ("float", "double") and value is not None:
        return float(value)
    return value


def resolve(writer: Schema, reader: Schema) -> Resolution:
    """The reading of ``writer``'s data as ``reader`` (raises :class:`AvroError` when they do not resolve)."""
    return Resolution(writer, reader)


def decode(schema: Schema | Mapping[str, Any] | str | bytes, data: bytes) -> Any:
    """``data`` decoded with the writer's ``schema`` (parsed, or its JSON)."""
    return (schema if isinstance(schema, Schema) else Schema(schema)).decode(data)


__all__ = ["AvroError", "Resolution", "Schema", "decode", "default_value", "resolve", "type_name", "union_shape"]
