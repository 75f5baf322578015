"""Interop with Pulsar 4.0.7's own transaction-log code (Java): PIP-160 entries of the coordinator log and the
pending-ack stores, byte for byte, in both directions.

One JVM (``tests/java/txn-oracle``, see ``tests/oracle.py``) serves the module. It runs Pulsar's
``TxnLogBufferedWriter`` with the real ``MLTransactionLogImpl`` / ``MLPendingAckStore`` serializers (their
managed ledger only records the entry it is handed), and reads with ``MLTransactionLogImpl.deserializeEntry``
and ``MLPendingAckStore.deserializeEntry``; the records are Pulsar's LightProto classes
(``TransactionMetadataEntry``, ``BatchedTransactionMetadataEntry``, ``PendingAckMetadataEntry``,
``BatchedPendingAckMetadataEntry``, ``PendingAckMetadata``). The JVM runs with the jars Maven resolves for
``pulsar-broker:4.0.7`` (the release of the standalone data-directory oracle), straight from the local repository.

For seeded, varied records (every op and status, many partitions and subscriptions, uint64 ids up to 2**64-1,
ack sets with negative words, batches of 1 to 200) each test checks that

* Java reads pulsarkit's batched and single entries as exactly the fields pulsarkit wrote,
* pulsarkit reads Java's entries as exactly Java's fields, and
* the entries are the same bytes (``pack_batched_entry`` of pulsarkit's records == what Pulsar's writer flushes).
"""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path
from typing import Any

import pytest
from oracle import TESTS, JavaError, JavaOracle
from pulsarkit.codec import txn
from pulsarkit.errors import PulsarkitError

pytestmark = pytest.mark.interop

TXN_OPS = ["NEW", "ADD_PARTITION", "ADD_SUBSCRIPTION", "UPDATE"]
STATUSES = ["OPEN", "COMMITTING", "COMMITTED", "ABORTING", "ABORTED"]
ACK_OPS = ["ACK", "COMMIT", "ABORT"]
ACK_TYPES = ["Individual", "Cumulative"]
U64_EDGES = [0, 1, 127, 128, 16383, 16384, 2**31 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1]
I64_EDGES = [0, 1, -1, -2, 2**63 - 1, -(2**63), 0x5555_5555_5555_5555, -0x5555_5555_5555_5556]
NAMES = [
    "persistent://public/default/t",
    "persistent://tenant/ns/topic-partition-17",
    "non-persistent://a/b/c",
    "persistent://public/default/tópico-☃-𝄞",
    "",
    "sub",
    "x" * 300,
]
#: Fields of pulsarkit's decoded rows that describe the entry, not the record.
ENTRY_KEYS = ("batched", "batch_size", "batch_index", "record_bytes")
CASES = 24
BATCH_SIZES = [1, 1, 2, 3, 5, 8, 13, 40, 200]


@pytest.fixture(scope="module")
def txn_oracle():
    o = JavaOracle(TESTS / "java" / "txn-oracle", "io.pulsarkit.oracle.TxnOracle")
    o.build()
    listing = o.build_dir / "classpath.txt"
    jars = listing.read_text().strip().split(os.pathsep)
    if not all(Path(j).is_file() for j in jars):  # the local repository lost jars since the last build
        (o.build_dir / ".oracle-build-stamp").unlink(missing_ok=True)
        o.build()
        jars = listing.read_text().strip().split(os.pathsep)
    o.classpath = jars
    with o:
        info = o.call("info")
        for cls in ("TransactionMetadataEntry", "MLTransactionLogImpl", "TxnLogBufferedWriter"):
            assert "pulsar-transaction-coordinator-4.0.7.jar" in info[cls], info
        for cls in ("PendingAckMetadataEntry", "MLPendingAckStore"):
            assert "pulsar-broker-4.0.7.jar" in info[cls], info
        yield o


# --- seeded records --------------------------------------------------------------------------------------------


def _u64(rng: random.Random) -> int:
    return rng.choice(U64_EDGES) if rng.random() < 0.4 else rng.getrandbits(rng.choice([7, 14, 32, 63, 64]))


def _i64(rng: random.Random) -> int:
    return rng.choice(I64_EDGES) if rng.random() < 0.4 else rng.getrandbits(64) - 2**63


def _name(rng: random.Random) -> str:
    return rng.choice(NAMES) if rng.random() < 0.5 else f"persistent://t{rng.randrange(9)}/ns/topic-{_u64(rng)}"


