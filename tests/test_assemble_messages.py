"""The per-batch message assembly (``MessageState.messages``: one native call for the plain entries,
``rust/src/bulk/assemble.rs``) against a plain Python reference built on the single-entry decoder
(``Entry.parse(...).messages()``), on generated batches: single and batched entries, compressed,
null values, event times, keys, properties, schema versions, broker entry metadata, transactions in
every state, markers, garbage and checksum-broken entries, read-committed or not, time filters."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulsarkit import _native
from pulsarkit.codec.entry import Entry, add_broker_entry_metadata, encode_batch, encode_entry, message_metadata
from pulsarkit.errors import PulsarkitError
from pulsarkit.scan.messages import MessageState, signed
from pulsarkit.scan.partition import ScanPartition
from pulsarkit.scan.schema import MASK, TIME_COLUMNS, arrow_schema, message_fields, passes

TXNS = [(1, 1), (1, 2), (2, 7), (MASK, 5), (3, 3)]  # committed, aborted, coordinator's, unknown...
MARKERS = {(1, 1): "TXN_COMMIT", (1, 2): "TXN_ABORT"}
COORDINATOR = {(2, 7): "OPEN", (MASK, 5): "COMMITTED"}

messages_st = st.lists(
    st.fixed_dictionaries(
        {
            "payload": st.binary(max_size=40),
            "key": st.none() | st.text(max_size=5),
            "properties": st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
            "event_time": st.sampled_from([0, 0, 5, 1 << 40]),
            "null_value": st.booleans(),
        }
    ),
    min_size=1,
    max_size=4,
)

entry_st = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["single", "batch", "batch", "marker", "garbage", "badsum", "none"]),
        "messages": messages_st,
        "compression": st.sampled_from([None, "LZ4", "ZSTD"]),
        "publish_time": st.sampled_from([100, 200, 300]),
        "broker": st.none() | st.tuples(st.sampled_from([150, 250]), st.integers(0, 1000)),
        "txn": st.none() | st.sampled_from(TXNS),
        "schema_version": st.none() | st.binary(min_size=1, max_size=8),
        "sequence_id": st.sampled_from([0, 7, (1 << 63) + 3]),
    }
)


def build(e: dict[str, Any]) -> bytes | None:
    if e["kind"] == "none":
        return None
    if e["kind"] == "garbage":
        return b"\x0e\x01garbage"
    fields: dict[str, Any] = {}
    if e["txn"] is not None:
        fields["txnid_most_bits"], fields["txnid_least_bits"] = e["txn"]
    if e["schema_version"] is not None:
        fields["schema_version"] = e["schema_version"]
    if e["kind"] == "marker":
        fields["marker_type"] = 21
    m0 = e["messages"][0]
    if e["kind"] in ("single", "marker", "badsum"):
        if m0["key"] is not None:
            fields["partition_key"] = m0["key"]
        if m0["event_time"]:
            fields["event_time"] = m0["event_time"]
        if m0["null_value"]:
            fields["null_value"] = True
        md = message_metadata("p", e["sequence_id"], e["publish_time"], properties=m0["properties"], **fields)
        data = encode_entry(md, m0["payload"], compression=e["compression"])
        if e["kind"] == "badsum":  # the client checksum no longer matches: explode refuses it
            data = data[:2] + bytes([data[2] ^ 1]) + data[3:]  # [0x0e01][crc32c]...
    else:
        n = len(e["messages"])
        md = message_metadata("p", e["sequence_id"], e["publish_time"], num_messages_in_batch=n, **fields)
        data = encode_batch(md, e["messages"], compression=e["compression"] or "NONE")
    if e["broker"] is not None:
        data = add_broker_entry_metadata(data, *e["broker"])
    return data


def reference(part: ScanPartition, state: MessageState, datas: list[bytes | None], lids, eids, filters, markers):
    """The rows the read gives, from the single-entry decoder, one entry and message at a time."""
    rows, bad = [], []
    pt = [f for f in filters if f[0] in TIME_COLUMNS]
    for i, data in enumerate(datas):
        if data is None:
            continue
        try:
            e = Entry.parse(data, verify_checksum=False)
        except PulsarkitError:
            bad.append(i)
            continue
        if e.is_marker:
            if markers:
                rows.append(("marker", i))
            continue
        tkey = e.txn_id
        txn_state = state.state((tkey[0] & MASK, tkey[1] & MASK)) if tkey is not None else None
        if state.committed and txn_state not in (None, "COMMITTED"):
            continue
        bem = e.broker_entry_metadata
        times = {"publish_time": e.metadata.publish_time, "broker_timestamp": bem.broker_timestamp if bem else None}
        if not all(passes(pt, c, times[c]) for c in TIME_COLUMNS):
            continue
        try:
            Entry.parse(data, verify_checksum=True)
            msgs = e.messages()
        except PulsarkitError:
            bad.append(i)
            continue
        md = e.metadata
        for m in msgs:
            r = {
                "topic": part.topic,
                "partition": part.partition,
                "ledger_id": lids[i],
                "entry_id": eids[i],
                "batch_index": m.batch_index,
                "key": m.key,
                "properties": list(m.properties.items()),
                "payload": None if m.null_value else m.payload,
                "publish_time": md.publish_time,
                "event_time": m.event_time or None,
                "sequence_id": signed(m.sequence_id),
                "producer_name": md.producer_name,
                "null_value": m.null_value,
                "encrypted": False,
                "broker_timestamp": m.broker_timestamp,
                "broker_index": m.index,
                "txn_most_bits": signed(tkey[0]) if tkey else None,
                "txn_least_bits": signed(tkey[1]) if tkey else None,
                "txn_state": txn_state,
                "schema_version": md.schema_version if md.HasField("schema_version") else None,
            }
            if markers:
                r["marker"] = None
            rows.append(r)
    return rows, bad


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entries=st.lists(entry_st, max_size=8),
    txn=st.sampled_from(["committed", "uncommitted"]),
    markers=st.booleans(),
    filters=st.sampled_from(
        [[], [("publish_time", ">=", 200)], [("broker_timestamp", "in", [150])], [("publish_time", "=", 100)]]
    ),
)
def test_assembly_matches_the_single_entry_reference(entries, txn, markers, filters):
    part = ScanPartition(
        data_dir="d", topic="persistent://t/n/x", kind="topic", partition=3, segments=[],
        markers=dict(MARKERS), coordinator=dict(COORDINATOR),
    )  # fmt: skip
    state = MessageState(part, txn, markers)
    datas = [build(e) for e in entries]
    lids = [7] * len(datas)
    eids = list(range(10, 10 + len(datas)))
    errs = [None if d is not None else "unreadable" for d in datas]
    t = state.messages(lids, eids, datas, filters, errs)
    assert t.schema == arrow_schema(message_fields(markers))
    want, bad = reference(part, state, datas, lids, eids, filters, markers)
    got = t.to_pylist()
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if w == ("marker", g["entry_id"] - 10):
            assert g["marker"] == "TXN_COMMIT"
        else:
            assert g == w
    reported = sorted(eids.index(int(b.split(" ")[3].rstrip(":"))) for b in state.bad if b.startswith("ledger"))
    unread = [i for i, d in enumerate(datas) if d is None]
    assert reported == sorted(bad + unread)


def test_the_native_call_checks_its_inputs():
    part = ScanPartition(data_dir="d", topic="t", kind="topic", partition=0, segments=[])
    table = MessageState(part, "committed", False).txn_table
    entries = pa.array([b"x"], pa.binary())
    ids = pa.array([1], pa.int64())
    with pytest.raises(PulsarkitError, match="differ in length"):
        _native.bulk_assemble_messages(entries, pa.array([1, 2], pa.int64()), ids, "t", 0, False, table, True, [])
    with pytest.raises(PulsarkitError, match="operator"):
        _native.bulk_assemble_messages(entries, ids, ids, "t", 0, False, table, True, [("publish_time", "~", [1])])
    unsorted = (pa.array([2, 1], pa.int64()), pa.array([0, 0], pa.int64()), pa.array(["A", "B"]), "UNKNOWN")
    with pytest.raises(PulsarkitError, match="not sorted"):
        _native.bulk_assemble_messages(entries, ids, ids, "t", 0, False, unsorted, True, [])


def _read_entries(datas: list[bytes]) -> tuple[pa.Table, list[Any]]:
    part = ScanPartition(data_dir="d", topic="persistent://t/n/x", kind="topic", partition=-1, segments=[])
    issues: list[Any] = []
    state = MessageState(part, "committed", False, on_issue=issues.append)
    n = len(datas)
    t = state.messages([7] * n, list(range(n)), datas, [], [None] * n)
    state.finish()
    return t, issues


@pytest.mark.parametrize("encrypted", [False, True])
def test_chunks_become_one_message_encrypted_or_not(encrypted):
    """ConsumerImpl joins the chunks of a message it cannot decrypt too (CONSUME): one message at the last
    chunk's id, not one per chunk; its payload stays unread (None, ``encrypted``) as for any encrypted entry."""
    datas = []
    for cid in range(3):
        md = message_metadata("p", 5, 1000, uuid="p-5", chunk_id=cid, num_chunks_from_msg=3, total_chunk_msg_size=9)
        if encrypted:
            k = md.encryption_keys.add()
            k.key, k.value = "k1", b"v"
        datas.append(encode_entry(md, b"abc"))
    t, issues = _read_entries(datas)
    assert issues == []
    rows = t.select(["entry_id", "batch_index", "payload", "encrypted"]).to_pylist()
    payload = None if encrypted else b"abcabcabc"
    assert rows == [{"entry_id": 2, "batch_index": -1, "payload": payload, "encrypted": encrypted}]


