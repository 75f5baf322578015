"""Filters on publish_time and broker_timestamp prune entries exactly (issue 14).

The plan decodes the metadata of every selected entry (heads read at their locations, or one native
pass over the entry logs) and leaves out the entries none of whose rows can pass; the rows must be
those of the unpruned read, filtered. Checked on a directory written on a test clock (six hours of
broker time, a producer whose clock is five hours behind, batches, chunked messages across ledgers,
one whose chunks carry different publish times, transactions with markers, an open transaction, an
encrypted message, a topic without broker entry metadata), on the real standalone's directories, and
over random windows. Then the bytes: a narrow window reads a small part of a full read.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pulsarkit as pk
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import Clock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulsarkit.scan import PRUNED, ReadStats, plan, read_all, read_partition
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.scan.heads import read_heads

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop" / "standalone"))
from test_datadir_oracle import oracle  # noqa: E402,F401  (the module-scoped fixture)

NS = "persistent://public/default/"
T0 = 1_700_000_000_000
MIN = 60_000
HOUR = 60 * MIN
SKEW = -5 * HOUR  # producer "late"'s clock


def _noise(seed: int, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


def _md(producer: str, seq: int, publish: int, **kw):
    return pk.message_metadata(producer, seq, publish, **kw)


@pytest.fixture(scope="module")
def timed_dir(tmp_path_factory):
    """Six hours of traffic on a test clock; returns (root, facts)."""
    root = tmp_path_factory.mktemp("timed") / "data"
    clock = Clock(T0)
    store = pk.Store.open(root, sync=False, clock=clock)

    def cfg(bem: bool = True) -> pk.ManagedLedgerConfig:
        icp = pk.broker.managed_ledger_interceptor(
            (pk.broker.INDEX_INTERCEPTOR, pk.broker.TIMESTAMP_INTERCEPTOR), clock
        )
        return pk.ManagedLedgerConfig(
            managed_ledger_interceptor=icp if bem else None, max_entries_per_ledger=5, minimum_rollover_time_ms=0
        )

    events = store.managed_ledger("public/default/persistent/events", cfg())
    plain = store.managed_ledger("public/default/persistent/plain", cfg(bem=False))
    pending = store.managed_ledger("public/default/persistent/pending", cfg())
    seq = {"on-time": 0, "late": 0, "plain": 0}

    def tick(ms: int = 6 * MIN) -> None:
        clock.t += ms

    facts: dict = {}
    for i in range(60):
        tick()
        prod = "late" if i % 3 == 1 else "on-time"
        publish = clock.t + (SKEW if prod == "late" else 0)
        if i % 4 == 0:
            items = [
                {"payload": b"m%d-%d" % (i, j) + _noise(i * 10 + j, 600), "key": f"k{j}"} for j in range(1 + i % 5)
            ]
            data = pk.encode_batch(_md(prod, seq[prod], publish), items, compression="LZ4")
            events.add_entry(data, num_messages=len(items))
            seq[prod] += len(items)
        else:
            events.add_entry(pk.encode_entry(_md(prod, seq[prod], publish), b"e%d" % i + _noise(i, 1500)))
            seq[prod] += 1
        plain.add_entry(pk.encode_entry(_md("plain", seq["plain"], clock.t), b"p%d" % i))
        seq["plain"] += 1
        if i in (17, 41):  # a chunked message of 3 chunks, one per 20 minutes: across a ledger rollover
            whole = (b"chunk-%d-" % i) * 60
            parts = [whole[:150], whole[150:300], whole[300:]]
            java = i == 17  # a Java producer gives every chunk the same publish time; another may not
            t_pub = clock.t
            for cid, part in enumerate(parts):
                tick(20 * MIN)
                if cid:  # another producer's entry between chunks
                    late = _md("late", seq["late"], clock.t + SKEW)
                    events.add_entry(pk.encode_batch(late, [b"between%d" % cid], compression="NONE"), num_messages=1)
                    seq["late"] += 1
                md = _md(
                    "on-time",
                    seq["on-time"],
                    t_pub if java else clock.t,
                    uuid=f"on-time-{seq['on-time']}",
                    chunk_id=cid,
                    num_chunks_from_msg=3,
                    total_chunk_msg_size=len(whole),
                    uncompressed_size=len(whole),
                )
                pos = events.add_entry(pk.encode_entry(md, part))
                facts.setdefault("chunk_ledgers", {}).setdefault(i, set()).add(pos.ledger_id)
            facts.setdefault("chunks", []).append(whole)
            seq["on-time"] += 1
        if i == 25:  # an encrypted message
            md = _md("on-time", seq["on-time"], clock.t)
            ek = md.encryption_keys.add()
            ek.key, ek.value = "rsa", b"\x01"
            md.encryption_algo = "RSA"
            events.add_entry(pk.encode_entry(md, b"cipher"))
            seq["on-time"] += 1
        if i in (30, 31):  # transaction 1 (committed) and 2 (aborted): messages, then their markers
            txn = i - 29
            events.add_entry(
                pk.encode_entry(
                    _md("on-time", seq["on-time"], clock.t, txnid_most_bits=0, txnid_least_bits=txn), b"t%d" % txn
                )
            )
            seq["on-time"] += 1
        if i == 36:
            for txn, marker in ((1, 21), (2, 22)):
                events.add_entry(
                    pk.encode_entry(
                        _md(
                            "on-time",
                            seq["on-time"],
                            clock.t,
                            txnid_most_bits=0,
                            txnid_least_bits=txn,
                            marker_type=marker,
                        ),
                        b"",
                    )
                )
                seq["on-time"] += 1
        # an open transaction in "pending" after 3 hours: read-committed stops that topic there
        data = _md("p", i, clock.t, txnid_most_bits=0, txnid_least_bits=9) if i == 30 else _md("p", i, clock.t)
        pending.add_entry(pk.encode_entry(data, b"q%d" % i))
    for ml in (events, plain, pending):
        ml.flush()
    store.close()
    for p in root.rglob("LOCK"):
        p.unlink()
    return root, facts


def _key(t: pa.Table) -> list[tuple]:
    cols = ("topic", "ledger_id", "entry_id", "batch_index", "payload", "publish_time", "broker_timestamp", "txn_state")
    return sorted(zip(*(t.column(c).to_pylist() for c in cols), strict=True), key=lambda r: r[:4])


def _filtered(full: pa.Table, filters) -> pa.Table:
    m = None
    for c, op, ref in filters:
        col = full.column(c)
        if op == "in":
            x = pc.is_in(col, value_set=pa.array(sorted(ref), pa.int64()))
        else:
            fn = {"=": pc.equal, ">": pc.greater, ">=": pc.greater_equal, "<": pc.less, "<=": pc.less_equal}[op]
            x = fn(col, pa.scalar(ref, pa.int64()))
        x = pc.fill_null(x, False)
        m = x if m is None else pc.and_(m, x)
    return full.filter(m)


def _check(root, filters, *, txn="committed", markers=False, passes=("heads", "scan"), size=64 << 20):
    full = read_all(str(root), txn=txn, markers=markers)
    want = _key(_filtered(full, filters))
    for mode in passes:
        got = read_all(
            str(root), txn=txn, markers=markers, filters=filters, metadata_pass=mode, max_partition_bytes=size
        )
        assert _key(got) == want, (mode, filters)
    return want


def test_closed_time_is_the_managed_ledgers_close_time(timed_dir):
    root, _ = timed_dir
    with open_data_dir(root) as dd:
        for ml in dd.managed_ledger_names():
            ids = dd.ml_ledgers(ml)
            for lid in ids[:-1]:
                led = dd.ledgers[lid]
                assert led.closed_time is not None and led.ctime is not None and led.ctime <= led.closed_time
            assert dd.ledgers[ids[-1]].closed_time is None  # the open last ledger
            assert len(ids) > 3


@pytest.mark.parametrize("txn", ["committed", "all"])
def test_time_windows_give_the_filtered_rows(timed_dir, txn):
    root, facts = timed_dir
    windows = [
        [("publish_time", ">=", T0 + HOUR), ("publish_time", "<", T0 + 2 * HOUR)],  # on-time's hour 2 and late's 7
        [("publish_time", "<", T0)],  # only the late producer's first hours
        [("broker_timestamp", ">=", T0 + 2 * HOUR), ("broker_timestamp", "<=", T0 + 3 * HOUR)],
        [("broker_timestamp", ">", T0 + 5 * HOUR)],
        [("broker_timestamp", "=", T0 + 6 * MIN)],
        [("publish_time", "in", frozenset({T0 + 6 * MIN, T0 + 18 * MIN + SKEW}))],
        [("publish_time", ">=", T0 + HOUR), ("broker_timestamp", "<", T0 + 4 * HOUR)],
        [("publish_time", ">", T0 + 100 * HOUR)],  # nothing
    ]
    seen = set()
    for w in windows:
        rows = _check(root, w, txn=txn)
        seen |= {r[4] for r in rows}
        _check(root, w, txn=txn, passes=("heads",), size=1)  # one entry per partition
    # the windows do select chunked messages (whole) and batch messages
    assert set(facts["chunks"]) <= seen and any(p and p.startswith(b"m") for p in seen)


def test_markers_and_topics_without_broker_metadata(timed_dir):
    root, _ = timed_dir
    rows = _check(root, [("broker_timestamp", ">=", T0 + 3 * HOUR)], txn="all", markers=True)
    assert rows and all(r[0] != NS + "plain" for r in rows)  # no broker timestamp: no row passes
    assert _check(root, [("publish_time", ">=", T0 + 3 * HOUR)], txn="all", markers=True)


def test_a_chunk_decides_with_its_message(timed_dir):
    """The message's row carries its last chunk's times: a window holding only that chunk's broker
    time still gets the whole message, whose first chunks are in earlier ledgers."""
    root, facts = timed_dir
    assert all(len(lids) >= 2 for lids in facts["chunk_ledgers"].values())
    full = read_all(str(root))
    (row,) = [r for r in full.to_pylist() if r["payload"] == facts["chunks"][1]]
    w = [("broker_timestamp", "=", row["broker_timestamp"])]
    assert [r[4] for r in _check(root, w)].count(row["payload"]) == 1
    w = [("publish_time", "=", row["publish_time"])]  # this producer's chunks differ in publish time
    assert [r[4] for r in _check(root, w)] == [row["payload"]]
    p = plan([str(root)], filters=w, metadata_pass="heads")
    read = [s for part in p.partitions for s in part.segments]
    assert len({s.ledger_id for s in read}) >= 2  # the chunks' ledgers, and nothing pruned out of them


def test_an_open_transaction_still_stops_the_topic(timed_dir):
    root, _ = timed_dir
    (open_txn,) = [r for r in read_all(str(root), txn="all").to_pylist() if r["txn_least_bits"] == 9]
    w = [("broker_timestamp", ">=", open_txn["broker_timestamp"] - HOUR)]
    pending = [r for r in _check(root, w) if r[0] == NS + "pending"]
    stop = (open_txn["ledger_id"], open_txn["entry_id"])
    assert pending and all(r[1:3] < stop for r in pending)  # read-committed stops at the open transaction
    assert [r for r in _check(root, w, txn="all") if r[0] == NS + "pending" and r[1:3] > stop]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    col=st.sampled_from(["publish_time", "broker_timestamp"]),
    a=st.integers(-6 * 60, 7 * 60),
    length=st.integers(0, 3 * 60),
    lo_op=st.sampled_from([">", ">="]),
    hi_op=st.sampled_from(["<", "<="]),
    mode=st.sampled_from(["heads", "scan"]),
    size=st.sampled_from([1, 2000, 64 << 20]),
)
def test_random_windows(timed_dir, col, a, length, lo_op, hi_op, mode, size):
    root, _ = timed_dir
    lo = T0 + a * MIN
    _check(root, [(col, lo_op, lo), (col, hi_op, lo + length * MIN)], passes=(mode,), size=size)


def test_a_narrow_window_reads_a_small_part(timed_dir):
    root, _ = timed_dir
    topic = [("topic", "=", NS + "events")]
    w = topic + [("publish_time", ">=", T0 + 2 * HOUR), ("publish_time", "<", T0 + 2 * HOUR + 20 * MIN)]

    def read(filters, mode):
        p = plan([str(root)], filters=filters, metadata_pass=mode)
        tasks = ReadStats()
        n = sum(b.num_rows for t in p.tasks() for b in read_partition(t, filters=filters, stats=tasks))
        return p.read_stats, tasks, n

    full_plan, full_tasks, n_all = read(topic, "scan")
    assert full_tasks.entry_reads > 60 and full_plan.scan_bytes > 0 and full_plan.head_bytes == 0
    heads_plan, tasks, n = read(w, "heads")
    assert 0 < n < n_all
    assert heads_plan.scan_bytes == 0 and heads_plan.head_reads > 60  # every entry's head, once
    assert tasks.entry_reads <= 6 and tasks.entry_bytes * 5 < full_tasks.entry_bytes
    assert heads_plan.total_bytes + tasks.total_bytes < (full_plan.total_bytes + full_tasks.total_bytes) / 4
    # a head is the metadata, not the payload: well under 300 bytes here
    assert heads_plan.head_bytes / heads_plan.head_reads < 300


def test_heads_are_the_entries_metadata(timed_dir):
    root, _ = timed_dir
    from pulsarkit.bookkeeper.entrylog import EntryLogReader

    with open_data_dir(root) as dd:
        locs = [(c, lid, eid, loc) for c, lid, eid, loc in dd.entry_locations() if dd.ledgers[lid].kind == "topic"]
        current = locs[0][0]
        wants = [(lid, eid, loc, 4) for c, lid, eid, loc in locs if c == current]
        wants.append((wants[0][0], wants[0][1] + 1, wants[0][2], 4))  # the wrong entry at a location
        stats = ReadStats()
        heads = read_heads(EntryLogReader(current), wants, stats)
        assert heads[-1] is None and stats.head_reads == len(wants)
        shorter = 0
        for (lid, eid, _, _), h in zip(wants[:-1], heads[:-1], strict=True):
            data = dd.read_entry(lid, eid)
            assert h is not None and data.startswith(h)  # a marker has no payload: its head is all of it
            shorter += len(h) < len(data)
            assert pk.Entry.parse(data).metadata == pk.Entry.parse(h, verify_checksum=False).metadata
        assert shorter > len(wants) / 2


def test_pruned_entries_are_marked_in_the_plan(timed_dir):
    root, _ = timed_dir
    w = [("broker_timestamp", ">=", T0 + 2 * HOUR), ("broker_timestamp", "<", T0 + 2 * HOUR + 13 * MIN)]
    p = plan([str(root)], filters=w, metadata_pass="scan")
    import array

    marks = []
    for part in p.partitions:
        for s in part.segments:
            a = array.array("q")
            a.frombytes(s.locations)
            marks += list(a)
    assert p.read_stats.pruned_entries > 100 and marks and (marks.count(PRUNED) < len(marks))


@pytest.mark.interop
@pytest.mark.parametrize("kind", ["clean", "killed"])
def test_real_standalone_windows(oracle, kind):  # noqa: F811
    data = oracle / kind / "data"
    full = read_all(str(data), txn="all")
    for col in ("publish_time", "broker_timestamp"):
        vals = sorted(v for v in set(full.column(col).to_pylist()) if v is not None)
        for i in range(0, len(vals) - 1, max(len(vals) // 7, 1)):
            lo, hi = vals[i], vals[min(i + len(vals) // 5, len(vals) - 1)]
            for txn in ("committed", "all"):
                rows = _check(data, [(col, ">=", lo), (col, "<", hi)], txn=txn)
                assert txn == "committed" or rows
