"""``export --until`` / ``--until-time`` and the hand-off: the rows exported up to X and the rows a reader
gets from the marks' ``next`` on are the whole topic, with no gap and no duplicate, a cut inside a batch
included; a rerun continues from the cut."""

from __future__ import annotations

import json

import pulsarkit as pk
import pyarrow.dataset as ds
import pytest
from pulsarkit import export as px
from pulsarkit.analysis.messages import message_batches, read_message_rows
from pulsarkit.cli import main
from pulsarkit.export.marks import MessageId
from pulsarkit.managed_ledger.position import Position
from pulsarkit.scan.datadir import open_data_dir

ORDERS = "public/default/persistent/orders"
TOPIC = "persistent://public/default/orders"
T0 = 1_700_000_000_000


def _md(seq: int, **kw):
    return pk.message_metadata("prod", seq, T0 + seq * 1000, **kw)


def _write(root, first: int = 0, n: int = 4) -> None:
    """``n`` groups of: one keyed message, then a batch of three (keys b<i>-0..2)."""
    store = pk.Store.open(root, sync=False)
    ml = store.managed_ledger(ORDERS, pk.ManagedLedgerConfig(max_entries_per_ledger=3, minimum_rollover_time_ms=0))
    for i in range(first, first + n):
        ml.add_entry(pk.encode_entry(_md(2 * i, partition_key=f"k{i}"), b"m%d" % i))
        batch = [{"payload": b"b%d-%d" % (i, j), "key": f"b{i}-{j}"} for j in range(3)]
        ml.add_entry(pk.encode_batch(_md(2 * i + 1), batch), num_messages=3)
    store.close()


def _ids(rows):
    return [(r["ledger_id"], r["entry_id"], r["batch_index"]) for r in rows]


def _all(root):
    with open_data_dir(root) as dd:
        return _ids(read_message_rows(dd))


def _exported(out):
    t = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    return sorted(zip(t["ledger_id"].to_pylist(), t["entry_id"].to_pylist(), t["batch_index"].to_pylist()))


def _from(root, nxt: MessageId):
    """What a reader starting at ``nxt`` (inclusive) gets: the entry-level read after the entry before
    it, without the messages of ``nxt``'s entry before its batch index."""
    with open_data_dir(root) as dd:
        after = {TOPIC: Position(nxt.ledger_id, nxt.entry_id - 1)}
        rows = _ids(r for b in message_batches(dd, [TOPIC], after=after) for r in b.to_pylist())
    return [r for r in rows if not (r[:2] == nxt[:2] and r[2] < nxt.batch_index)]


def _handoff(root, out, summary) -> None:
    """The union of the export and a read from its ``next`` is the whole topic, nothing twice."""
    nxt = MessageId.parse(summary["topics"][TOPIC]["next"])
    rest = _from(root, nxt)
    exported = _exported(out)
    assert len(set(exported)) == len(exported)
    assert not set(exported) & set(rest)
    assert sorted(exported + rest) == sorted(_all(root))


def _cli(root, out, *args, capsys) -> dict:
    assert main(["export", str(root), "--to", "parquet", str(out), "--json", "--engine", "local", *args]) == 0
    return json.loads(capsys.readouterr().out)


def _positions(root):
    return sorted({r[:2] for r in _all(root)})


