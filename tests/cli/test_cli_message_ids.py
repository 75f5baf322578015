"""Message ids as Pulsar prints them (``MessageIdImpl.toString``: ``ledger:entry:partition``,
``BatchMessageIdImpl``'s: ``ledger:entry:partition:batch``) in every command's table, and ``export --until``
taking what they print."""

from __future__ import annotations

import json

import pulsarkit as pk
from pulsarkit.broker.compaction import Compactor
from pulsarkit.cli import main
from pulsarkit.managed_ledger.position import parse_message_id

TABLE = "persistent://public/default/table"
PART = "persistent://public/default/parts-partition-1"


def build(root):
    """``table``: a batch of 9, compacted, then a message outside a batch; ``parts-partition-1``: a batch of 3."""
    with pk.Store.open(root) as store:
        ml = store.managed_ledger("public/default/persistent/table")
        ml.open_cursor("sub", "earliest")
        items = [{"payload": b"v%d" % i, "key": f"k{i % 3}"} for i in range(9)]
        batch = ml.add_entry(pk.encode_batch(pk.message_metadata("p", 0, 1_700_000_000_000), items), num_messages=9)
        Compactor(store, ml).compact()
        tail = ml.add_entry(pk.encode_entry(pk.message_metadata("p", 9, 1_700_000_000_009, partition_key="k0"), b"new"))
        part = store.managed_ledger("public/default/persistent/parts-partition-1")
        md = pk.message_metadata("p", 0, 1_700_000_000_000)
        p = part.add_entry(pk.encode_batch(md, [b"a", b"b", b"c"]), num_messages=3)
        return batch, tail, p


def _ids(out: str) -> list[str]:
    return [w[0] for w in map(str.split, out.splitlines()[1:]) if w and ":" in w[0]]


def test_tables_print_message_ids_as_pulsar(tmp_path, capsys):
    batch, tail, p = build(tmp_path / "d")
    b, t = f"{batch.ledger_id}:{batch.entry_id}", f"{tail.ledger_id}:{tail.entry_id}"
    assert main(["messages", str(tmp_path / "d"), "--topic", TABLE]) == 0
    assert _ids(capsys.readouterr().out) == [f"{b}:-1:{i}" for i in range(9)] + [f"{t}:-1"]
    assert main(["messages", str(tmp_path / "d"), "--topic", PART]) == 0
    assert _ids(capsys.readouterr().out) == [f"{p.ledger_id}:{p.entry_id}:1:{i}" for i in range(3)]
    assert main(["backlog", str(tmp_path / "d"), TABLE, "sub"]) == 0
    assert _ids(capsys.readouterr().out) == [f"{b}:-1:{i}" for i in range(9)] + [f"{t}:-1"]
    assert main(["compacted", str(tmp_path / "d"), TABLE]) == 0
    assert _ids(capsys.readouterr().out) == [f"{b}:-1:6", f"{b}:-1:7", f"{b}:-1:8", f"{t}:-1"]
    assert main(["last-message-id", str(tmp_path / "d"), TABLE]) == 0
    assert capsys.readouterr().out.startswith(f"{t}:-1  published")
    # the JSON lines keep the id's object
    assert main(["messages", str(tmp_path / "d"), "--topic", PART, "--format", "jsonl"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])["message_id"]
    assert (first["ledger_id"], first["entry_id"], first["partition"], first["batch_index"]) == (*p, 1, 0)


def test_export_until_takes_the_printed_id(tmp_path, capsys):
    _, _, p = build(tmp_path / "d")
    assert main(["messages", str(tmp_path / "d"), "--topic", PART]) == 0
    printed = _ids(capsys.readouterr().out)[1]
    assert parse_message_id(printed) == (*p, 1, 1)
    argv = ["export", str(tmp_path / "d"), "--to", "parquet", str(tmp_path / "o"), "--engine", "local", "--json"]
    assert main([*argv, "--topic", PART, "--until", printed]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["rows"] == 2 and s["topics"][PART]["next"] == f"{p.ledger_id}:{p.entry_id}:-1:2"
