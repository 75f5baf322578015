"""What-if simulation and compaction-to-target, on a store whose history is known exactly."""

from __future__ import annotations

import json

import pulsarkit as pk
import pytest
from pulsarkit.analysis import whatif as whatif_module
from pulsarkit.analysis.whatif import HOUR_MS, WhatIf, compaction_to_target, simulate
from pulsarkit.bookkeeper.gc import GcConfig
from pulsarkit.scan.datadir import open_data_dir

T0 = 1_700_000_000_000
GC = GcConfig(gc_wait_time_ms=600_000, minor_compaction_interval_s=3600, major_compaction_interval_s=86_400)


def build(root, namespaces=None):
    """Two topics, four 10-entry ledgers each, closed an hour apart; 'a' is consumed up to its third
    ledger, 'b' has no cursor (so retention alone decides); small logs, so several logs hold both.
    ``namespaces``: topic name -> its namespace (public/default), and more topics like 'b'."""
    namespaces = namespaces or {"a": "public/default", "b": "public/default"}
    t = [T0 - 10 * HOUR_MS]
    store = pk.Store.open(root, log_size_limit=64 << 10, sync=False, clock=lambda: t[0])
    cfg = pk.ManagedLedgerConfig(max_entries_per_ledger=10, minimum_rollover_time_ms=0)
    mls = {n: store.managed_ledger(f"{ns}/persistent/{n}", cfg) for n, ns in namespaces.items()}
    cur = mls["a"].open_cursor("sub", "earliest")
    for i in range(40):
        for ml in mls.values():
            ml.add_entry(pk.encode_entry(pk.message_metadata("p", i, t[0]), bytes([i]) * 2000))
        if i % 10 == 9:
            t[0] += HOUR_MS
    first_a = mls["a"].ledgers()[0].ledger_id
    cur.mark_delete(pk.Position(mls["a"].ledgers()[2].ledger_id, 9))
    store.close()
    return first_a


def test_retention_zero_deletes_consumed_ledgers_then_gc_reclaims(tmp_path):
    build(tmp_path / "d")
    with open_data_dir(tmp_path / "d") as dd:
        before = sum(md.total_size for _, _, md in dd.entry_logs())
        b_ledgers = dd.ml_ledgers("public/default/persistent/b")
        out = simulate(dd, WhatIf(gc=GC, horizon_hours=2))
    rows = out["timeline"]
    deleted = [r for r in rows if r["event"] == "ledger_deleted"]
    # 'a': its first three ledgers are consumed; 'b' has no cursor, so every ledger but the current goes
    assert {r["topic"].rsplit("/", 1)[1] for r in deleted} == {"a", "b"}
    assert sum(r["topic"].endswith("/a") for r in deleted) == 3
    assert [r["ledger_id"] for r in deleted if r["topic"].endswith("/b")] == b_ledgers[:-1]
    assert all(r["hours"] == 0 for r in deleted)  # retention 0: at the first check
    # the bookie frees nothing before its first GC run, and the minor compaction waits for its interval
    first_gc = [r for r in rows if r["event"] != "ledger_deleted"]
    assert first_gc and min(r["hours"] for r in first_gc) >= GC.gc_wait_time_ms / HOUR_MS
    assert all(r["hours"] >= 1 for r in first_gc if r["event"] == "minor_compaction")
    s = out["summary"]
    assert 0 < s["bytes_reclaimed"] <= before
    (bk,) = s["bookies"].values()
    assert bk["bytes_before"] == before and bk["bytes_after"] == before - s["bytes_reclaimed"]
    assert s["bytes_written_by_compaction"] == sum(r.get("bytes_written", 0) for r in rows)