@pytest.mark.parametrize("cut", ["entry", "entry-pulsar", "batch-middle", "batch-last", "batch-first"])
def test_export_until_a_message_id_hands_off_with_no_gap_and_no_duplicate(tmp_path, capsys, cut):
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root)
    entries = _positions(root)
    single, batch = entries[2], entries[3]  # a keyed message, then a batch of three
    until = {
        "entry": f"{single[0]}:{single[1]}",
        "entry-pulsar": f"{single[0]}:{single[1]}:-1",  # MessageIdImpl.toString: ledger:entry:partition
        "batch-middle": f"{batch[0]}:{batch[1]}:-1:1",  # BatchMessageIdImpl's: ledger:entry:partition:batch
        "batch-last": f"{batch[0]}:{batch[1]}:-1:2",
        "batch-first": f"{batch[0]}:{batch[1]}:-1:0",
    }[cut]
    s = _cli(root, out, "--until", until, capsys=capsys)
    last = MessageId.parse(until)
    entry = cut.startswith("entry")
    assert max(_exported(out)) == (last.ledger_id, last.entry_id, max(last.batch_index, -1 if entry else 0))
    expect_next = {
        "entry": MessageId(*batch),
        "entry-pulsar": MessageId(*batch),
        "batch-middle": MessageId(*batch, 2),
        "batch-last": MessageId(*entries[4]),
        "batch-first": MessageId(*batch, 1),
    }[cut]
    assert MessageId.parse(s["topics"][TOPIC]["next"]) == expect_next
    _handoff(root, out, s)
    # the marks file carries the hand-off too
    marks = json.loads((out / px.MARKS_FILE).read_text())
    assert marks["next"][TOPIC] == list(expect_next)
    # a rerun without --until exports the rest exactly once (the cut batch's remaining messages included)
    s2 = _cli(root, out, capsys=capsys)
    assert _exported(out) == sorted(_all(root))
    assert MessageId.parse(s2["topics"][TOPIC]["next"]) == MessageId(entries[-1][0], entries[-1][1] + 1)


def test_export_until_time_stops_before_the_first_later_message(tmp_path, capsys):
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root)
    # messages are published at T0 + seq s: up to seq 4 (the third group's single message)
    s = _cli(root, out, "--until-time", str(T0 + 4500), capsys=capsys)
    with open_data_dir(root) as dd:
        times = {(r["ledger_id"], r["entry_id"]): r["publish_time"] for r in read_message_rows(dd)}
    assert {times[r[:2]] for r in _exported(out)} == {T0 + i * 1000 for i in range(5)}
    _handoff(root, out, s)
    # the same cut given as ISO-8601 (UTC)
    out2 = tmp_path / "out2"
    iso = "2023-11-14T22:13:24.500Z"  # T0 + 4.5 s
    s2 = _cli(root, out2, "--until-time", iso, capsys=capsys)
    assert _exported(out2) == _exported(out) and s2["topics"][TOPIC]["next"] == s["topics"][TOPIC]["next"]


def test_export_to_the_end_then_new_messages_next_is_the_first_new_one(tmp_path, capsys):
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, n=2)
    s = _cli(root, out, capsys=capsys)
    _write(root, first=2, n=2)
    nxt = MessageId.parse(s["topics"][TOPIC]["next"])
    assert sorted(_exported(out) + _from(root, nxt)) == sorted(_all(root))


@pytest.mark.parametrize(
    ("until", "message"),
    [
        ("999:0", "--until 999:0:-1: no such entry in persistent://public/default/orders"),
        ("{l}:99", "no such entry in persistent://public/default/orders"),
        ("{l}:1:-1:3", "has 3 message(s)"),
        # three numbers are Pulsar's ledger:entry:partition, never pulsarkit's former ledger:entry:batch
        ("{l}:1:2", "--until {l}:1:2 names partition 2: give it as TOPIC={l}:1:2"),
        ("orders={l}:1:2", "the id names partition 2 and orders is not a partition"),
        ("nosuch=1:0", "nosuch"),
    ],
)
def test_an_until_position_not_in_the_topic_is_one_line(tmp_path, capsys, until, message):
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root)
    lid = _positions(root)[1][0]
    rc = main(["export", str(root), "--to", "parquet", str(out), "--until", until.format(l=lid)])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and message.format(l=lid) in err and len(err.splitlines()) == 1, err
    assert not (out / px.MARKS_FILE).exists()


def test_a_malformed_until_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["export", str(tmp_path), "--to", "parquet", str(tmp_path / "o"), "--until", "1-2"])
    assert e.value.code == 2 and "LEDGER:ENTRY[:PARTITION[:BATCH]]" in capsys.readouterr().err


