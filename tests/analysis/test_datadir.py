"""pulsarkit.analysis on synthetic data made with pulsarkit's own writers: what real data lacks or
cannot show on demand (every ledger kind, cursor ledgers, journal-only entries, torn and missing
files, transactions, chunks, encryption, read-only filesystems)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import tempfile
from pathlib import Path

import pulsarkit as pk
import pytest
from datadir_fixtures import (
    ORDERS,
    PARTS,
    TC_LOG,
    TXN_TOPIC,
    _md,
    batched,
    file_hashes,
    pack_bookie_entry,
    tmp_copies,
    txn_record,
)
from pulsarkit.analysis.backlog import backlog_table, iter_backlog
from pulsarkit.analysis.messages import (
    iter_messages,
    ledger_entries,
    messages_table,
    read_messages,
)
from pulsarkit.analysis.transactions import Transaction, transactions
from pulsarkit.bookkeeper.journal import journal_table, scan_journal
from pulsarkit.codec.txn import decode_txn_log_entry
from pulsarkit.managed_ledger import Position
from pulsarkit.scan.bookie_dir import LocationIndex
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.scan.records import DataDirError
from pulsarkit.scan.schema import json_record

ORDERS_PENDING_ACK = "persistent://public/default/orders-sub-none__transaction_pending_ack"


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """A temporary directory of the test's own for RocksDB copies, so that counting them sees no other
    process's."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


# ------------------------------------------------------------------------------ tests


def test_every_ledger_by_its_kind(synthetic):
    root, facts = synthetic
    dd = open_data_dir(root)
    kinds = {led.ledger_id: led.kind for led in dd.ledger_list()}
    for lid in facts["orders_ledgers"]:
        assert kinds[lid] == "topic"
    assert kinds[facts["schema"]] == "schema"
    assert kinds[facts["compacted"]] == "compacted"
    assert kinds[facts["cursor_ledger"]] == "cursor"
    assert kinds[facts["deleted"]] == "deleted"
    assert "transaction_log" in kinds.values()
    led = dd.ledgers[facts["cursor_ledger"]]
    assert led.cursor == "sub-ledger" and led.topic == "persistent://public/default/orders" and led.referenced
    assert dd.ledgers[facts["deleted"]].state == "DELETED" and dd.ledgers[facts["deleted"]].entries_on_bookie == 1
    # the open ledger left by the "crash" reaches to the entries only the journal holds
    jl = dd.ledgers[facts["journal_ledger"]]
    assert jl.state == "OPEN" and jl.journal_only_entries == 2 and jl.last_entry_id == facts["journal_first"] + 1
    assert dd.issues == []


def test_topics_partitions_system_flags_and_cursors(synthetic):
    root, facts = synthetic
    dd = open_data_dir(root)
    topics = {t.name: t for t in dd.topics()}
    assert set(topics) == {
        "persistent://public/default/orders",
        "persistent://public/default/payments",
        "persistent://public/default/parts-partition-1",
        "persistent://pulsar/system/__transaction_log_0",
        ORDERS_PENDING_ACK,
    }
    assert topics["persistent://pulsar/system/__transaction_log_0"].system
    assert topics["persistent://pulsar/system/__transaction_log_0"].kind == "transaction_log"
    p = topics["persistent://public/default/parts-partition-1"]
    assert (p.partition, p.partitioned_topic, p.system) == (1, "persistent://public/default/parts", False)
    o = topics["persistent://public/default/orders"]
    assert o.ledgers == facts["orders_ledgers"] and len(o.ledgers) >= 3
    assert o.entries == 11 + 2  # 11 written, 2 more only in the journal
    cur = {c.name: c for c in o.cursors}
    ids = facts["ids"]
    ind = cur["sub-ind"]
    assert ind.source == "metadata" and ind.mark_delete == Position(*ids[0])
    assert (Position(*ids[1]), Position(*ids[2])) in ind.individually_deleted
    assert ind.stored_batch_ack_sets == {Position(*facts["batch_pos"]): [0b101]}
    assert ind.batch_ack_sets == {}  # a snapshot's ack sets are not restored by the broker
    led = cur["sub-ledger"]
    assert led.source == "cursor_ledger" and led.mark_delete == Position(*ids[3])
    assert led.individually_deleted == [(Position(*ids[4]), Position(*ids[5]))]
    assert led.batch_ack_sets == {Position(*facts["batch_pos"]): [0b110]}
    system = {"persistent://pulsar/system/__transaction_log_0", ORDERS_PENDING_ACK}
    assert {t.name for t in dd.topics(include_system=False)} == set(topics) - system
    assert topics[ORDERS_PENDING_ACK].kind == "pending_ack" and topics[ORDERS_PENDING_ACK].system