def test_compaction_is_replayed_in_gc_order(tmp_path, monkeypatch):
    """whatif picks and orders the logs to compact with GC's own rule (lowest usage bucket first, then
    log id: ``bookkeeper.gc.select_for_compaction``), not a copy of it sorted by usage."""
    build(tmp_path / "d")
    calls = []
    real = whatif_module.select_for_compaction

    def spy(logs, threshold):
        out = real(logs, threshold)
        calls.append(out)
        return out

    monkeypatch.setattr(whatif_module, "select_for_compaction", spy)
    with open_data_dir(tmp_path / "d") as dd:
        out = simulate(dd, WhatIf(gc=GC, horizon_hours=2))
    events = [r for r in out["timeline"] if r["event"].endswith("_compaction")]
    assert events and calls
    assert [r["log_id"] for r in events] == [lg.log_id for chosen in calls for lg, _ in chosen]
    order = [(min(9, int(r["usage"] * 10)), r["log_id"]) for r in events if r["hours"] == events[0]["hours"]]
    assert order == sorted(order)


def test_retention_time_and_ttl_decide_when(tmp_path):
    build(tmp_path / "d")
    with open_data_dir(tmp_path / "d") as dd:
        # a 10-hour retention keeps consumed ledgers until they are 10 hours old, then they go at the next check
        # (size -1: with a 0 MB quota every consumed ledger is over quota at once, as in the broker)
        out = simulate(dd, WhatIf(retention_time_minutes=600, retention_size_mb=-1, gc=GC, horizon_hours=12))
        deleted = [r for r in out["timeline"] if r["event"] == "ledger_deleted"]
        assert deleted and min(r["hours"] for r in deleted) > 0
        assert all(10 * HOUR_MS < r["time_ms"] - r["closed_ms"] <= 10 * HOUR_MS + 120_000 for r in deleted)
        # nothing is ever deleted with unlimited retention
        out = simulate(dd, WhatIf(retention_time_minutes=-1, retention_size_mb=-1, gc=GC, horizon_hours=12))
        assert out["summary"]["ledgers_deleted"] == 0
        # TTL expires the fourth ledger, which the cursor had not consumed; never the current one
        out = simulate(dd, WhatIf(ttl_seconds=1, gc=GC, horizon_hours=1))
        a = [r["ledger_id"] for r in out["timeline"] if r["event"] == "ledger_deleted" and r["topic"].endswith("/a")]
        assert a == dd.ml_ledgers("public/default/persistent/a")[:-1] and len(a) == 4
        # topics never loaded are never trimmed (Pulsar #9057)
        out = simulate(dd, WhatIf(gc=GC, horizon_hours=1, assume_loaded=False))
        assert {r["topic"].rsplit("/", 1)[1] for r in out["timeline"] if r["event"] == "ledger_deleted"} <= {"a"}


def test_compaction_to_target(tmp_path):
    build(tmp_path / "d")
    with pk.Store.open(tmp_path / "d") as store:
        store.managed_ledger("public/default/persistent/b").delete()  # half the bytes die
    with open_data_dir(tmp_path / "d") as dd:
        now = sum(md.total_size for _, _, md in dd.entry_logs())
        plan = compaction_to_target(dd, int(now * 0.75))
        assert plan["reachable"] and plan["bytes_after"] <= now * 0.75 and plan["logs"]
        deads = [lg["dead"] for lg in plan["logs"]]
        assert deads == sorted(deads, reverse=True)  # the most dead bytes first: the fewest logs
        assert plan["headroom_bytes"] == max(lg["live"] for lg in plan["logs"])
        assert not compaction_to_target(dd, 10)["reachable"]  # live bytes cannot be compacted away
    with pytest.raises(pk.PulsarkitError):
        with open_data_dir(tmp_path / "d") as dd:
            simulate(dd, WhatIf(gc=GcConfig(gc_wait_time_ms=600_000, minor_compaction_interval_s=1)))


