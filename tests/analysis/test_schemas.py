"""The broker's schema storage decoded (``/schemas`` locators, schema ledger entries) and a data directory's
schema history. Real data: tests/interop/standalone/test_schemas_real.py (Pulsar 4.0.7 and 3.0.7)."""

from __future__ import annotations

import hashlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulsarkit.analysis.schemas import schema_id
from pulsarkit.broker.schema_registry import (
    SCHEMA_TYPES,
    VersionPlace,
    parse_locator,
    parse_schema_entry,
    schema_version_number,
)
from pulsarkit.errors import PulsarkitError, SchemaStorageError
from pulsarkit.proto import SchemaEntry, SchemaIndexEntry, SchemaLocator, StoredSchemaInfo


def _index(version: int, lid: int, eid: int, definition: bytes) -> object:
    e = SchemaIndexEntry(version=version, hash=hashlib.sha256(definition).digest())
    e.position.ledgerId, e.position.entryId = lid, eid
    return e


def _entry(sid: str, type_: int, definition: bytes, deleted: bool = False, props=()) -> bytes:
    info = StoredSchemaInfo(schema_id=sid, user="", type=type_, schema=definition, timestamp=1_700_000_000_000)
    info.deleted = deleted
    for k, v in props:
        info.props.add(key=k, value=v)
    own = _index(0, -1, -1, definition)  # the broker writes the entry's own place as -1/-1
    return SchemaEntry(schema_data=info.SerializeToString(), index=[own]).SerializeToString()


def test_locator_and_entries_decode() -> None:
    avro = b'{"type":"record","name":"R","fields":[]}'
    loc = SchemaLocator(info=_index(2, 9, 1, b""), index=[_index(0, 7, 0, avro), _index(1, 9, 0, avro)])
    loc.index.append(_index(2, 9, 1, b""))
    places = parse_locator(loc.SerializeToString(), "t/n/x")
    assert [(p.version, p.ledger_id, p.entry_id) for p in places] == [(0, 7, 0), (1, 9, 0), (2, 9, 1)]
    s = parse_schema_entry(_entry("t/n/x", 5, avro, props=[("a", "b")]), places[0], "t/n/x")
    assert (s.schema_id, s.version, s.type, s.definition, s.hash_matches) == ("t/n/x", 0, "AVRO", avro, True)
    assert s.properties == (("a", "b"),) and not s.deleted and (s.ledger_id, s.entry_id) == (7, 0)
    gone = parse_schema_entry(_entry("t/n/x", 1, b"", deleted=True), places[2], "t/n/x")
    assert gone.deleted and gone.type == "NONE" and gone.hash_matches
    other = parse_schema_entry(_entry("t/n/x", 5, b"{}"), places[0], "t/n/x")
    assert not other.hash_matches  # the locator's hash is of another definition
    assert parse_schema_entry(_entry("t/n/x", 99, b""), places[2]).type == "UNKNOWN(99)"
    assert SCHEMA_TYPES[16] == "KEY_VALUE" and SCHEMA_TYPES[21] == "PROTOBUF_NATIVE"


def test_schema_version_and_id() -> None:
    assert schema_version_number(struct.pack(">q", 3)) == 3
    assert schema_version_number(b"") is None and schema_version_number(None) is None
    with pytest.raises(SchemaStorageError, match="8 bytes"):
        schema_version_number(b"\x00\x01")
    assert schema_id("persistent://public/default/parts-partition-2") == "public/default/parts"
    assert schema_id("orders") == "public/default/orders"
    assert schema_id("persistent://t/ns/a%20b") == "t/ns/a%20b"
    # managed-ledger names, which every read of a data directory also takes (v2 and v1)
    assert schema_id("public/default/persistent/parts-partition-2") == "public/default/parts"
    assert schema_id("prop/us-west/ns/persistent/legacy") == "prop/ns/legacy"


def test_missing_required_fields_name_them() -> None:
    with pytest.raises(SchemaStorageError, match=r"schema locator of t/n/x: SchemaLocator lacks info"):
        parse_locator(b"", "t/n/x")
    bad = SchemaEntry(schema_data=b"\x0a\x01x").SerializeToString()  # a SchemaInfo with only its id
    with pytest.raises(SchemaStorageError, match="version 4 .ledger 1 entry 2.: SchemaInfo lacks user"):
        parse_schema_entry(bad, VersionPlace(4, 1, 2, b""), "t/n/x")


@settings(max_examples=400, deadline=None)
@given(raw=st.binary(max_size=200))
def test_fuzz_only_typed_errors(raw: bytes) -> None:
    for parse in (lambda: parse_locator(raw), lambda: parse_schema_entry(raw, VersionPlace(0, 0, 0, b""))):
        try:
            parse()
        except PulsarkitError as e:
            assert isinstance(e, SchemaStorageError)