def test_messages_every_field(synthetic):
    root, facts = synthetic
    dd = open_data_dir(root)
    recs = list(iter_messages(dd, "persistent://public/default/orders"))
    ids = facts["ids"]
    first = recs[0]
    assert first["message_id"] == {
        "ledger_id": ids[0].ledger_id,
        "entry_id": ids[0].entry_id,
        "batch_index": -1,
        "partition": -1,
    }
    assert (first["key"], first["properties"], first["event_time"], first["sequence_id"]) == (
        "k0",
        {"n": "0"},
        None,
        0,
    )
    assert recs[1]["event_time"] == 6 and recs[1]["publish_time"] == 1_700_000_000_001
    assert first["payload_b64"] == "djA=" and first["producer_name"] == "prod-1"
    assert first["broker_entry_metadata"]["index"] == 0 and first["broker_entry_metadata"]["broker_timestamp"] > 0
    assert first["txn"] is None and first["encrypted"] is False and first["null_value"] is False
    batch = [r for r in recs if r["message_id"]["batch_index"] >= 0]
    assert [r["message_id"]["batch_index"] for r in batch] == [0, 1, 2]
    assert [r["broker_entry_metadata"]["index"] for r in batch] == [6, 7, 8]
    assert batch[1]["key"] == "bk"
    chunked = [r for r in recs if r["payload_b64"] and len(r["payload_b64"]) > 100]
    assert len(chunked) == 1 and chunked[0]["message_id"]["entry_id"] == ids[9].entry_id
    import base64

    assert base64.b64decode(chunked[0]["payload_b64"]) == facts["chunk"]
    enc = [r for r in recs if r["encrypted"]]
    assert len(enc) == 1 and enc[0]["payload_b64"] is None
    assert not any("ciphertext" in json.dumps(r) for r in recs)
    journal = recs[-2:]
    assert [base64.b64decode(r["payload_b64"]) for r in journal] == [b"journal-0", b"journal-1"]
    assert len(recs) == 6 + 3 + 1 + 1 + 2


def test_partition_index_in_message_ids(synthetic):
    root, _ = synthetic
    dd = open_data_dir(root)
    (r,) = iter_messages(dd, "persistent://public/default/parts-partition-1")
    assert r["message_id"]["partition"] == 1 and r["topic"] == "persistent://public/default/parts-partition-1"


def test_transactions_committed_aborted_open(synthetic):
    root, _ = synthetic
    dd = open_data_dir(root)
    txns = transactions(dd)
    assert {k: t.coordinator_state for k, t in txns.items() if t.coordinator_state} == {
        (0, 1): "COMMITTED",
        (0, 2): "ABORTED",
        (0, 3): "OPEN",
    }
    assert txns[(0, 1)].partitions == ["persistent://public/default/payments"]
    import base64

    def payloads(rs):
        return [base64.b64decode(r["payload_b64"]) for r in rs]

    # read-committed: aborted left out, and nothing from the open transaction's first message on
    # (the transaction buffer's maxReadPosition), not even the plain message after it
    assert payloads(iter_messages(dd, TXN_TOPIC)) == [b"plain", b"committed"]
    every = list(iter_messages(dd, TXN_TOPIC, txn="all"))
    assert payloads(every) == [b"plain", b"committed", b"aborted", b"open", b"after-open"]
    assert [r["txn"] and r["txn"]["state"] for r in every] == [None, "COMMITTED", "ABORTED", "OPEN", None]
    marks = [r for r in iter_messages(dd, TXN_TOPIC, markers=True, txn="all") if r["marker"]]
    assert [(m["marker"], m["txn"]["state"]) for m in marks] == [
        ("TXN_COMMIT", "COMMITTED"),
        ("TXN_ABORT", "ABORTED"),
    ]
    with pytest.raises(DataDirError, match="transaction log"):
        list(iter_messages(dd, TC_LOG))


