"""A topic's metadata pass left to its read (``metadata_pass="read"``, what ``messages``, the Python API and
SQL plan with; issue 24).

A topic read as one partition from its start, with no time or ledger filter, is planned without its pass
(no entry metadata read): its chunk spans would only keep cuts out of its chunked messages, and its
transactions are found by its read, which plans the topic again with its pass at the first transactional
entry it meets and goes on from there. Every such read gives exactly the rows and issues of the read after a
forced pass: with and without a coordinator's log, committed and all, markers as rows, chunks open across the
first transactional entry, batches of one entry.
"""

from __future__ import annotations

import importlib

import pulsarkit as pk
import pytest
from datadir_fixtures import TC_LOG, _md, batched, txn_record
from pulsarkit.analysis.messages import message_batches
from pulsarkit.scan import read_partition
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.scan.partition import ReadStats

plan_mod = importlib.import_module("pulsarkit.scan.plan")

PLAIN = "public/default/persistent/plain"
CHUNKED = "public/default/persistent/chunked"
PAYMENTS = "public/default/persistent/payments"
MIXED = "public/default/persistent/mixed"
TOPICS = [PLAIN, CHUNKED, PAYMENTS, MIXED]
ONE = {"min_partitions": 1, "max_partition_bytes": 1 << 62}
FIRST = b"a" * 10 + b"b" * 10 + b"c" * 10 + b"d" * 10


def _cfg() -> pk.ManagedLedgerConfig:
    return pk.ManagedLedgerConfig(max_entries_per_ledger=3, minimum_rollover_time_ms=0)


def _chunk(seq: int, cid: int, parts: list[bytes]) -> bytes:
    whole = b"".join(parts)
    md = _md(seq, uuid=f"prod-1-{seq}", chunk_id=cid, num_chunks_from_msg=len(parts),
             total_chunk_msg_size=len(whole), uncompressed_size=len(whole))  # fmt: skip
    return pk.encode_entry(md, parts[cid])


def _write(root, coordinator: bool) -> None:
    """Four topics (3 entries a ledger): plain; chunked messages across ledgers; a committed, an aborted
    and an open transaction with messages behind it; a chunked message open across the first transactional
    entry. With ``coordinator``, a coordinator's log knows the transactions (without one, as a directory
    written without a broker, they have only their markers)."""
    store = pk.Store.open(root, sync=False)
    ml = store.managed_ledger(PLAIN, _cfg())
    for i in range(7):
        ml.add_entry(pk.encode_entry(_md(i), b"p%d" % i))
    ml.flush()
    ml = store.managed_ledger(CHUNKED, _cfg())
    first = [b"a" * 10, b"b" * 10, b"c" * 10, b"d" * 10]
    for cid in range(4):
        ml.add_entry(_chunk(0, cid, first))
    ml.add_entry(pk.encode_entry(_md(1), b"e" * 7))
    for cid in range(2):
        ml.add_entry(_chunk(2, cid, [b"f" * 5, b"g" * 5]))
    ml.flush()
    if coordinator:
        tc = store.managed_ledger(TC_LOG, pk.ManagedLedgerConfig())
        tc.add_entry(batched([txn_record(0, 0, 1), txn_record(0, 0, 2), txn_record(0, 0, 3), txn_record(0, 0, 9)]))
        tc.add_entry(batched([txn_record(3, 0, 1, new_status=2), txn_record(3, 0, 2, new_status=4)]))
        tc.flush()
    ml = store.managed_ledger(PAYMENTS, _cfg())
    ml.add_entry(pk.encode_entry(_md(0), b"plain"))
    ml.add_entry(pk.encode_entry(_md(1, txnid_most_bits=0, txnid_least_bits=1), b"committed"))
    ml.add_entry(pk.encode_entry(_md(2, txnid_most_bits=0, txnid_least_bits=2), b"aborted"))
    ml.add_entry(pk.encode_entry(_md(4, txnid_most_bits=0, txnid_least_bits=1, marker_type=21), b""))
    ml.add_entry(pk.encode_entry(_md(5, txnid_most_bits=0, txnid_least_bits=2, marker_type=22), b""))
    ml.add_entry(pk.encode_entry(_md(3, txnid_most_bits=0, txnid_least_bits=3), b"open"))
    ml.add_entry(pk.encode_entry(_md(6), b"after-open"))
    ml.flush()
    ml = store.managed_ledger(MIXED, _cfg())
    parts = [b"x" * 4, b"y" * 4, b"z" * 4]
    ml.add_entry(pk.encode_entry(_md(0), b"before"))
    ml.add_entry(_chunk(1, 0, parts))
    ml.add_entry(_chunk(1, 1, parts))
    ml.add_entry(pk.encode_entry(_md(2, txnid_most_bits=0, txnid_least_bits=9), b"in-txn"))
    ml.add_entry(_chunk(1, 2, parts))
    ml.add_entry(pk.encode_entry(_md(3, txnid_most_bits=0, txnid_least_bits=9, marker_type=21), b""))
    ml.add_entry(pk.encode_entry(_md(4), b"after"))
    ml.flush()
    store.close()


