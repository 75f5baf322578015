"""The broker's schema registry as it stores schemas (its BookKeeper schema storage), decoded.

A topic's schemas live in two places. The metadata store's ``/schemas/<tenant>/<namespace>/<topic>`` node
holds a ``SchemaLocator``: the newest version and the index of every version (its number, the ledger entry
holding it, and the SHA-256 of its definition). Each version is one entry of a schema ledger (custom metadata
``component=schema``, ``pulsar/schemaId``): a ``SchemaEntry`` whose ``schema_data`` is a serialized
``SchemaInfo`` (schema id, user, type, definition, timestamp, whether it records the schema's deletion,
properties). A message names its version in ``MessageMetadata.schema_version``: the version number as 8
big-endian bytes.

The type is stored in the broker's own numbering (``NONE`` = 1 ... ``PROTOBUFNATIVE`` = 21), which differs
from the wire protocol's ``Schema.Type``; :data:`SCHEMA_TYPES` names it as Pulsar's ``SchemaType`` does
(``KEY_VALUE``, ``PROTOBUF_NATIVE``...). Every parser here raises :class:`SchemaStorageError` (with what was
expected) on bytes it cannot read; nothing is guessed.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from ..errors import SchemaStorageError
from ..proto import SchemaEntry, SchemaLocator, StoredSchemaInfo

#: The broker's storage numbering of schema types -> Pulsar's ``SchemaType`` name.
SCHEMA_TYPES: dict[int, str] = {
    1: "NONE",
    2: "STRING",
    3: "JSON",
    4: "PROTOBUF",
    5: "AVRO",
    6: "BOOLEAN",
    7: "INT8",
    8: "INT16",
    9: "INT32",
    10: "INT64",
    11: "FLOAT",
    12: "DOUBLE",
    13: "DATE",
    14: "TIME",
    15: "TIMESTAMP",
    16: "KEY_VALUE",
    17: "INSTANT",
    18: "LOCAL_DATE",
    19: "LOCAL_TIME",
    20: "LOCAL_DATE_TIME",
    21: "PROTOBUF_NATIVE",
}


@dataclass(frozen=True)
class VersionPlace:
    """Where one version is: its number, the schema ledger entry holding it, the SHA-256 of its definition."""

    version: int
    ledger_id: int
    entry_id: int
    hash: bytes


@dataclass(frozen=True)
class StoredSchema:
    """One version of a topic's schema, as the broker stored it."""

    schema_id: str
    version: int
    #: Pulsar's ``SchemaType`` name, or ``UNKNOWN(<n>)`` for a storage number this release does not name.
    type: str
    #: The definition: an Avro or JSON schema as JSON text, a protobuf descriptor, empty for primitives.
    definition: bytes
    timestamp: int
    user: str
    #: A deletion of the topic's schema, stored as a version of its own.
    deleted: bool
    properties: tuple[tuple[str, str], ...]
    ledger_id: int
    entry_id: int
    #: True when the definition's SHA-256 is the one the locator keeps for the version.
    hash_matches: bool


def _parse(cls: type[Any], raw: bytes, what: str) -> object:
    msg = cls()
    try:
        msg.ParseFromString(raw)
    except DecodeError as e:
        raise SchemaStorageError(f"{what}: not a {cls.DESCRIPTOR.name} ({e})") from None
    if not msg.IsInitialized():
        raise SchemaStorageError(f"{what}: {cls.DESCRIPTOR.name} lacks {', '.join(msg.FindInitializationErrors())}")
    return msg


def parse_locator(raw: bytes, schema_id: str = "?") -> list[VersionPlace]:
    """The versions a ``/schemas/...`` node lists, in version order (the newest is also its ``info``)."""
    loc = _parse(SchemaLocator, raw, f"schema locator of {schema_id}")
    places = {
        e.version: VersionPlace(e.version, e.position.ledgerId, e.position.entryId, bytes(e.hash))
        for e in [*loc.index, loc.info]  # type: ignore[attr-defined]
    }
    return [places[v] for v in sorted(places)]


def parse_schema_entry(raw: bytes, place: VersionPlace, schema_id: str = "?") -> StoredSchema:
    """One schema ledger entry (a ``SchemaEntry`` holding a ``SchemaInfo``) as the version ``place`` names."""
    where = f"schema {schema_id} version {place.version} (ledger {place.ledger_id} entry {place.entry_id})"
    entry = _parse(SchemaEntry, raw, where)
    info = _parse(StoredSchemaInfo, bytes(entry.schema_data), where)  # type: ignore[attr-defined]
    definition = bytes(info.schema)  # type: ignore[attr-defined]
    return StoredSchema(
        schema_id=info.schema_id,  # type: ignore[attr-defined]
        version=place.version,
        type=SCHEMA_TYPES.get(info.type, f"UNKNOWN({info.type})"),  # type: ignore[attr-defined]
        definition=definition,
        timestamp=info.timestamp,  # type: ignore[attr-defined]
        user=info.user,  # type: ignore[attr-defined]
        deleted=info.deleted,  # type: ignore[attr-defined]
        properties=tuple((p.key, p.value) for p in info.props),  # type: ignore[attr-defined]
        ledger_id=place.ledger_id,
        entry_id=place.entry_id,
        hash_matches=hashlib.sha256(definition).digest() == place.hash,
    )


def schema_version_number(raw: bytes | None) -> int | None:
    """The version a message's ``schema_version`` names (8 big-endian bytes), None when it has none."""
    if not raw:
        return None
    if len(raw) != 8:
        raise SchemaStorageError(f"schema_version: expected 8 bytes (a big-endian long), got {len(raw)}")
    return struct.unpack(">q", raw)[0]


__all__ = [
    "SCHEMA_TYPES",
    "SchemaStorageError",
    "StoredSchema",
    "VersionPlace",
    "parse_locator",
    "parse_schema_entry",
    "schema_version_number",
]
