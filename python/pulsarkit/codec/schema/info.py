"""A schema version as the decoders take it, and the ``KEY_VALUE`` schema's two layouts.

A ``KEY_VALUE`` schema's definition holds its two schemas' definitions, each after its length (4 bytes, big-endian);
their types, names and properties are the version's properties (``key.schema.type``, ``key.schema.properties`` as
JSON, the same for ``value.``) and the encoding is ``kv.encoding.type``: ``INLINE`` (the default) puts both in the
payload, each after its length (4 bytes, big-endian; -1 for a null), ``SEPARATED`` puts the key in the message's
key (base64, as ``partition_key_b64_encoded`` says) and the value alone in the payload."""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...errors import PulsarkitError

#: The types whose value is the payload itself.
BYTES_TYPES = ("NONE", "BYTES", "AUTO", "AUTO_CONSUME", "AUTO_PUBLISH")


class SchemaDecodeError(PulsarkitError):
    """A payload that does not decode with the schema version it names (one message's ``decode_error``)."""


class SchemaEvolutionError(PulsarkitError):
    """Two versions of a topic's schema that cannot be read as one table schema."""


@dataclass(frozen=True)
class SchemaInfo:
    """One version of a schema: Pulsar's ``SchemaType`` name, its definition and properties."""

    type: str
    definition: bytes = b""
    properties: Mapping[str, str] = field(default_factory=dict)
    #: the version number in the topic's history (None for a part of a ``KEY_VALUE`` schema)
    version: int | None = None

    @property
    def label(self) -> str:
        return f"version {self.version} ({self.type})" if self.version is not None else self.type


def key_value_parts(info: SchemaInfo) -> tuple[SchemaInfo, SchemaInfo, str]:
    """A ``KEY_VALUE`` schema's key and value schemas and its encoding (``INLINE``/``SEPARATED``)."""
    d = bytes(info.definition)
    try:
        (n,) = struct.unpack_from(">i", d, 0)
        key_def = d[4 : 4 + n] if n > 0 else b""
        (m,) = struct.unpack_from(">i", d, 4 + max(n, 0))
        value_def = d[8 + max(n, 0) : 8 + max(n, 0) + m] if m > 0 else b""
        if n > len(d) - 4 or 8 + max(n, 0) + max(m, 0) != len(d):
            raise SchemaEvolutionError(f"KEY_VALUE {info.label}: its definition's lengths ({n}, {m}) do not frame it")
    except struct.error:
        raise SchemaEvolutionError(
            f"KEY_VALUE {info.label}: a definition of {len(d)} bytes is no key and value"
        ) from None
    props = dict(info.properties)

    def part(side: str, definition: bytes) -> SchemaInfo:
        try:
            sub = json.loads(props.get(f"{side}.schema.properties") or "{}")
        except ValueError:
            raise SchemaEvolutionError(f"KEY_VALUE {info.label}: {side}.schema.properties is not JSON") from None
        return SchemaInfo(
            props.get(f"{side}.schema.type", "BYTES"), definition, {str(k): str(v) for k, v in sub.items()}
        )

    encoding = props.get("kv.encoding.type", "INLINE")
    if encoding not in ("INLINE", "SEPARATED"):
        raise SchemaEvolutionError(f"KEY_VALUE {info.label}: unknown encoding {encoding!r}")
    return part("key", key_def), part("value", value_def), encoding


def split_inline(payload: bytes) -> tuple[bytes | None, bytes | None]:
    """An ``INLINE`` key-value payload's key and value (None for a length of -1)."""
    out: list[bytes | None] = []
    pos = 0
    for what in ("key", "value"):
        if pos + 4 > len(payload):
            raise SchemaDecodeError(f"KEY_VALUE INLINE: {len(payload)} bytes end before the {what}'s length")
        (n,) = struct.unpack_from(">i", payload, pos)
        pos += 4
        if n == -1:
            out.append(None)
            continue
        if n < 0 or pos + n > len(payload):
            raise SchemaDecodeError(
                f"KEY_VALUE INLINE: the {what}'s length {n} exceeds the {len(payload)}-byte payload"
            )
        out.append(bytes(payload[pos : pos + n]))
        pos += n
    if pos != len(payload):
        raise SchemaDecodeError(f"KEY_VALUE INLINE: {len(payload) - pos} byte(s) after the value")
    return out[0], out[1]


__all__ = ["BYTES_TYPES", "SchemaDecodeError", "SchemaEvolutionError", "SchemaInfo", "key_value_parts", "split_inline"]