def test_a_batched_message_without_its_own_event_time_keeps_the_entrys():
    """MessageImpl.create copies the entry's metadata and overrides the event time only when the message
    has one (its key, by contrast, is cleared): every read path gives the same."""
    md = message_metadata("p", 1, 1000, event_time=5, partition_key="K")
    data = encode_batch(md, [{"payload": b"a"}, {"payload": b"b", "event_time": 9}])
    want = [(None, 5), (None, 9)]
    assert [(m.key, m.event_time) for m in Entry.parse(data).messages()] == want
    t, _ = _read_entries([data])
    assert list(zip(t.column("key").to_pylist(), t.column("event_time").to_pylist(), strict=True)) == want
    exploded = pa.record_batch(_native.bulk_explode_messages(pa.array([data], pa.binary())))
    assert exploded.column("event_time").to_pylist() == [5, 9]


@pytest.mark.parametrize("threads", [2, 3])
def test_decompressing_on_threads_reads_the_same_rows_and_verdicts(threads):
    """A batch of ZSTD and ZLIB entries (past the 256 KiB from which the wheel decompresses ahead on more threads;
    rust/src/bulk/assemble.rs) read on one thread and on several: the same rows, the same per-entry verdicts, a
    corrupt payload reported the same; LZ4 entries among them are decompressed as they are exploded."""
    import os

    rng = __import__("random").Random(5)
    datas: list[bytes | None] = []
    for i in range(48):
        md = message_metadata("p", i, 1000 + i)
        msgs = [{"payload": rng.randbytes(3000), "event_time": i} for _ in range(4)]
        datas.append(encode_batch(md, msgs, compression=("ZSTD", "ZLIB", "LZ4")[i % 3]))
    broken = bytearray(datas[7])  # its ZSTD frame damaged at the end (no client checksum to catch it first)
    broken[-40:] = os.urandom(40)
    datas[7] = bytes(broken)
    datas[11] = None
    part = ScanPartition(data_dir="d", topic="persistent://t/n/x", kind="topic", partition=0, segments=[])
    state = MessageState(part, "committed", False)
    entries = pa.array(datas, pa.binary())
    assert sum(len(d) for d in datas if d) > 256 << 10
    ids = pa.array(range(len(datas)), pa.int64())
    args = (entries, ids, ids, part.topic, 0, False, state.txn_table, True, [])
    one = _native.bulk_assemble_messages(*args, threads=1)
    many = _native.bulk_assemble_messages(*args, threads=threads)
    assert pa.record_batch(many[0]).equals(pa.record_batch(one[0]))
    assert pa.record_batch(many[1]).equals(pa.record_batch(one[1]))
    status = pa.record_batch(one[1]).column("status").to_pylist()
    assert status[11] == 4 and status.count(0) == 46 and pa.record_batch(one[0]).num_rows == 46 * 4
    assert status[7] == 3  # undecodable, whichever thread met it
