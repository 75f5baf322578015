"""The ``pulsarkit`` Spark source never skips unreadable entries silently (issue 21, items 4 and 5): on a
directory whose orders ledger claims ``lastEntryId`` 4·10^9, the default ``on_error=skip`` read
finishes with every real message, counts the missing entries in the tasks' statistics (and logs
them); ``error_rows=true`` adds one error row for the run; ``on_error=fail`` fails."""

from __future__ import annotations

import pytest
from datadir_fixtures import ORDERS, forge_last_entry

pytestmark = pytest.mark.spark

FORGED = 4_000_000_000


def test_skipped_entries_are_counted_and_shown_on_request(spark, synthetic, tmp_path):
    from pulsarkit.spark import messages_source as ms

    root, _ = synthetic
    lid, last = forge_last_entry(root, tmp_path / "data", {"orders": ORDERS}, FORGED)["orders"]
    ms.register(spark)

    def load(**options):
        r = spark.read.format("pulsarkit")
        for k, v in options.items():
            r = r.option(k, str(v))
        return r.load(str(tmp_path / "data"))

    clean = spark.read.format("pulsarkit").load(str(root)).select("ledger_id", "entry_id", "batch_index").collect()
    stats = tmp_path / "stats"
    got = load(stats_dir=stats).select("ledger_id", "entry_id", "batch_index").collect()
    assert sorted(got) == sorted(clean) and clean
    assert ms.read_stats(str(stats))["tasks"].unreadable_entries == FORGED - last

    rows = [r.asDict() for r in load(error_rows="true").collect()]
    errors = [r for r in rows if r["error"] is not None]
    assert len(rows) - len(errors) == len(clean)
    assert [(r["topic"], r["ledger_id"], r["entry_id"]) for r in errors] == [
        ("persistent://public/default/orders", lid, last + 1)
    ]
    assert f"entries {last + 1}..{FORGED} ({FORGED - last} entries)" in errors[0]["error"]
    assert errors[0]["payload"] is None

    with pytest.raises(Exception, match=f"entries {last + 1}..{FORGED}"):
        load(on_error="fail").collect()
