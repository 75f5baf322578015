"""``pulsarkit compacted`` and ``pulsarkit last-message-id`` on a store compacted by pulsarkit."""

from __future__ import annotations

import json

import pulsarkit as pk
import pyarrow.parquet as pq
from pulsarkit.broker.compaction import Compactor
from pulsarkit.cli import main


def build(root):
    with pk.Store.open(root) as store:
        ml = store.managed_ledger("public/default/persistent/table")
        md = pk.message_metadata("p", 0, 1_700_000_000_000)
        items = [{"payload": b"v%d" % i, "key": f"k{i % 3}"} for i in range(9)]
        last = ml.add_entry(pk.encode_batch(md, items, compression="ZSTD"), num_messages=9)
        Compactor(store, ml).compact()
        tail = ml.add_entry(pk.encode_entry(pk.message_metadata("p", 9, 1_700_000_000_009, partition_key="k0"), b"new"))
        return last, tail


def test_compacted_view_table_json_and_parquet(tmp_path, capsys):
    last, tail = build(tmp_path / "d")
    assert main(["compacted", str(tmp_path / "d"), "persistent://public/default/table", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(r["batch_index"], r["key"], r["from_compacted_ledger"]) for r in rows] == [
        (6, "k0", True),
        (7, "k1", True),
        (8, "k2", True),
        (-1, "k0", False),
    ]
    assert main(["compacted", str(tmp_path / "d"), "table"]) == 0
    out = capsys.readouterr().out
    assert "compacted ledger" in out and "4 message(s)" in out
    assert (
        main(["compacted", str(tmp_path / "d"), "table", "--format", "parquet", "-o", str(tmp_path / "c.parquet")]) == 0
    )
    assert pq.read_table(tmp_path / "c.parquet").num_rows == 4
    assert main(["compacted", str(tmp_path / "d"), "table", "--parquet", str(tmp_path / "d.parquet")]) == 0
    assert pq.read_table(tmp_path / "d.parquet").num_rows == 4


def test_last_message_id_follows_the_tail_past_the_horizon(tmp_path, capsys):
    last, tail = build(tmp_path / "d")
    assert main(["last-message-id", str(tmp_path / "d"), "table", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["ledger_id"], r["entry_id"], r["batch_index"]) == (tail.ledger_id, tail.entry_id, -1)
    assert r["horizon"] == str(last)