@pytest.fixture(scope="module", params=[False, True], ids=["no-coordinator", "coordinator"])
def datadir(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("metapass")
    _write(root, request.param)
    return root


def _read(scan, txn="committed", markers=False, batch_entries=2048, prefetch=0):
    rows, issues = [], []
    for part in scan.partitions:
        for b in read_partition(
            part, txn=txn, markers=markers, on_issue=issues.append, batch_entries=batch_entries, prefetch=prefetch
        ):
            rows += b.to_pylist()
    return rows, [(i.kind, i.ledger_id, i.entry_id, i.message) for i in issues]


def _passed(scan) -> bool:
    s = scan.read_stats
    return s.head_reads + s.scan_bytes + s.entry_reads > 0


@pytest.mark.parametrize("topic", TOPICS)
@pytest.mark.parametrize("txn", ["committed", "all"])
@pytest.mark.parametrize("markers", [False, True])
@pytest.mark.parametrize("batch_entries", [1, 2048])
def test_the_read_gives_the_rows_and_issues_of_a_forced_pass(datadir, topic, txn, markers, batch_entries):
    with open_data_dir(datadir) as dd:
        read = plan_mod.plan_data_dir(dd, "x", topics=[topic], txn=txn, metadata_pass="read", **ONE)
        forced = plan_mod.plan_data_dir(dd, "x", topics=[topic], txn=txn, metadata_pass="scan", **ONE)
        assert not _passed(read) and _passed(forced)
        assert len(read.partitions) == len(forced.partitions) == 1
        assert read.partitions[0].refine is not None
        got = _read(read, txn, markers, batch_entries)
        want = _read(forced, txn, markers, batch_entries)
    assert got == want
    assert not got[1]


@pytest.mark.parametrize("topic", TOPICS)
def test_a_read_ahead_replans_on_its_thread_with_the_same_rows(datadir, topic):
    # with a read ahead the pass, when a transaction is met, is planned on the read-ahead thread
    with open_data_dir(datadir) as dd:
        read = plan_mod.plan_data_dir(dd, "x", topics=[topic], metadata_pass="read", **ONE)
        forced = plan_mod.plan_data_dir(dd, "x", topics=[topic], metadata_pass="scan", **ONE)
        got = _read(read, "committed", True, 1, prefetch=2)
        want = _read(forced, "committed", True, 1)
    assert got == want and got[0]


def test_what_the_reads_give(datadir):
    with open_data_dir(datadir) as dd:
        rows = {t: [r["payload"] for b in message_batches(dd, [t]) for r in b.to_pylist()] for t in TOPICS}
    assert rows[PLAIN] == [b"p%d" % i for i in range(7)]
    assert rows[CHUNKED] == [FIRST, b"e" * 7, b"f" * 5 + b"g" * 5]
    assert rows[PAYMENTS] == [b"plain", b"committed"]  # the open transaction stops the read
    assert rows[MIXED] == [b"before", b"in-txn", b"xxxxyyyyzzzz", b"after"]


def test_a_position_filters_or_several_partitions_read_the_pass_in_the_plan(datadir):
    with open_data_dir(datadir) as dd:
        several = plan_mod.plan_data_dir(dd, "x", topics=[CHUNKED], min_partitions=4, max_partition_bytes=1)
        # several partitions, no cut inside a chunked message: the four chunks of the first one together
        assert _passed(several) and len(several.partitions) > 1
        rows, issues = _read(several)
        assert not issues and [r["payload"] for r in rows] == [FIRST, b"e" * 7, b"f" * 5 + b"g" * 5]
        for kw in (
            {"min_partitions": 4, "max_partition_bytes": 1},
            {"after": {"persistent://public/default/chunked": (dd.ml_ledgers(CHUNKED)[0], 1)}},
            {"filters": [("publish_time", ">=", 0)]},
            {"filters": [("ledger_id", ">=", 0)]},
        ):
            scan = plan_mod.plan_data_dir(dd, "x", topics=[CHUNKED], metadata_pass="read", **{**ONE, **kw})
            assert _passed(scan) and all(p.refine is None for p in scan.partitions), kw
        # after a position inside the first chunked message: its chunks are read again from its first one
        mid = plan_mod.plan_data_dir(dd, "x", topics=[CHUNKED], after={"persistent://public/default/chunked": (
            dd.ml_ledgers(CHUNKED)[0], 1)}, metadata_pass="read", **ONE)  # fmt: skip
        rows, issues = _read(mid)
        assert not issues and rows[0]["payload"] == FIRST


def test_the_pass_runs_once_a_transaction_is_met(datadir, monkeypatch):
    calls = []
    real = plan_mod.topic_facts

    def counting(dd, owner, *a, **kw):
        calls.append(sorted(set(owner.values())))
        return real(dd, owner, *a, **kw)

    monkeypatch.setattr(plan_mod, "topic_facts", counting)
    with open_data_dir(datadir) as dd:
        for t in (PLAIN, CHUNKED):
            assert sum(b.num_rows for b in message_batches(dd, [t])) > 0
        assert all(not c for c in calls)
        calls.clear()
        assert sum(b.num_rows for b in message_batches(dd, [PAYMENTS])) == 2
        assert [c for c in calls if c] == [["persistent://public/default/payments"]]


@pytest.mark.parametrize("topic", TOPICS)
def test_a_read_counts_the_pass_it_ran_and_the_batch_it_read_again(datadir, topic):
    # ReadStats count what was read from the entry logs: a read that planned its topic again counts that
    # pass, and the batch it met the transaction in (read again from its first entry in the new partition)
    with open_data_dir(datadir) as dd:
        read = plan_mod.plan_data_dir(dd, "x", topics=[topic], metadata_pass="read", **ONE)
        forced = plan_mod.plan_data_dir(dd, "x", topics=[topic], metadata_pass="scan", **ONE)
        got, want = ReadStats(), ReadStats()
        for scan, stats in ((read, got), (forced, want)):
            for part in scan.partitions:
                for _ in read_partition(part, batch_entries=1, stats=stats, prefetch=0):
                    pass
    transactional = topic in (PAYMENTS, MIXED)
    passed = got.head_reads + got.scan_bytes
    assert (passed > 0) == transactional
    if transactional:
        assert passed == forced.read_stats.head_reads + forced.read_stats.scan_bytes
        # what was read before the pass ran is read again (as the segment's reads cut it: one entry or more)
        assert got.entry_reads > want.entry_reads and got.entry_bytes > want.entry_bytes
    else:
        assert got == want