def _maybe(rng: random.Random, make: Any) -> Any:
    return make() if rng.random() < 0.6 else None


def txn_record(rng: random.Random, i: int) -> dict[str, Any]:
    """A TransactionMetadataEntry as a dict; ``i`` walks through every op and status."""
    return {
        "op": TXN_OPS[i % len(TXN_OPS)],
        "txnid_most_bits": _u64(rng),
        "txnid_least_bits": _u64(rng),
        "expected_status": STATUSES[i % len(STATUSES)] if rng.random() < 0.7 else None,
        "new_status": STATUSES[(i + 2) % len(STATUSES)] if rng.random() < 0.7 else None,
        "partitions": [_name(rng) for _ in range(rng.choice([0, 0, 1, 2, 5]))],
        "subscriptions": [{"topic": _name(rng), "subscription": _name(rng)} for _ in range(rng.choice([0, 0, 1, 3]))],
        "timeout_ms": _maybe(rng, lambda: _u64(rng)),
        "start_time": _maybe(rng, lambda: _u64(rng)),
        "last_modification_time": _maybe(rng, lambda: _u64(rng)),
        "max_local_txn_id": _maybe(rng, lambda: _u64(rng)),
        "owner": _maybe(rng, lambda: _name(rng)),
    }


def ack_record(rng: random.Random, i: int) -> dict[str, Any]:
    """A PendingAckMetadataEntry as a dict; ``i`` walks through every op and ack type."""
    return {
        "op": ACK_OPS[i % len(ACK_OPS)],
        "ack_type": ACK_TYPES[(i // len(ACK_OPS)) % len(ACK_TYPES)],
        "txnid_most_bits": _u64(rng),
        "txnid_least_bits": _u64(rng),
        "positions": [
            {
                "ledger_id": _u64(rng),
                "entry_id": _u64(rng),
                "ack_set": [_i64(rng) for _ in range(rng.choice([0, 1, 2, 16]))],
                "batch_size": _maybe(rng, lambda: rng.choice([0, 1, 100, 2**31 - 1, rng.randrange(2**31)])),
            }
            for _ in range(rng.choice([0, 1, 1, 2, 7]))
        ],
    }


def pk_txn(d: dict[str, Any]) -> bytes:
    """pulsarkit's serialization of a transaction-log record dict."""
    return txn.txn_metadata_record(
        d["op"],
        (d["txnid_most_bits"], d["txnid_least_bits"]),
        expected_status=d["expected_status"],
        new_status=d["new_status"],
        partitions=d["partitions"],
        subscriptions=[(s["topic"], s["subscription"]) for s in d["subscriptions"]],
        timeout_ms=d["timeout_ms"],
        start_time=d["start_time"],
        last_modification_time=d["last_modification_time"],
        max_local_txn_id=d["max_local_txn_id"],
        owner=d["owner"],
    )


def pk_ack(d: dict[str, Any]) -> bytes:
    """pulsarkit's serialization of a pending-ack record dict."""
    return txn.pending_ack_record(
        d["op"],
        (d["txnid_most_bits"], d["txnid_least_bits"]),
        positions=[(p["ledger_id"], p["entry_id"], p["ack_set"], p["batch_size"]) for p in d["positions"]],
        ack_type=d["ack_type"],
    )


def signed64(v: int) -> int:
    return v - 2**64 if v >= 2**63 else v


def as_read(d: dict[str, Any]) -> dict[str, Any]:
    """A pending-ack record dict as both readers report it: position ids as Pulsar's (signed) longs."""
    return {
        **d,
        "positions": [
            {**p, "ledger_id": signed64(p["ledger_id"]), "entry_id": signed64(p["entry_id"])} for p in d["positions"]
        ],
    }


def records_of(rows: list[txn.RecordPlace], drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """pulsarkit's decoded records as dicts (their tuples as the oracle's JSON lists), without the
    per-entry fields."""
    return [
        {k: v for k, v in dataclasses.asdict(r, dict_factory=_plain).items() if k not in ENTRY_KEYS + drop}
        for r in rows
    ]


def _plain(items: list[tuple[str, Any]]) -> dict[str, Any]:
    return {k: _lists(v) for k, v in items}


def _lists(v: Any) -> Any:
    return [_lists(x) for x in v] if isinstance(v, (list, tuple)) else v


def check_entry_columns(rows: list[txn.RecordPlace], batched: bool, data: bytes, records: list[bytes]) -> None:
    assert [(r.batched, r.batch_size, r.batch_index) for r in rows] == [
        (batched, len(records), i) for i in range(len(records))
    ]
    assert [r.record_bytes for r in rows] == [len(b) for b in records]
    assert txn.split_entry(data) == (batched, records)


def _batch(rng: random.Random, make: Any, case: int) -> list[dict[str, Any]]:
    n = BATCH_SIZES[case % len(BATCH_SIZES)]
    return [make(rng, case * 7 + i) for i in range(n)]


# --- the transaction coordinator's log ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", range(CASES))
def test_java_reads_pulsarkit_txn_log_entries(txn_oracle, case):
    recs = _batch(random.Random(f"txn-{case}"), txn_record, case)
    records = [pk_txn(d) for d in recs]
    assert txn_oracle.call("parse_txn_log_entry", data=txn.pack_batched_entry(records)) == recs
    for d, b in zip(recs, records, strict=True):  # one record per entry, batching off
        assert txn_oracle.call("parse_txn_log_entry", data=b) == [d]


@pytest.mark.parametrize("case", range(CASES))
def test_pulsarkit_reads_java_txn_log_entries_and_writes_the_same_bytes(txn_oracle, case):
    recs = _batch(random.Random(f"txn-{case}"), txn_record, case)
    records = [pk_txn(d) for d in recs]
    java = bytes.fromhex(txn_oracle.call("write_txn_log_batch", records=recs))
    assert java[:4] == txn.BATCHED_ENTRY_PREFIX
    rows = txn.decode_txn_log_entry(java)
    assert records_of(rows, ("is_timeout",)) == recs
    assert all(r.is_timeout is None for r in rows)
    check_entry_columns(rows, True, java, records)
    assert java == txn.pack_batched_entry(records)
    for d, b in zip(recs, records, strict=True):
        single = bytes.fromhex(txn_oracle.call("write_txn_log_entry", record=d))
        assert single == b
        rows = txn.decode_txn_log_entry(single)
        assert records_of(rows, ("is_timeout",)) == [d]
        check_entry_columns(rows, False, single, [b])


def test_every_op_and_status_is_covered():
    recs = [r for case in range(CASES) for r in _batch(random.Random(f"txn-{case}"), txn_record, case)]
    assert {r["op"] for r in recs} == set(TXN_OPS)
    assert {r["expected_status"] for r in recs} >= set(STATUSES)
    assert {r["new_status"] for r in recs} >= set(STATUSES)
    assert max(len(r["partitions"]) for r in recs) >= 5 and max(len(r["subscriptions"]) for r in recs) >= 3
    ids = {r[k] for r in recs for k in ("txnid_most_bits", "txnid_least_bits")}
    assert 2**64 - 1 in ids and any(i >= 2**63 for i in ids)
    acks = [r for case in range(CASES) for r in _batch(random.Random(f"ack-{case}"), ack_record, case)]
    assert {(r["op"], r["ack_type"]) for r in acks} == {(o, t) for o in ACK_OPS for t in ACK_TYPES}
    words = [w for r in acks for p in r["positions"] for w in p["ack_set"]]
    assert -1 in words and -(2**63) in words and sum(w < 0 for w in words) > 10


def test_is_timeout_is_not_a_field_of_pulsar_4_0_7(txn_oracle):
    """pulsarkit's schema has ``is_timeout = 13``; Pulsar 4.0.7's TransactionMetadataEntry ends at ``owner = 12``,
    so its parser skips the field (the rest of the record reads the same) and its writer cannot produce it."""
    d = txn_record(random.Random("is-timeout"), 3)
    plain = pk_txn(d)
    flagged = txn.txn_metadata_record(
        d["op"],
        (d["txnid_most_bits"], d["txnid_least_bits"]),
        expected_status=d["expected_status"],
        new_status=d["new_status"],
        partitions=d["partitions"],
        subscriptions=[(s["topic"], s["subscription"]) for s in d["subscriptions"]],
        timeout_ms=d["timeout_ms"],
        start_time=d["start_time"],
        last_modification_time=d["last_modification_time"],
        max_local_txn_id=d["max_local_txn_id"],
        owner=d["owner"],
        is_timeout=True,
    )
    assert flagged == plain + b"\x68\x01"  # field 13, varint 1
    assert txn_oracle.call("parse_txn_log_entry", data=flagged) == [d]
    assert txn_oracle.call("parse_txn_log_entry", data=txn.pack_batched_entry([flagged, plain])) == [d, d]
    assert txn.decode_txn_log_entry(flagged)[0].is_timeout is True
    with pytest.raises(JavaError):
        txn_oracle.call("write_txn_log_entry", record={**d, "is_timeout": True})


# --- the pending-ack stores ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", range(CASES))
def test_java_reads_pulsarkit_pending_ack_entries(txn_oracle, case):
    recs = _batch(random.Random(f"ack-{case}"), ack_record, case)
    records = [pk_ack(d) for d in recs]
    want = [as_read(d) for d in recs]
    assert txn_oracle.call("parse_pending_ack_entry", data=txn.pack_batched_entry(records)) == want
    for d, b in zip(want, records, strict=True):
        assert txn_oracle.call("parse_pending_ack_entry", data=b) == [d]


@pytest.mark.parametrize("case", range(CASES))
def test_pulsarkit_reads_java_pending_ack_entries_and_writes_the_same_bytes(txn_oracle, case):
    recs = _batch(random.Random(f"ack-{case}"), ack_record, case)
    records = [pk_ack(d) for d in recs]
    java = bytes.fromhex(txn_oracle.call("write_pending_ack_batch", records=recs))
    assert java[:4] == txn.BATCHED_ENTRY_PREFIX
    rows = txn.decode_pending_ack_entry(java)
    assert records_of(rows) == [as_read(d) for d in recs]
    check_entry_columns(rows, True, java, records)
    assert java == txn.pack_batched_entry(records)
    for d, b in zip(recs, records, strict=True):
        single = bytes.fromhex(txn_oracle.call("write_pending_ack_entry", record=d))
        assert single == b
        rows = txn.decode_pending_ack_entry(single)
        assert records_of(rows) == [as_read(d)]
        check_entry_columns(rows, False, single, [b])


# --- the 4-byte prefix ---------------------------------------------------------------------------------------


def test_a_batch_prefix_of_another_version(txn_oracle):
    """Pulsar's readers skip the 4 prefix bytes without looking at the version; pulsarkit reports a version
    other than 1 instead of guessing (no Pulsar release writes one)."""
    recs = _batch(random.Random("version"), txn_record, 3)
    records = [pk_txn(d) for d in recs]
    v2 = b"\x0e\x01\x00\x02" + txn.pack_batched_entry(records)[4:]
    assert txn_oracle.call("parse_txn_log_entry", data=v2) == recs
    with pytest.raises(PulsarkitError):
        txn.decode_txn_log_entry(v2)


def test_an_empty_batch(txn_oracle):
    """A batch of no records (Pulsar's writer never flushes one) reads as no records on both sides."""
    empty = txn.pack_batched_entry([])
    assert empty == txn.BATCHED_ENTRY_PREFIX
    assert txn_oracle.call("parse_txn_log_entry", data=empty) == []
    assert txn_oracle.call("parse_pending_ack_entry", data=empty) == []
    assert txn.decode_txn_log_entry(empty) == [] and txn.decode_pending_ack_entry(empty) == []


def test_negative_longs_pulsar_can_store(txn_oracle):
    """Pulsar's positions are longs: entry id -1 is stored as the uint64 2**64-1 (pulsarkit's writer takes it in
    that form) and a negative int32 batch size as a 10-byte varint; both sides write and read the same."""
    d = {
        "op": "ACK",
        "ack_type": "Individual",
        "txnid_most_bits": 2**64 - 1,
        "txnid_least_bits": 0,
        "positions": [{"ledger_id": 3, "entry_id": -1, "ack_set": [-1], "batch_size": -1}],
    }
    java = bytes.fromhex(txn_oracle.call("write_pending_ack_entry", record=d))
    ours = txn.pending_ack_record("ACK", (2**64 - 1, 0), positions=[(3, 2**64 - 1, [-1], -1)])
    assert java == ours
    assert java.endswith(b"\x20" + b"\xff" * 9 + b"\x01")  # batch_size = 4, varint of -1 sign-extended to 64 bits
    assert records_of(txn.decode_pending_ack_entry(java)) == [d]
    assert txn_oracle.call("parse_pending_ack_entry", data=ours) == [d]