def test_txn_log_entry_codec_batched_and_single():
    recs = decode_txn_log_entry(batched([txn_record(0, 5, 7), txn_record(3, 5, 7, new_status=2)]))
    assert [(r.op, r.txnid_most_bits, r.txnid_least_bits, r.new_status) for r in recs] == [
        ("NEW", 5, 7, None),
        ("UPDATE", 5, 7, "COMMITTED"),
    ]
    assert [(r.batched, r.batch_size, r.batch_index) for r in recs] == [(True, 2, 0), (True, 2, 1)]
    (one,) = decode_txn_log_entry(txn_record(1, 1, 2, partitions=["t"]))
    assert one.partitions == ("t",)
    with pytest.raises(pk.PulsarkitError):
        decode_txn_log_entry(b"\x0e\x01\x00\x01\x0a\xff")


def test_backlog_mark_delete_ranges_and_batch_ack_sets(synthetic):
    root, facts = synthetic
    dd = open_data_dir(root)
    ids = facts["ids"]
    orders = "persistent://public/default/orders"

    def backlog(sub):
        return [
            (r["message_id"]["ledger_id"], r["message_id"]["entry_id"], r["message_id"]["batch_index"])
            for r in iter_backlog(dd, orders, sub)
        ]

    bl, be = facts["batch_pos"]
    got = backlog("sub-ind")
    assert got[:5] == [(*ids[1], -1), (*ids[3], -1), (*ids[4], -1), (*ids[5], -1), (bl, be, 0)]
    # a cleanly closed cursor (ManagedCursorInfo snapshot): the broker does not restore its batch-index
    # ack sets (seen on a real 4.0.7), so the whole batch comes again
    assert (bl, be, 1) in got and (bl, be, 2) in got
    # a cursor ledger's PositionInfo: its ack set applies; (ids[4], ids[5]] is open-closed
    from_ledger = backlog("sub-ledger")
    assert from_ledger[0] == (*ids[4], -1) and (*ids[5], -1) not in from_ledger
    assert (bl, be, 0) not in from_ledger and (bl, be, 1) in from_ledger
    # the pending-ack store: committed ack applies, aborted one does not, an open one holds the message back
    none = backlog("sub-none")
    assert (*ids[1], -1) not in none and (*ids[3], -1) in none and (*ids[0], -1) in none
    assert (bl, be, 2) not in none and (bl, be, 0) in none
    assert len(none) == len(list(iter_messages(dd, orders))) - 2
    assert backlog_table(dd, orders, "sub-ind").num_rows == len(got)
    with pytest.raises(DataDirError, match="no subscription 'nope'.*sub-ind"):
        dd.cursor(orders, "nope")


def test_arrow_table_matches_records(synthetic):
    root, _ = synthetic
    dd = open_data_dir(root)
    t = messages_table(dd)
    recs = list(read_messages(dd))
    assert t.num_rows == len(recs)
    rows = t.to_pylist()
    for a, b in zip(rows, recs, strict=True):  # the JSON records are a rendering of the Arrow rows
        assert json_record(a) == b


