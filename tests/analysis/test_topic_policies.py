"""Topic-level policies replayed from a namespace's __change_events topic, as the broker replays them, and
used by whatif before the namespace's and the broker's.

The events are Pulsar's own bytes: ``topic_policy_events/events.json`` holds the Avro schema and the
encoded ``PulsarEvent`` values that Pulsar 4.0.7's client produces for them (``EncodeEvents.java``, run by
the oracle test below when Java and the cached Pulsar jars are present, which also checks that a real
standalone registers that same schema for its ``__change_events`` topics)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pulsarkit as pk
import pytest
from pulsarkit.analysis.schemas import schema_history
from pulsarkit.analysis.topic_policies import read_topic_policies
from pulsarkit.analysis.whatif import WhatIf, simulate
from pulsarkit.broker.compaction import Compactor
from pulsarkit.codec.avro import AvroError, Schema
from pulsarkit.codec.protobuf_wire import encode_varint
from pulsarkit.managed_ledger.ledger_handle import LedgerHandle
from pulsarkit.scan.datadir import open_data_dir
from test_whatif import GC, build

HERE = Path(__file__).resolve().parent / "topic_policy_events"
FIXTURE = json.loads((HERE / "events.json").read_text())
EVENTS = {k: bytes.fromhex(v) for k, v in FIXTURE["events"].items()}
NS_POLICY = {
    "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 5},
    "message_ttl_in_seconds": 120,
}
ML = "t/pol/persistent/"


def _field(no: int, value: bytes | int | str) -> bytes:
    if isinstance(value, int):
        return encode_varint(no << 3) + encode_varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return encode_varint(no << 3 | 2) + encode_varint(len(raw)) + raw


def register_schema(store, ns: str, schema: dict) -> None:
    """What the broker's schema registry stores: a schema ledger whose entry is a SchemaEntry (info 2:
    SchemaInfo{schema_id 1, user 2, type 3 = AVRO, schema 4, timestamp 5, deleted 6}), and the locator
    node naming version 0 at that entry (info 1 and index 2: IndexEntry{version 1, position 2})."""
    h = LedgerHandle.create(store, {"application": b"pulsar", "component": b"schema"}, "CRC32C")
    definition = json.dumps(schema).encode()
    info = _field(1, f"{ns}/__change_events") + _field(2, "") + _field(3, 5)
    info += _field(4, definition) + _field(5, 1) + _field(6, 0)
    eid = h.add_entry(_field(2, info))
    h.close()
    digest = hashlib.sha256(definition).digest()
    index = _field(1, 0) + _field(2, _field(1, h.ledger_id) + _field(2, eid)) + _field(3, digest)
    store.metadata.put(f"/schemas/{ns}/__change_events", _field(1, index) + _field(2, index))


def publish(ml, key: str, value: bytes | None, seq: int) -> None:
    """One event as the broker's system-topic writer sends it: keyed by the topic, schema version 0; a
    deletion is a null value (empty payload, ``null_value``)."""
    md = pk.message_metadata("events", seq, 1_700_000_000_000 + seq, partition_key=key)
    md.schema_version = struct.pack(">q", 0)
    if value is None:
        md.null_value = True
    ml.add_entry(pk.encode_entry(md, value or b""))


def build_with_topic_policies(root: Path) -> None:
    """Topics a..e and partition 0 of p in t/pol, whose namespace policy is 60 min / 5 MB and a 120 s TTL.
    Events: a, c, d (inserted), e set to forever, then compacted; after the horizon b gets a global 7-day
    retention and a local 1 h TTL, c a deletion (null value), d a second insert (ignored), e a DELETE
    action, p forever."""
    build(root, {n: "t/pol" for n in ("a", "b", "c", "d", "e", "p-partition-0")})
    with pk.Store.open(root, clock=lambda: 1_600_000_000_000) as store:
        store.metadata.put("/admin/policies/t/pol", json.dumps(NS_POLICY).encode())
        register_schema(store, "t/pol", FIXTURE["schema"])
        ml = store.managed_ledger(ML + "__change_events")
        seq = iter(range(100))
        for key, name in (("a", "a_forever"), ("c", "c_forever"), ("d", "d_insert_forever"), ("e", "e_forever")):
            publish(ml, f"persistent://t/pol/{key}", EVENTS[name], next(seq))
        Compactor(store, ml).compact()
        for key, name in (
            ("b", "b_global_week"),
            ("b", "b_local_ttl"),
            ("c", None),
            ("d", "d_insert_zero"),
            ("e", "e_delete"),
            ("p", "p_forever"),
        ):
            publish(ml, f"persistent://t/pol/{key}", EVENTS[name] if name else None, next(seq))


def test_events_decode_with_the_schema_they_were_written_with():
    schema = Schema(json.dumps(FIXTURE["schema"]))
    ev = schema.decode(EVENTS["b_global_week"])
    assert (ev["actionType"], ev["eventType"]) == ("UPDATE", "TOPIC_POLICY")
    tpe = ev["topicPoliciesEvent"]
    assert (tpe["domain"], tpe["tenant"], tpe["namespace"], tpe["topic"]) == ("persistent", "t", "pol", "b")
    pol = tpe["policies"]
    assert pol["isGlobal"] is True and pol["messageTTLInSeconds"] is None
    assert pol["retentionPolicies"] == {"retentionSizeInMB": -1, "retentionTimeInMinutes": 10080}
    assert schema.decode(EVENTS["b_local_ttl"])["topicPoliciesEvent"]["policies"]["messageTTLInSeconds"] == 3600
    assert schema.decode(EVENTS["e_delete"])["topicPoliciesEvent"]["policies"] is None
    # a datum cut short, or one claiming more than it holds, is an error, not a guess
    with pytest.raises(AvroError):
        schema.decode(EVENTS["a_forever"][:-3])
    with pytest.raises(AvroError):
        schema.decode(EVENTS["a_forever"] + b"\x00")
    with pytest.raises(AvroError, match="exceeds"):
        Schema('{"type": "array", "items": "null"}').decode(encode_varint(2 * 10**9) + b"\x00")
    with pytest.raises(AvroError, match="exceeds"):
        Schema('{"type": "map", "values": "long"}').decode(encode_varint(2 * 10**6))


def test_topic_policies_are_replayed_as_the_broker_replays_them(tmp_path):
    build_with_topic_policies(tmp_path / "d")
    with open_data_dir(tmp_path / "d") as dd:
        tp = read_topic_policies(dd)
        assert tp.notes == []
        assert sorted(tp.local) == [f"persistent://t/pol/{t}" for t in ("a", "b", "d", "p")]
        assert sorted(tp.global_) == ["persistent://t/pol/b"]
        assert tp.local["persistent://t/pol/d"].policies["retentionPolicies"]["retentionTimeInMinutes"] == -1
        (a,) = tp.of("persistent://t/pol/a")
        horizon = dd.topic(ML + "__change_events").compaction_horizon
        assert horizon is not None and a.position == f"{horizon.ledger_id}:0"  # in the compacted part
        assert [e.topic for e in tp.of("persistent://t/pol/p-partition-0")] == ["persistent://t/pol/p"]


def test_whatif_gives_topic_policies_precedence_and_names_them(tmp_path, capsys):
    build_with_topic_policies(tmp_path / "d")
    with open_data_dir(tmp_path / "d") as dd:
        out = simulate(dd, WhatIf(gc=GC, horizon_hours=2, config_files=()))
    topics = out["topics"]

    def pol(t):
        p = topics[ML + t]
        return p["retention_time_minutes"], p["retention_size_mb"], p["ttl_seconds"]

    ns = "namespace policy /admin/policies/t/pol"
    assert pol("a") == (-1, -1, 120) and topics[ML + "a"]["ttl_source"] == ns
    assert topics[ML + "a"]["retention_source"].startswith(
        "topic policy of persistent://t/pol/a (t/pol/__change_events at "
    )
    # b: its global retention (the local policy sets only a TTL), its local TTL
    assert pol("b") == (10080, -1, 3600)
    assert topics[ML + "b"]["retention_source"].startswith("global topic policy of persistent://t/pol/b")
    assert topics[ML + "b"]["ttl_source"].startswith("topic policy of persistent://t/pol/b")
    # c deleted by a null value, e by a DELETE action: the namespace's again; d: the first insert stays
    assert pol("c") == pol("e") == (60, 5, 120) and topics[ML + "c"]["retention_source"] == ns
    assert pol("d") == (-1, -1, 120)
    assert pol("p-partition-0") == (-1, -1, 120)  # a partitioned topic's policy governs its partitions
    b = out["settings"]["topic_policies"]["persistent://t/pol/b"]
    assert b["local"]["message_ttl_in_seconds"] == 3600 and b["local"]["retention_policies"] is None
    assert b["global"]["retention_policies"] == {"retentionSizeInMB": -1, "retentionTimeInMinutes": 10080}
    # a: kept forever, whatever it consumed; topics under the namespace's 60 minutes lose consumed ledgers
    deleted = {r["topic"].rsplit("/", 1)[1] for r in out["timeline"] if r["event"] == "ledger_deleted"}
    assert "a" not in deleted and "d" not in deleted and {"c", "e"} <= deleted
    # flags still override everything
    with open_data_dir(tmp_path / "d") as dd:
        out = simulate(dd, WhatIf(retention_time_minutes=0, retention_size_mb=0, gc=GC, horizon_hours=1))
    assert out["topics"][ML + "a"]["retention_source"] == "flag"

    from pulsarkit.cli import main

    assert main(["whatif", str(tmp_path / "d"), "--horizon-hours", "1", "--no-conf"]) == 0
    text = capsys.readouterr().out
    assert f"topic {ML}a: retention -1 min / -1 MB (topic policy of persistent://t/pol/a" in text
    assert "note:" not in text
    page = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "d"), "-o", str(page), "--no-conf"]) == 0
    assert "global topic policy of persistent://t/pol/b" in page.read_text()


def test_events_that_cannot_be_read_are_a_note_not_a_guess(tmp_path):
    build_with_topic_policies(tmp_path / "d")
    with pk.Store.open(tmp_path / "d") as store:  # the registered schema gone: the values cannot be decoded
        store.metadata.delete("/schemas/t/pol/__change_events")
    with open_data_dir(tmp_path / "d") as dd:
        out = simulate(dd, WhatIf(gc=GC, horizon_hours=1, config_files=()))
        (issue,) = [i for i in dd.issues if i.kind == "topic_policies"]
    (note,) = [n for n in out["settings"]["notes"] if "__change_events" in n]
    assert note.startswith("topic policies of namespace t/pol not read (no schema registered")
    assert issue.path == "persistent://t/pol/__change_events" and "no schema registered" in issue.message
    assert out["topics"][ML + "a"]["retention_source"] == "namespace policy /admin/policies/t/pol"
    from pulsarkit.cli import main

    assert main(["whatif", str(tmp_path / "d"), "--no-conf", "--horizon-hours", "1"]) == 0
    assert main(["whatif", str(tmp_path / "d"), "--no-conf", "--horizon-hours", "1", "--strict"]) == 3


def test_an_unreadable_event_is_damage_not_a_guess(tmp_path):
    """An event whose entry is gone from the bookie (its ledger's data deleted) is reported, not skipped."""
    build_with_topic_policies(tmp_path / "d")
    with open_data_dir(tmp_path / "d") as dd:
        tail = dd.ml_ledgers(ML + "__change_events")[-1]
    bk = pk.bookkeeper.DbLedgerStorage(tmp_path / "d" / "bookie")
    bk.delete_ledger(tail)
    bk.close()
    with open_data_dir(tmp_path / "d") as dd:
        tp = read_topic_policies(dd)
        assert tp.local == {} and tp.global_ == {}  # nothing half-replayed
        assert any(i.kind == "topic_policies" for i in dd.issues)


CACHE = Path(os.environ.get("PULSARKIT_TEST_CACHE") or Path.home() / ".cache" / "pulsarkit-tests") / "datadir-oracle"


@pytest.mark.interop
def test_fixture_is_what_pulsar_writes_and_a_standalone_registers(tmp_path):
    """EncodeEvents.java against Pulsar 4.0.7's jars gives events.json byte for byte; the schema a real
    standalone registered for its __change_events topics (the datadir oracle's data) is the same."""
    lib = CACHE / "lib-4.0.7"
    if not lib.is_dir() or shutil.which("javac") is None:
        pytest.skip("needs javac and the datadir oracle's cached Pulsar 4.0.7 jars")
    cp = f"{lib}/*"
    subprocess.run(["javac", "-d", str(tmp_path), "-cp", cp, str(HERE / "EncodeEvents.java")], check=True)
    got = subprocess.run(
        ["java", "-cp", f"{tmp_path}:{cp}", "EncodeEvents"], check=True, capture_output=True, text=True
    ).stdout
    assert json.loads(got) == FIXTURE
    stores = sorted(CACHE.glob("*/clean/data"))
    if not stores:
        pytest.skip("the datadir oracle has not run yet")
    # one directory per release the oracle ran (4.0.7, and 3.0.7 whose PulsarEvent has other fields):
    # each registers an Avro PulsarEvent schema for both namespaces; 4.0.7's is the fixture's
    matches = []
    for store in stores:
        with open_data_dir(store) as dd:
            got = []
            for ns in ("public/default", "pulsar/system"):
                (stored,) = schema_history(dd, [f"persistent://{ns}/__change_events"])
                assert stored.type == "AVRO" and stored.hash_matches
                got.append(Schema(stored.definition).root == Schema(json.dumps(FIXTURE["schema"])).root)
            matches.append(all(got))
    assert any(matches), "no cached standalone (4.0.7) registered the fixture's PulsarEvent schema"