def test_the_plain_summary_names_the_next_message_id(tmp_path, capsys):
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root)
    batch = _positions(root)[1]
    rc = main(["export", str(root), "--to", "parquet", str(out), "--until", f"{TOPIC}={batch[0]}:{batch[1]}:-1:0"])
    assert rc == 0 and f"{TOPIC}: next message id {batch[0]}:{batch[1]}:-1:1" in capsys.readouterr().out


@pytest.mark.parametrize("to", ["parquet", "delta", "iceberg"])
def test_export_marks_prints_the_committed_hand_off_of_every_format(tmp_path, capsys, to):
    pytest.importorskip({"parquet": "pyarrow", "delta": "deltalake", "iceberg": "pyiceberg"}[to])
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root)
    batch = _positions(root)[1]
    until = f"{batch[0]}:{batch[1]}:-1:1"
    assert main(["export", str(root), "--to", to, str(out), "--until", f"{TOPIC}={until}", "--engine", "local"]) == 0
    capsys.readouterr()
    assert main(["export-marks", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["to"] == to and doc["mode"] == "append"
    assert doc["topics"][TOPIC] == {
        "mark": [batch[0], batch[1] - 1],
        "next": f"{batch[0]}:{batch[1]}:-1:2",
        "last": f"{batch[0]}:{batch[1]}:-1:1",
    }
    assert main(["export-marks", str(out)]) == 0
    want = f"{TOPIC}: mark {batch[0]}:{batch[1] - 1}, next {batch[0]}:{batch[1]}:-1:2, last {batch[0]}:{batch[1]}:-1:1"
    assert want in capsys.readouterr().out
    assert main(["export-marks", str(tmp_path)]) == 1
    assert "is not a pulsarkit export" in capsys.readouterr().err


def test_each_partition_of_a_partitioned_topic_has_its_own_until_and_next(tmp_path, capsys):
    root, out = tmp_path / "data", tmp_path / "out"
    parts = [f"persistent://public/default/parts-partition-{i}" for i in (0, 1)]
    with pk.Store.open(root, sync=False) as store:
        for i in (0, 1):
            ml = store.managed_ledger(f"public/default/persistent/parts-partition-{i}")
            for seq in range(3):
                ml.add_entry(pk.encode_batch(_md(seq), [b"p%d-%d-%d" % (i, seq, j) for j in range(2)]), num_messages=2)
    with open_data_dir(root) as dd:
        rows = list(read_message_rows(dd))
    ids = {t: sorted({(r["ledger_id"], r["entry_id"]) for r in rows if r["topic"] == t}) for t in parts}  # entries
    (l0, e0), (l1, e1) = ids[parts[0]][2], ids[parts[1]][0]
    # without a topic, an id is ambiguous between the partitions: one line
    assert main(["export", str(root), "--to", "parquet", str(out), "--topic", "parts", "--until", f"{l0}:{e0}"]) == 1
    assert "names no topic" in capsys.readouterr().err
    # an id of partition 1 given for partition 0: one line
    bad = ["--until", f"{parts[0]}={l0}:{e0}:1:0"]
    assert main(["export", str(root), "--to", "parquet", str(out), "--topic", "parts", *bad]) == 1
    assert f"names partition 1 and {parts[0]} is partition 0" in capsys.readouterr().err
    # the partition as a consumer of the partitioned topic prints it (0), or -1 as a reader of the partition
    args = ["--until", f"{parts[0]}={l0}:{e0}:0:0", "--until", f"{parts[1]}={l1}:{e1}:-1"]
    s = _cli(root, out, "--topic", "parts", *args, capsys=capsys)
    assert s["topics"][parts[0]]["next"] == f"{l0}:{e0}:-1:1"
    assert s["topics"][parts[1]]["next"] == "%d:%d:-1" % ids[parts[1]][1]
    t = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert t.num_rows == 5 + 2  # partition 0: two batches and one message of the third; partition 1: its first batch
