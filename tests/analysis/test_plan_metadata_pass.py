"""The plan's metadata pass is left out only where nothing it finds can change the plan (issue 24).

A plan with one partition per topic (``min_partitions=1``, what ``messages``, the Python API and SQL ask
for), no time or ledger filter and no ``after`` position, in a directory that never had transactions (no
coordinator's log, no pending-ack store), reads no entry metadata: there are no markers or transactional
messages to find, and chunk spans only keep cuts out of chunked messages. Everywhere else the pass runs as
before; every read gives exactly the rows and issues of the read after a forced pass.
"""

from __future__ import annotations

import importlib

import pulsarkit as pk
import pytest
from datadir_fixtures import TC_LOG, _md, batched, txn_record
from pulsarkit.analysis.messages import message_batches
from pulsarkit.scan import read_partition
from pulsarkit.scan.datadir import open_data_dir

plan_mod = importlib.import_module("pulsarkit.scan.plan")

PLAIN = "public/default/persistent/plain"
CHUNKED = "public/default/persistent/chunked"
PAYMENTS = "public/default/persistent/payments"
ONE = {"min_partitions": 1, "max_partition_bytes": 1 << 62}


def _cfg() -> pk.ManagedLedgerConfig:
    return pk.ManagedLedgerConfig(max_entries_per_ledger=3, minimum_rollover_time_ms=0)


def _write(root, transactions: bool) -> None:
    """Two topics, one with chunked messages across ledgers (3 entries a ledger); with ``transactions``,
    a coordinator's log and a third topic with a committed, an aborted and an open transaction."""
    store = pk.Store.open(root, sync=False)
    ml = store.managed_ledger(PLAIN, _cfg())
    for i in range(7):
        ml.add_entry(pk.encode_entry(_md(i), b"p%d" % i))
    ml.flush()
    ml = store.managed_ledger(CHUNKED, _cfg())
    seq = 0
    for parts in ([b"a" * 10, b"b" * 10, b"c" * 10, b"d" * 10], [b"e" * 7], [b"f" * 5, b"g" * 5]):
        whole = b"".join(parts)
        for cid, part in enumerate(parts):
            if len(parts) == 1:
                md = _md(seq)
            else:
                md = _md(seq, uuid=f"prod-1-{seq}", chunk_id=cid, num_chunks_from_msg=len(parts),
                         total_chunk_msg_size=len(whole), uncompressed_size=len(whole))  # fmt: skip
            ml.add_entry(pk.encode_entry(md, part))
        seq += 1
    ml.flush()
    if transactions:
        tc = store.managed_ledger(TC_LOG, pk.ManagedLedgerConfig())
        tc.add_entry(batched([txn_record(0, 0, 1), txn_record(0, 0, 2), txn_record(0, 0, 3)]))
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
    store.close()


@pytest.fixture(scope="module", params=[False, True], ids=["no-transactions", "transactions"])
def datadir(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("metapass")
    _write(root, request.param)
    return root, request.param


def _read(dd, scan, txn="committed"):
    rows, issues = [], []
    for part in scan.partitions:
        for b in read_partition(part, txn=txn, on_issue=issues.append):
            rows += b.to_pylist()
    return rows, [(i.kind, i.ledger_id, i.entry_id, i.message) for i in issues]


def _passed(scan) -> bool:
    s = scan.read_stats
    return s.head_reads + s.scan_bytes + s.entry_reads > 0


@pytest.mark.parametrize("topic", [PLAIN, CHUNKED])
@pytest.mark.parametrize("txn", ["committed", "all"])
def test_one_partition_per_topic_skips_the_pass_only_without_transactions(datadir, topic, txn):
    root, transactions = datadir
    with open_data_dir(root) as dd:
        auto = plan_mod.plan_data_dir(dd, "x", topics=[topic], txn=txn, **ONE)
        forced = plan_mod.plan_data_dir(dd, "x", topics=[topic], txn=txn, metadata_pass="scan", **ONE)
        assert _passed(auto) is transactions
        assert _passed(forced)
        assert len(auto.partitions) == len(forced.partitions) == 1
        assert auto.marks == forced.marks
        got, want = _read(dd, auto, txn), _read(dd, forced, txn)
    assert got == want
    if topic == CHUNKED:  # the chunked messages reassembled, the plain one between them, no issue
        first = b"a" * 10 + b"b" * 10 + b"c" * 10 + b"d" * 10
        assert [r["payload"] for r in got[0]] == [first, b"e" * 7, b"f" * 5 + b"g" * 5]
        assert got[1] == []


def test_several_partitions_after_a_position_or_time_filters_still_read_the_pass(datadir):
    root, _ = datadir
    with open_data_dir(root) as dd:
        several = plan_mod.plan_data_dir(dd, "x", topics=[CHUNKED], min_partitions=4, max_partition_bytes=1)
        assert _passed(several)
        # no cut inside a chunked message: the four chunks of the first message in one partition
        rows, issues = _read(dd, several)
        assert not issues and len(rows) == 3
        # after a position inside the first chunked message: its chunks are read again from its first one
        name = "persistent://public/default/chunked"
        first = dd.ml_ledgers(CHUNKED)[0]
        mid = plan_mod.plan_data_dir(dd, "x", topics=[CHUNKED], after={name: (first, 1)}, **ONE)
        assert _passed(mid)
        rows, issues = _read(dd, mid)
        assert not issues and rows[0]["payload"] == b"a" * 10 + b"b" * 10 + b"c" * 10 + b"d" * 10
        timed = plan_mod.plan_data_dir(dd, "x", topics=[CHUNKED], filters=[("publish_time", ">=", 0)], **ONE)
        assert _passed(timed)


def test_a_transactional_topic_gets_its_markers_and_its_cut(datadir):
    root, transactions = datadir
    if not transactions:
        pytest.skip("the directory without a coordinator has no transactional topic")
    with open_data_dir(root) as dd:
        scan = plan_mod.plan_data_dir(dd, "x", topics=[PAYMENTS], **ONE)
        assert _passed(scan)
        assert len(scan.partitions[0].markers) == 2
        rows, _ = _read(dd, scan)
        assert [r["payload"] for r in rows] == [b"plain", b"committed"]  # the open transaction stops the read
        assert [b.num_rows for b in message_batches(dd, [PAYMENTS])] == [2]


def test_the_directory_rule(datadir):
    root, transactions = datadir
    with open_data_dir(root) as dd:
        assert plan_mod.transactions_possible(dd) is transactions
