"""The transaction inspector on the synthetic data directory (tests/datadir_fixtures.py): states,
ages and timeouts, the coordinator log's size and live records, and pending-ack stores."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from pulsarkit.analysis.transactions import pending_ack_table, transaction_log_table, transactions_table
from pulsarkit.cli import main
from pulsarkit.scan.datadir import open_data_dir


def test_every_transaction_with_state_age_and_timeout(synthetic):
    root, _ = synthetic
    t = transactions_table(open_data_dir(root), now_ms=100_000).to_pylist()
    by = {r["txn"]: r for r in t}
    assert {k: r["state"] for k, r in by.items()} == {
        "(0,1)": "COMMITTED",
        "(0,2)": "ABORTED",
        "(0,3)": "OPEN",
        "(0,7)": "COMMITTED",
        "(0,8)": "ABORTED",
        "(0,9)": "OPEN",
    }
    open3 = by["(0,3)"]
    # NEW at start_time 1000 with a 60 s timeout: still open at 100 s is past its timeout
    assert (open3["start_time"], open3["timeout_ms"], open3["age_ms"], open3["timed_out"]) == (
        1000,
        60_000,
        99_000,
        True,
    )
    assert not by["(0,1)"]["timed_out"] and by["(0,1)"]["partitions"] == ["persistent://public/default/payments"]
    assert transactions_table(open_data_dir(root), now_ms=2000).to_pylist()[2]["timed_out"] is False
    # no cursor on the synthetic log: nothing deleted, so every record is live
    assert (by["(0,1)"]["log_records"], by["(0,1)"]["live_log_records"]) == (4, 4)


def test_log_topics_and_pending_ack_stores(synthetic):
    root, _ = synthetic
    dd = open_data_dir(root)
    (log,) = transaction_log_table(dd).to_pylist()
    assert (log["coordinator_id"], log["entries"], log["batched_entries"], log["records"]) == (0, 3, 2, 8)
    assert log["bytes"] > 0 and log["reclaimable_bytes"] == 0
    (pa,) = pending_ack_table(dd).to_pylist()
    assert (pa["topic"], pa["subscription"]) == ("persistent://public/default/orders", "sub-none")
    assert (pa["records"], pa["open_transactions"], pa["open_acked_positions"]) == (5, ["(0,9)"], 1)


@pytest.mark.parametrize("view", ["transactions", "pending-acks", "logs"])
def test_cli_views_json_and_parquet(synthetic, capsys, tmp_path, view):
    root, _ = synthetic
    assert main(["transactions", str(root), "--view", view, "--json", "--now", "100000"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rows and len(rows) == {"transactions": 6, "pending-acks": 1, "logs": 1}[view]
    out = tmp_path / f"{view}.parquet"
    assert main(["transactions", str(root), "--view", view, "--parquet", str(out)]) == 0
    assert pq.read_table(out).num_rows == len(rows)


def test_cli_table_flags_hung_transactions(synthetic, capsys):
    root, _ = synthetic
    assert main(["transactions", str(root), "--timed-out", "--now", "100000"]) == 0
    out = capsys.readouterr().out
    assert "(0,3)" in out and "(0,1)" not in out and "open past their timeout" in out