def test_cli_whatif_and_html_report(tmp_path, capsys):
    from pulsarkit.cli import main

    build(tmp_path / "d")
    d = str(tmp_path / "d")
    assert main(["whatif", d, "--horizon-hours", "2", "--gc-wait-ms", "600000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["ledgers_deleted"] == 7 and out["summary"]["bytes_reclaimed"] > 0
    assert main(["whatif", d, "--horizon-hours", "2", "--target-bytes", "1"]) == 0
    text = capsys.readouterr().out
    assert "7 ledger(s) deleted" in text and "NOT reachable" in text
    page = tmp_path / "r.html"
    assert main(["report", d, "-o", str(page), "--target-bytes", "100000"]) == 0
    doc = page.read_text()
    # self-contained: inline SVG plots, no script, nothing fetched
    assert doc.count("<svg") >= 3 and "<script" not in doc and "http" not in doc.split("</title>", 1)[1]
    for heading in ("Entry logs", "By owner", "Orphan ledgers", "What if", "Compacting to", "fsck"):
        assert f"<h2>{heading}" in doc
    assert main(["report", d, "-o", str(page)]) == 1  # never over an existing file without --overwrite


FOREVER = {"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}}
WEEK = {"retention_policies": {"retentionTimeInMinutes": 7 * 24 * 60, "retentionSizeInMB": -1}}


def build_with_policies(root):
    """'a' in a namespace retained forever, 'b' in one with a 7-day policy, 'c' in public/default (no
    policy: the broker's); an unreadable policy node is a note, not a crash."""
    build(root, {"a": "t/forever", "b": "t/week", "c": "public/default"})
    with pk.Store.open(root, clock=lambda: T0 - 10 * HOUR_MS) as store:  # the snapshot's time stays build's
        store.metadata.put("/admin/policies/t/forever", json.dumps(FOREVER).encode())
        store.metadata.put("/admin/policies/t/week", json.dumps({**WEEK, "message_ttl_in_seconds": None}).encode())
        store.metadata.put("/admin/policies/t/broken", b"{not json")
        store.managed_ledger("t/week/persistent/__change_events")  # where topic policies would be (none)


def _deleted(out):
    return {r["topic"].split("/persistent/")[1] for r in out["timeline"] if r["event"] == "ledger_deleted"}


def test_namespace_retention_policies_in_the_data_are_used(tmp_path):
    build_with_policies(tmp_path / "d")
    with open_data_dir(tmp_path / "d") as dd:
        out = simulate(dd, WhatIf(gc=GC, horizon_hours=48))
        # forever and 7 days keep every ledger; only the namespace without a policy loses its consumed ones
        assert _deleted(out) == {"c"}
        assert all(r["hours"] == 0 for r in out["timeline"] if r["event"] == "ledger_deleted")
        topics = out["topics"]
        assert topics["t/forever/persistent/a"]["retention_time_minutes"] == -1
        assert topics["t/forever/persistent/a"]["retention_source"] == "namespace policy /admin/policies/t/forever"
        assert topics["t/week/persistent/b"]["retention_time_minutes"] == 10080
        assert topics["t/week/persistent/b"]["ttl_source"] == "default"  # a null TTL falls back to the broker's
        assert topics["public/default/persistent/c"]["retention_source"] == "default"
        assert any("/admin/policies/t/broken" in n for n in out["settings"]["notes"])
        # an empty __change_events topic: no topic policies, nothing to say (test_topic_policies.py has some)
        assert not [n for n in out["settings"]["notes"] if "__change_events" in n]
        assert out["settings"]["topic_policies"] == {}
        # the 7-day policy deletes once the week has passed, never before
        out = simulate(dd, WhatIf(gc=GC, horizon_hours=7 * 24))
        week = [r for r in out["timeline"] if r["event"] == "ledger_deleted" and "/week/" in r["topic"]]
        assert week and all(r["time_ms"] - r["closed_ms"] > 7 * 24 * HOUR_MS for r in week)
        assert "a" not in _deleted(out)
        # flags override the policies, for every topic
        out = simulate(dd, WhatIf(retention_time_minutes=0, retention_size_mb=0, gc=GC, horizon_hours=1))
        assert _deleted(out) == {"a", "b", "c"}
        assert {p["retention_source"] for p in out["topics"].values()} == {"flag"}


def test_configuration_beside_the_data_is_used_and_flags_override_it(tmp_path):
    build(tmp_path / "pulsar" / "data")
    conf = tmp_path / "pulsar" / "conf" / "standalone.conf"
    conf.parent.mkdir()
    conf.write_text(
        "# a standalone's one file serves the broker and its bookie\n"
        "defaultRetentionTimeInMinutes=-1\ndefaultRetentionSizeInMB = -1\nttlDurationDefaultInSeconds=\n"
        "gcWaitTime=1800000\nminorCompactionThreshold: 0.3\nretentionCheckIntervalInSeconds=60\n"
    )
    # beside it, a Pulsar installation's other files: not what a standalone runs with
    (conf.parent / "broker.conf").write_text("defaultRetentionTimeInMinutes=5\n")
    (conf.parent / "bookkeeper.conf").write_text("majorCompactionThreshold=0.5\n")
    src = f"config {conf}"
    with open_data_dir(tmp_path / "pulsar" / "data") as dd:
        out = simulate(dd, WhatIf(horizon_hours=2))
        st = out["settings"]
        assert sorted(st["config_files"]) == sorted(
            str(conf.parent / n) for n in ("standalone.conf", "broker.conf", "bookkeeper.conf")
        )
        assert sum(n.endswith(f"not read (a standalone reads {conf} only)") for n in st["notes"]) == 2
        assert out["summary"]["ledgers_deleted"] == 0  # the broker's default here is: forever
        assert st["gc"]["gc_wait_time_ms"] == 1_800_000 and st["gc"]["minor_compaction_threshold"] == 0.3
        assert st["retention_check_interval_s"] == 60
        assert st["sources"]["retention_time_minutes"] == src and st["sources"]["gc_wait_time_ms"] == src
        assert st["sources"]["ttl_seconds"] == "default"  # an empty value is unset
        # a GC key the standalone's file lacks is BookKeeper's own default, not Pulsar's bookkeeper.conf's
        assert st["gc"]["major_compaction_threshold"] == 0.8
        assert st["sources"]["major_compaction_threshold"] == f"BookKeeper's default: {conf} does not set it"
        assert {r["hours"] for r in out["timeline"] if r["event"] != "ledger_deleted"} <= {0.5, 1.0, 1.5, 2.0}
        out = simulate(
            dd, WhatIf(retention_time_minutes=0, retention_size_mb=0, gc_overrides={"gc_wait_time_ms": 600_000})
        )
        assert out["summary"]["ledgers_deleted"] == 7
        assert out["settings"]["sources"]["gc_wait_time_ms"] == "flag"
        assert out["settings"]["gc"]["gc_wait_time_ms"] == 600_000
        assert out["settings"]["sources"]["minor_compaction_threshold"] == src
        # no configuration file: Pulsar's defaults
        out = simulate(dd, WhatIf(config_files=()))
        assert out["summary"]["ledgers_deleted"] == 7 and out["settings"]["sources"]["gc_wait_time_ms"] == "default"


def test_cli_whatif_and_report_say_where_each_setting_came_from(tmp_path, capsys):
    from pulsarkit.cli import main

    build_with_policies(tmp_path / "d")
    conf = tmp_path / "bk_server.conf"
    conf.write_text("majorCompactionThreshold=0.6\n")
    d = str(tmp_path / "d")
    assert main(["whatif", d, "--horizon-hours", "2", "--conf", str(conf), "--gc-wait-ms", "600000"]) == 0
    text = capsys.readouterr().out
    assert f"setting major_compaction_threshold = 0.6 (config {conf})" in text
    assert "setting gc_wait_time_ms = 600000 (flag)" in text
    assert "setting retention_time_minutes = 0 (default)" in text
    assert "topic t/forever/persistent/a: retention -1 min / -1 MB (namespace policy /admin/policies/t/forever)" in text
    assert "ledger_deleted" in text and "t/forever" not in text.split("ledger_deleted", 1)[1]
    assert main(["whatif", d, "--json", "--retention-minutes", "0", "--retention-mb", "0", "--no-conf"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["topics"]["t/forever/persistent/a"]["retention_source"] == "flag"
    assert out["settings"]["config_files"] == []
    page = tmp_path / "r.html"
    assert main(["report", d, "-o", str(page), "--conf", str(conf)]) == 0
    doc = page.read_text()
    assert "namespace policy /admin/policies/t/week" in doc and f"config {conf}" in doc
    assert "<td>major_compaction_threshold</td><td>0.6</td>" in doc
