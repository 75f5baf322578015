"""Avro's binary encoding, read with the writer's schema: what a Pulsar producer with an ``AVRO`` schema
stores as a message's payload (the bare datum, no container header), decoded to plain Python values.

Pulsar keeps the schema a producer wrote with in its schema registry (a schema ledger's entry, found
through ``/schemas/<tenant>/<namespace>/<topic>``), so a reader needs no class of its own: field order,
unions and named types all come from that JSON. A record decodes to a dict (field name -> value), an
enum to its symbol, a union to its branch's value, bytes and fixed to ``bytes``.

Every count and length read from the datum is checked against the bytes that remain (an item of a
type that can take no bytes, as ``null``, is capped instead), and nesting is bounded, so a forged
datum costs no more than its own size."""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
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
            self.named[name] = node
            inner = name.rpartition(".")[0]
            if t in ("record", "error"):
                fields = s.get("fields")
                if not isinstance(fields, list):
                    raise AvroError(f"record {name}: no fields list")
                node["fields"] = [(str(f["name"]), self._parse(f["type"], inner)) for f in fields]
            elif t == "enum":
                node["symbols"] = [str(x) for x in s.get("symbols", [])]
            else:
                node["size"] = int(s["size"])
            return node
        if t == "array":
            return {"type": "array", "items": self._parse(s["items"], namespace)}
        if t == "map":
            return {"type": "map", "values": self._parse(s["values"], namespace)}
        return self._parse(t, namespace)  # {"type": "long", "logicalType": ...} and the like

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


def decode(schema: Schema | Mapping[str, Any] | str | bytes, data: bytes) -> Any:
    """``data`` decoded with the writer's ``schema`` (parsed, or its JSON)."""
    return (schema if isinstance(schema, Schema) else Schema(schema)).decode(data)


__all__ = ["AvroError", "Schema", "decode"]