def test_never_writes_one_byte_also_read_only_fs(synthetic, tmp_path, private_tmp):
    root, _ = synthetic
    copy = tmp_path / "ro"
    shutil.copytree(root, copy)
    before = file_hashes(copy)
    tmp_before = tmp_copies()
    assert tmp_before == set()  # a private temporary directory: no other process's copies in it
    for dirpath, dirs, files in os.walk(copy):
        for n in files + dirs:
            p = os.path.join(dirpath, n)
            os.chmod(p, os.stat(p).st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    os.chmod(copy, 0o555)
    try:
        with open_data_dir(copy) as dd:  # the location index's copy lives until close
            n = len(list(read_messages(dd, txn="all", markers=True, include_system=True)))
            assert n > 0 and dd.ledger_list() and dd.topics()
    finally:
        for dirpath, _dirs, _files in os.walk(copy):
            os.chmod(dirpath, 0o755)
    assert file_hashes(copy) == before
    assert tmp_copies() == tmp_before


def test_temporary_copies_removed_on_errors(tmp_path, private_tmp):
    bad = tmp_path / "bad"
    (bad / "metadata").mkdir(parents=True)
    (bad / "metadata" / "CURRENT").write_text("MANIFEST-000099\n")
    (bad / "bookkeeper" / "current").mkdir(parents=True)
    before = tmp_copies()
    with pytest.raises(DataDirError, match="metadata store .*not a readable RocksDB"):
        open_data_dir(bad)
    assert tmp_copies() == before
    with pytest.raises(DataDirError, match="no RocksDB metadata store"):
        open_data_dir(tmp_path)
    with pytest.raises(DataDirError, match="no such directory"):
        open_data_dir(tmp_path / "nope")
    with pytest.raises(DataDirError, match="reads only"):
        open_data_dir(bad, read_only=False)


def _damaged(synthetic, tmp_path) -> tuple[Path, dict]:
    root, facts = synthetic
    copy = tmp_path / "d"
    shutil.copytree(root, copy)
    return copy, facts


def test_missing_locations_rebuilt_by_scan(synthetic, tmp_path):
    copy, facts = _damaged(synthetic, tmp_path)
    shutil.rmtree(copy / "bookie" / "current" / "locations")
    dd = open_data_dir(copy)
    assert any(i.kind == "missing_index" and i.path.endswith("locations") for i in dd.issues)
    good = list(read_messages(open_data_dir(synthetic[0])))
    assert list(read_messages(dd)) == good
    with pytest.raises(DataDirError, match="locations"):
        open_data_dir(copy, strict=True)


def test_truncated_entry_log_names_file_and_offset_and_reads_the_rest(synthetic, tmp_path):
    copy, facts = _damaged(synthetic, tmp_path)
    logs = sorted((copy / "bookie" / "current").glob("*.log"), key=lambda p: int(p.stem, 16))
    good_dd = open_data_dir(synthetic[0])
    good = list(read_messages(good_dd))
    # cut the log holding message "v3" right inside that record
    victim = next(p for p in logs if b"v3" in p.read_bytes())
    size = victim.stat().st_size
    cut = victim.read_bytes().index(b"v3")
    with open(victim, "r+b") as f:
        f.truncate(cut)
    dd = open_data_dir(copy)
    got = list(read_messages(dd))
    assert 0 < len(got) < len(good)
    assert all(r in good for r in got)
    bad = [i for i in dd.issues if i.kind == "unreadable_entry"]
    assert bad and all(i.path == str(victim) and i.offset is not None and i.offset < size for i in bad)
    assert str(victim) in str(bad[0]) and f"offset {bad[0].offset}" in str(bad[0])


def test_torn_journal_tail(synthetic, tmp_path):
    root, facts = synthetic
    copy = tmp_path / "j"
    shutil.copytree(root, copy)
    j = copy / "bookie" / "current" / "19a0000000.txn"
    data = j.read_bytes().rstrip(b"\0")
    extra = pack_bookie_entry(facts["journal_ledger"], facts["journal_first"] + 2, b"x" * 100)
    j.write_bytes(data + struct.pack(">i", len(extra)) + extra[:50])
    recs, issues, version = scan_journal(j)
    assert version == 6 and len(recs) == 2
    assert [(i.kind, i.offset) for i in issues] == [("torn_journal_tail", len(data))]
    dd = open_data_dir(copy)
    assert any(i.kind == "torn_journal_tail" and i.path == str(j) and i.offset == len(data) for i in dd.issues)
    assert dd.ledgers[facts["journal_ledger"]].journal_only_entries == 2
    # the same as one Arrow table: every record a row, the torn tail a row with its offset, none dropped
    t = journal_table([j])
    assert t.num_rows == len(recs) + 1
    assert t.column("record").to_pylist()[: len(recs)] == [r.data for r in recs]
    assert t.column("kind").to_pylist()[: len(recs)] == ["DATA" if r.entry_id >= 0 else "MASTER_KEY" for r in recs]
    last = t.slice(len(recs)).to_pylist()[0]
    assert last["offset"] == len(data) and last["issue"].startswith("torn_journal_tail") and last["record"] is None


def test_journal_before_last_mark_is_not_replayed(synthetic, tmp_path):
    root, facts = synthetic
    copy = tmp_path / "m"
    shutil.copytree(root, copy)
    (copy / "bookie" / "current" / "lastMark").write_bytes(struct.pack(">qq", 0x19A0000001, 0))
    dd = open_data_dir(copy)
    assert dd.ledgers[facts["journal_ledger"]].journal_only_entries == 0


def test_separate_journal_ledger_and_index_dirs(synthetic, tmp_path):
    root, facts = synthetic
    base = tmp_path / "bk"
    (base / "journal" / "current").mkdir(parents=True)
    (base / "ledgers" / "current").mkdir(parents=True)
    (base / "index" / "current").mkdir(parents=True)
    cur = root / "bookie" / "current"
    for p in cur.iterdir():
        if p.suffix == ".txn":
            shutil.copy(p, base / "journal" / "current")
        elif p.name in ("ledgers", "locations"):
            shutil.copytree(p, base / "index" / "current" / p.name)
        elif p.is_file():
            shutil.copy(p, base / "ledgers" / "current")
    dd = open_data_dir(
        metadata_dir=root / "metadata",
        ledger_dirs=[base / "ledgers"],
        journal_dirs=[base / "journal"],
        index_dirs=[base / "index"],
    )
    assert list(read_messages(dd)) == list(read_messages(open_data_dir(root)))
    assert dd.ledgers[facts["journal_ledger"]].journal_only_entries == 2


def test_store_open_reaches_the_reader_for_a_foreign_directory(synthetic, tmp_path):
    root, _ = synthetic
    standalone = tmp_path / "standalone"
    shutil.copytree(root / "metadata", standalone / "metadata")
    shutil.copytree(root / "bookie", standalone / "bookkeeper")
    dd = pk.Store.open(standalone)
    assert isinstance(dd, type(open_data_dir(root)))
    assert not (standalone / "bookie").exists()


def test_each_ledger_decoded_by_its_own_format(synthetic):
    root, facts = synthetic
    dd = open_data_dir(root)
    (c0, c1) = ledger_entries(dd, facts["cursor_ledger"])
    assert c1["kind"] == "cursor" and "position_info" in c1 and "entry" not in c1
    tc = next(led.ledger_id for led in dd.ledger_list(["transaction_log"]))
    first = next(ledger_entries(dd, tc))
    assert [r["txnid_least_bits"] for r in first["transaction_log"]] == [1, 2, 3, 1]
    (comp,) = ledger_entries(dd, facts["compacted"])
    assert comp["kind"] == "compacted" and comp["error"].startswith("not a compacted entry")
    data = next(ledger_entries(dd, facts["orders_ledgers"][0]))
    assert data["entry"]["producer_name"] == "prod-1" and data["entry"]["broker_entry_metadata"]["index"] == 0
    assert dd.ledgers[facts["deleted"]].deleted_guess is None  # b"gone" is neither a Pulsar entry nor a PositionInfo
    with pytest.raises(DataDirError, match="no ledger 999"):
        next(ledger_entries(dd, 999))


def test_partitioned_topic_name_reads_every_partition(synthetic):
    root, _ = synthetic
    dd = open_data_dir(root)
    assert dd.expand("persistent://public/default/parts") == [PARTS]
    assert [r["message_id"]["partition"] for r in read_messages(dd, "persistent://public/default/parts")] == [1]
    with pytest.raises(DataDirError, match="no topic"):
        dd.expand("persistent://public/default/none")


def test_transaction_outcome_from_markers_when_the_coordinator_log_is_trimmed(synthetic):
    root, _ = synthetic
    dd = open_data_dir(root)
    txns = transactions(dd)
    assert {k: t.state for k, t in txns.items()} == {
        (0, 1): "COMMITTED",
        (0, 2): "ABORTED",
        (0, 3): "OPEN",
        (0, 7): "COMMITTED",
        (0, 8): "ABORTED",
        (0, 9): "OPEN",
    }
    assert txns[(0, 7)].pending_acks == {
        "persistent://public/default/orders-sub-none__transaction_pending_ack": "COMMIT"
    }
    assert txns[(0, 1)].markers == {"persistent://public/default/payments": "TXN_COMMIT"}
    assert txns[(0, 3)].topics == ["persistent://public/default/payments"] and txns[(0, 3)].markers == {}

    trimmed = Transaction(0, 9, markers={"t": "TXN_ABORT"})
    assert trimmed.state == "ABORTED" and Transaction(0, 8, pending_acks={"p": "COMMIT"}).state == "COMMITTED"
    assert Transaction(0, 7).state == "UNKNOWN"


def test_reads_from_a_read_only_mount(synthetic, tmp_path):
    """A real read-only filesystem (a read-only bind mount), where any write attempt fails with EROFS."""
    import subprocess

    root, _ = synthetic
    mnt = tmp_path / "ro-mount"
    mnt.mkdir()
    r = subprocess.run(["mount", "--bind", "-o", "ro", str(root), str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"read-only bind mount not permitted here: {r.stderr.strip()}")
    try:
        with pytest.raises(OSError):
            (mnt / "probe").write_bytes(b"x")
        with open_data_dir(mnt) as dd:
            got = list(read_messages(dd, txn="all", markers=True))
            assert dd.issues == []
        with open_data_dir(root) as dd:
            assert got and got == list(read_messages(dd, txn="all", markers=True))
    finally:
        # closed readers leave no file open: the mount is not busy
        subprocess.run(["umount", str(mnt)], check=True)


def test_null_and_empty_values_as_the_java_consumer_gets_them(tmp_path):
    """Java: a null value has getData() == null; an empty one is zero bytes."""
    store = pk.Store.open(tmp_path / "n", sync=False)
    ml = store.managed_ledger(ORDERS)
    ml.add_entry(
        pk.encode_batch(
            _md(0), [{"payload": b"", "key": "null", "null_value": True}, {"payload": b"", "key": "empty"}]
        ),
        num_messages=2,
    )
    ml.add_entry(pk.encode_entry(_md(2, null_value=True, partition_key="nb"), b""))
    ml.flush()
    store.close()
    with open_data_dir(tmp_path / "n") as dd:
        recs = list(read_messages(dd))
    assert [(r["key"], r["null_value"], r["payload_b64"]) for r in recs] == [
        ("null", True, None),
        ("empty", False, ""),
        ("nb", True, None),
    ]


def test_corrupt_locations_index_falls_back_to_a_scan(synthetic, tmp_path):
    root, _ = synthetic
    copy = tmp_path / "c"
    shutil.copytree(root, copy)
    loc = copy / "bookie" / "current" / "locations"
    for f in loc.iterdir():
        if f.name.startswith("MANIFEST"):
            f.write_bytes(b"\0garbage")
    with open_data_dir(copy) as dd:
        assert [i.kind for i in dd.issues][:2] == ["unreadable_index", "missing_index"]
        assert str(loc) in str(dd.issues[0])
        with open_data_dir(root) as good:
            assert list(read_messages(dd)) == list(read_messages(good))


def test_a_ledger_deleted_under_its_topic_is_reported(synthetic, tmp_path):
    root, facts = synthetic
    copy = tmp_path / "m"
    shutil.copytree(root, copy)
    lid = facts["orders_ledgers"][0]
    md = pk.metadata.MetadataStore(copy / "metadata")
    md.delete_ledger_metadata(lid)
    md.close()
    for p in copy.rglob("LOCK"):
        p.unlink()
    with open_data_dir(copy) as dd:
        led = dd.ledgers[lid]
        assert (led.kind, led.state, led.referenced) == ("deleted", "DELETED", True)
        assert any(i.kind == "missing_ledger" and i.ledger_id == lid for i in dd.issues)
        assert dd.topic("persistent://public/default/orders").ledgers[0] == lid


def test_an_entry_that_is_no_pulsar_entry_names_its_file(tmp_path):
    store = pk.Store.open(tmp_path / "x", sync=False)
    ml = store.managed_ledger(ORDERS)
    ml.add_entry(pk.encode_entry(_md(0), b"ok"))
    ml.add_entry(b"\x0e\x01 not an entry at all")
    ml.add_entry(pk.encode_entry(_md(1), b"ok too"))
    ml.flush()
    store.close()
    with open_data_dir(tmp_path / "x") as dd:
        assert [r["payload_b64"] for r in read_messages(dd)] == ["b2s=", "b2sgdG9v"]
        (bad,) = dd.issues
        assert bad.kind == "bad_entry" and bad.path.endswith(".log") and bad.offset > 0 and bad.entry_id == 1


# ------------------------------------------------------------------ damaged entries, one reader


def _flip_digest(synthetic, tmp_path, ledger_id: int, entry_id: int) -> Path:
    """A copy of the synthetic directory with one byte of an entry's stored digest flipped."""
    root, _ = synthetic
    copy = tmp_path / "flipped"
    shutil.copytree(root, copy)
    for lock in copy.rglob("LOCK"):
        lock.unlink()
    with open_data_dir(copy) as dd:
        path, off = dd.where(ledger_id, entry_id)
    with open(path, "r+b") as f:
        f.seek(off + 4 + 32)  # the record's length, then its 32-byte BookKeeper header: the digest
        b = f.read(1)
        f.seek(off + 4 + 32)
        f.write(bytes([b[0] ^ 0xFF]))
    return copy


def _payments_open_txn_entry(synthetic) -> tuple[int, int]:
    root, _ = synthetic
    with open_data_dir(root) as dd:
        for r in iter_messages(dd, TXN_TOPIC, txn="all"):
            if r["txn"] and r["txn"]["state"] == "OPEN":
                return r["message_id"]["ledger_id"], r["message_id"]["entry_id"]
    raise AssertionError("the synthetic directory has an open transaction's message")


@pytest.mark.parametrize("metadata_pass", ["scan", "heads"])
def test_a_damaged_transactional_entry_decides_nothing_in_either_metadata_pass(synthetic, tmp_path, metadata_pass):
    """A head is not digest-verified: an open transaction's message whose digest fails must not become
    the read-committed cut (which would hide the rows after it and the damage itself)."""
    from pulsarkit.scan.plan import plan_data_dir
    from pulsarkit.scan.read import read_partition

    lid, eid = _payments_open_txn_entry(synthetic)
    copy = _flip_digest(synthetic, tmp_path, lid, eid)
    dd = open_data_dir(copy)
    good = [r["payload_b64"] for r in read_messages(open_data_dir(synthetic[0]), TXN_TOPIC)]
    scan = plan_data_dir(dd, "x", topics=[dd.resolve(TXN_TOPIC)], metadata_pass=metadata_pass, min_partitions=1)
    issues: list[tuple] = []
    rows = [
        r
        for part in scan.partitions
        for b in read_partition(part, on_issue=lambda i: issues.append((i.kind, i.ledger_id, i.entry_id)))
        for r in b.to_pylist()
    ]
    assert ("unreadable_entry", lid, eid) in issues
    # with the damaged message unreadable, its transaction has no first message here: nothing is cut
    assert len(rows) >= len(good) and all((r["ledger_id"], r["entry_id"]) != (lid, eid) for r in rows)


def test_strict_raises_on_an_entry_the_message_read_cannot_read(synthetic, tmp_path):
    root, facts = synthetic
    lid, eid = facts["ids"][2]
    copy = _flip_digest(synthetic, tmp_path, lid, eid)
    assert len(list(read_messages(open_data_dir(copy), ORDERS))) < len(list(read_messages(open_data_dir(root), ORDERS)))
    with pytest.raises(DataDirError, match=f"unreadable_entry: .*ledger {lid} entry {eid}\\): .*digest"):
        list(read_messages(open_data_dir(copy, strict=True), ORDERS))


def test_backlog_reports_an_unreadable_entry_the_subscription_acknowledged(synthetic, tmp_path):
    root, facts = synthetic
    dd = open_data_dir(root)
    acked = [p for p in map(tuple, facts["ids"]) if dd.cursor(ORDERS, "sub-ind").is_deleted(Position(*p))]
    lid, eid = acked[-1]
    dd = open_data_dir(_flip_digest(synthetic, tmp_path, lid, eid))
    list(iter_backlog(dd, ORDERS, "sub-ind"))
    bad = [i for i in dd.issues if i.kind == "unreadable_entry"]
    assert [(i.ledger_id, i.entry_id) for i in bad] == [(lid, eid)]
    assert bad[0].path.endswith(".log") and not bad[0].message.startswith(f"ledger {lid} entry {eid}:")  # named once


def test_iter_messages_after_a_position_on_a_partitioned_topic(synthetic):
    root, _ = synthetic
    dd = open_data_dir(root)
    every = list(iter_messages(dd, PARTS))
    first = every[0]["message_id"]
    after = list(iter_messages(dd, PARTS, start=Position(first["ledger_id"], first["entry_id"])))
    assert after == [r for r in every if r["message_id"] != first]


def test_reading_one_topic_looks_up_only_its_ledgers(synthetic, private_tmp):
    """Opening a directory reads no ledger's locations; reading a topic reads its ledgers' key ranges of the
    location index (and its cursor ledger's), not the index whole; a whole-directory listing then sees
    every ledger as an eager read does."""
    root, facts = synthetic
    with open_data_dir(root) as dd:
        (index,) = [b.locations for b in dd._bookies]
        assert isinstance(index, LocationIndex)
        assert index.lookups == [] and index.full_reads == 0 and dd.ledgers.figured == frozenset()
        assert len(tmp_copies()) == 1  # the index's private copy, open for the lookups
        ml = dd.resolve(ORDERS)
        table = messages_table(dd, topics=[ORDERS])
        mine = set(dd.ml_ledgers(ml)) | {c.cursor_ledger_id for c in dd.cursors(ml)}
        assert table.num_rows > 0
        assert set(facts["orders_ledgers"]) <= set(index.lookups) <= mine
        assert len(index.lookups) == len(set(index.lookups))  # each looked up once, then cached
        assert index.full_reads == 0 and set(dd.ledgers.figured) <= mine
        assert len(dd.ledgers.figured) < len(dd.ledgers)
        partly = dd.ledgers_table()  # every ledger: the rest read in one pass over the index
        assert index.full_reads == 1
        issues = list(dd.issues)
    assert tmp_copies() == set()  # close() removed the copy
    with open_data_dir(root) as eager:
        everything = eager.ledgers_table()
        (eager_index,) = [b.locations for b in eager._bookies]
        assert eager_index.lookups == [] and eager_index.full_reads == 1
        assert table.equals(messages_table(eager, topics=[ORDERS]))
        assert eager.issues == issues
    assert partly.equals(everything)
    # a lookup after close opens a new copy (removed again on close)
    dd = open_data_dir(root)
    dd.close()
    assert tmp_copies() == set()
    assert [e for e, _ in dd.entries(facts["orders_ledgers"][0])] == [0, 1, 2, 3]
    dd.close()
    assert tmp_copies() == set()
