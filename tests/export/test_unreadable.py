"""Issue 21 item 4 for the export: nothing silently missing. What a run skips (``--skip-unreadable``) or
reads around is a warning line each, a count at the end and in the summary, and ``--strict`` exits 3;
without ``--skip-unreadable`` an unreadable entry still stops the run. On damaged copies of the synthetic
data directory (a lost entry log; a ledger forged to claim 4·10^9 entries) and of a real standalone's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from datadir_fixtures import ORDERS, forge_last_entry
from pulsarkit import export as px
from pulsarkit.cli import main
from pulsarkit.scan.datadir import open_data_dir

FORGED = 4_000_000_000


def _run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _lost_log(root: Path, copy: Path) -> int:
    """``copy``: ``root`` with the entry log holding the most of the orders topic's entries removed;
    returns how many of its entries the metadata claims."""
    shutil.copytree(root, copy)
    with open_data_dir(root) as dd:
        lid = dd.ml_ledgers(ORDERS)[0]
        path, _ = dd.where(lid, 0)
        claimed = dd.ledgers[lid].entries
    (copy / Path(path).relative_to(root)).unlink()
    return claimed


def test_a_lost_entry_log_is_reported_counted_and_strict(synthetic, tmp_path, capsys):
    root, _ = synthetic
    copy = tmp_path / "d"
    _lost_log(root, copy)
    out = tmp_path / "out"
    rc, _, err = _run(capsys, "export", copy, "--to", "parquet", out, "--no-progress")
    assert rc == 1 and "unreadable" in err.lower()  # the default: an unreadable entry stops the run
    rc, stdout, err = _run(capsys, "export", copy, "--to", "parquet", out, "--skip-unreadable", "--json")
    assert rc == 0
    summary = json.loads(stdout)
    assert summary["unreadable_entries"] > 0 and summary["issues"]
    warned = [line for line in err.splitlines() if "warning: unreadable_entry" in line]
    assert warned and len(warned) <= len(summary["issues"])
    assert f"{summary['unreadable_entries']} unreadable entr" in err
    # the rows that could be read are there
    assert pq.read_table(out).num_rows == summary["rows"] > 0
    # --strict: the same read is a data problem, exit 3 (a rerun reads nothing new: a fresh output)
    rc, _, err = _run(capsys, "export", copy, "--to", "parquet", tmp_path / "o2", "--skip-unreadable", "--strict")
    assert rc == 3 and "issue(s) reading the data" in err


def test_a_forged_last_entry_is_one_issue_counting_the_run(synthetic, tmp_path):
    root, _ = synthetic
    held = forge_last_entry(root, tmp_path / "d", {"orders": ORDERS}, FORGED)
    lid, last = held["orders"]
    logs: list[str] = []
    s = px.export(str(tmp_path / "d"), "parquet", str(tmp_path / "out"), skip_unreadable=True, log=logs.append)
    gap = [i for i in s.issues if f"ledger {lid} entries {last + 1}..{FORGED}" in i]
    assert len(gap) == 1 and s.unreadable_entries == FORGED - last
    assert any(f"entries {last + 1}..{FORGED}" in m for m in logs)
    # every entry the bookie holds was exported
    with open_data_dir(root) as dd:
        want = sum(1 for _ in dd.entries(lid, 0, last))
    t = pq.read_table(tmp_path / "out", filters=[("ledger_id", "=", lid)])
    assert len(set(t.column("entry_id").to_pylist())) == want
    with pytest.raises(Exception, match="unreadable|no given bookie|no bookie"):
        px.export(str(tmp_path / "d"), "parquet", str(tmp_path / "out2"), log=lambda m: None)


def test_a_clean_export_has_no_issues(synthetic, tmp_path, capsys):
    root, _ = synthetic
    rc, stdout, err = _run(capsys, "export", root, "--to", "parquet", tmp_path / "out", "--json", "--strict")
    assert rc == 0 and json.loads(stdout)["issues"] == [] and json.loads(stdout)["unreadable_entries"] == 0
    assert "issue(s)" not in err


def test_spark_tasks_report_what_they_skipped(synthetic, tmp_path):
    pytest.importorskip("pyspark")
    from pulsarkit.spark.export import export as spark_export

    root, _ = synthetic
    copy = tmp_path / "d"
    _lost_log(root, copy)
    local = px.export(str(copy), "parquet", str(tmp_path / "a"), skip_unreadable=True, log=lambda m: None)
    spark = spark_export(
        str(copy), "parquet", str(tmp_path / "b"), engine="spark", skip_unreadable=True, log=lambda m: None
    )
    assert spark.unreadable_entries == local.unreadable_entries > 0
    assert sorted(spark.issues) == sorted(local.issues)
    # spark-sql: the data source's tasks count theirs (local master), one line for them
    sql = spark_export(
        str(copy), "parquet", str(tmp_path / "c"), engine="spark-sql", skip_unreadable=True, log=lambda m: None
    )
    assert sql.unreadable_entries == local.unreadable_entries
    assert len([i for i in sql.issues if "issue(s) in the Spark tasks" in i]) == 1 and sql.rows == local.rows


ORACLE = Path.home() / ".cache" / "pulsarkit-tests" / "datadir-oracle"


def test_a_real_standalone_with_a_lost_entry_log(tmp_path, capsys):
    """The datadir oracle's real Pulsar 4.0.7 data (when cached) with one entry log gone."""
    stores = sorted(ORACLE.glob("*/clean/data"))
    if not stores:
        pytest.skip("the datadir oracle (tests/interop/standalone) has not run on this machine")
    copy = tmp_path / "data"
    shutil.copytree(stores[0], copy)
    max((copy / "bookkeeper" / "current").glob("*.log"), key=lambda p: p.stat().st_size).unlink()
    rc, stdout, err = _run(capsys, "export", copy, "--to", "parquet", tmp_path / "out", "--skip-unreadable", "--json")
    summary = json.loads(stdout)
    assert rc == 0 and summary["unreadable_entries"] > 0 and "warning: unreadable_entry" in err
    rc, _, _ = _run(capsys, "export", copy, "--to", "parquet", tmp_path / "o2", "--skip-unreadable", "--strict")
    assert rc == 3
