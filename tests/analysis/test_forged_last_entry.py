"""Memory bounded by the data, not by a claim in it (issue 21, item 5): one ledger record whose
metadata claims ``lastEntryId`` 4·10^9 once made ``messages``, ``transactions`` and the Spark source
grow one issue per missing entry id (and the scan plan an 8-byte location per id) until MemoryError.
Each read runs in a child process whose peak resident memory is measured; the gap it reports must
be one issue with its count, and every real message still read. Then (item 4) metadata that the
bookies contradict: `--strict` exits 3."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pulsarkit as pk
import pytest
from datadir_fixtures import ORDERS, TC_LOG, forge_last_entry
from hypothesis import given, settings
from hypothesis import strategies as st
from pulsarkit.analysis.messages import messages_table
from pulsarkit.analysis.orphan_cleanup import OrphanCleanupError
from pulsarkit.analysis.orphan_cleanup import execute as execute_cleanup
from pulsarkit.analysis.orphans import cleanup_plan, find_orphans
from pulsarkit.cli import main
from pulsarkit.scan.records import held_pieces

FORGED = 4_000_000_000
#: a generous bound: the interpreter, pyarrow and the native module take ~150 MB; one location per
#: claimed entry would be 32 GB
PEAK_BYTES = 500 << 20


@pytest.fixture(scope="module")
def forged(synthetic, tmp_path_factory) -> tuple[Path, Path, dict[str, tuple[int, int]]]:
    """A copy of the synthetic directory whose first orders ledger and first coordinator-log ledger
    claim ``lastEntryId`` 4·10^9: per forged ledger, the entries it really holds."""
    root, _ = synthetic
    copy = tmp_path_factory.mktemp("forged") / "data"
    return root, copy, forge_last_entry(root, copy, {"orders": ORDERS, "tc_log": TC_LOG}, FORGED)


def _run(body: str, *args: str) -> dict:
    """``body`` (defining ``result``) in a child process: its result and peak resident bytes."""
    code = textwrap.dedent(body) + textwrap.dedent("""
        import json, resource, sys
        result["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps(result, default=str))
    """)
    # address space capped well above the bound: a regression fails fast instead of swapping
    cap = "import resource; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
    out = subprocess.run(
        [sys.executable, "-c", cap + code, *args], capture_output=True, text=True, timeout=600, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def _gap_issues(issues: list[dict], lid: int) -> list[dict]:
    return [i for i in issues if i["ledger_id"] == lid and i["kind"] == "unreadable_entry"]


def test_messages_read_every_real_message_and_report_the_gap_once(forged):
    root, copy, held = forged
    lid, last = held["orders"]
    body = """
        import sys
        from pulsarkit.scan.datadir import open_data_dir
        from pulsarkit.analysis.messages import messages_table
        result = {}
        for name, path in (("clean", sys.argv[1]), ("forged", sys.argv[2])):
            dd = open_data_dir(path)
            t = messages_table(dd)
            result[name] = sorted(zip(t.column("ledger_id").to_pylist(), t.column("entry_id").to_pylist(),
                                      t.column("batch_index").to_pylist()))
            result[name + "_issues"] = [dict(vars(i)) for i in dd.issues]
    """
    got = _run(body, str(root), str(copy))
    assert got["forged"] == got["clean"] and got["clean"]
    gap = _gap_issues(got["forged_issues"], lid)
    assert len(gap) == 1, gap
    assert (gap[0]["entry_id"], gap[0]["count"]) == (last + 1, FORGED - last)
    assert f"entries {last + 1}..{FORGED} ({FORGED - last} entries)" in gap[0]["message"]
    assert not _gap_issues(got["clean_issues"], lid)
    assert got["peak"] < PEAK_BYTES


def test_transactions_and_the_cli_finish_with_one_issue(forged):
    root, copy, held = forged
    lid, last = held["tc_log"]
    body = """
        import sys
        from pulsarkit.scan.datadir import open_data_dir
        from pulsarkit.analysis.transactions import transactions_table
        result = {}
        for name, path in (("clean", sys.argv[1]), ("forged", sys.argv[2])):
            dd = open_data_dir(path)
            t = transactions_table(dd, now_ms=100_000).to_pylist()
            result[name] = sorted((r["txn"], r["state"]) for r in t)
            result[name + "_issues"] = [dict(vars(i)) for i in dd.issues]
    """
    got = _run(body, str(root), str(copy))
    assert got["forged"] == got["clean"] and got["clean"]
    gap = _gap_issues(got["forged_issues"], lid)
    # the coordinator log is read more than once (states, then the live records): one issue per read
    assert gap and all((g["entry_id"], g["count"]) == (last + 1, FORGED - last) for g in gap)
    assert len(gap) <= 2
    assert got["peak"] < PEAK_BYTES
    cli = _run(
        """
        import sys
        from pulsarkit.cli import main
        result = {"code": main(["messages", sys.argv[1], "--strict"])}
        """,
        str(copy),
    )
    assert cli["code"] == 3 and cli["peak"] < PEAK_BYTES


def test_scan_plan_and_read_as_the_spark_source_and_export_use_them(forged):
    root, copy, held = forged
    lid, last = held["orders"]
    body = """
        import sys
        from pulsarkit.scan import plan, read_partition
        result = {"issues": []}
        for name, path in (("clean", sys.argv[1]), ("forged", sys.argv[2])):
            p = plan([path], min_partitions=4)
            result[name + "_segments"] = sum(len(s.locations) for q in p.partitions for s in q.segments)
            issues = []
            rows = []
            for task in p.tasks():
                for b in read_partition(task, columns=["ledger_id", "entry_id", "batch_index"],
                                        on_issue=lambda i: issues.append([i.kind, i.ledger_id, i.entry_id, i.message,
                                                                                    i.path, i.offset, i.count])):
                    rows += zip(*(c.to_pylist() for c in b.columns))
            result[name] = sorted(rows)
            result[name + "_issues"] = issues
            e = plan([path], kind="entries")
            errs = [r for t in e.tasks() for b in read_partition(t, kind="entries") for r in b.to_pylist()
                    if r["error"]]
            result[name + "_entry_errors"] = [(r["ledger_id"], r["entry_id"], r["error"]) for r in errs]
    """
    got = _run(body, str(root), str(copy))
    assert got["forged"] == got["clean"] and got["clean"]
    # the plan is sized by what the bookie holds: no location per claimed entry
    assert got["forged_segments"] == got["clean_segments"]
    gap = [i for i in got["forged_issues"] if i[1] == lid]
    assert len(gap) == 1 and gap[0][0] == "unreadable_entry" and gap[0][2] == last + 1 and gap[0][6] == FORGED - last
    errors = [e for e in got["forged_entry_errors"] if e[0] == lid]
    assert len(errors) == 1 and errors[0][1] == last + 1 and f"({FORGED - last} entries)" in errors[0][2]
    assert got["peak"] < PEAK_BYTES


def test_strict_exits_3_when_metadata_and_bookies_disagree(synthetic, tmp_path, capsys):
    """Issue 21 item 4: a topic's ledger whose metadata outlived its entries on every given bookie, and
    a ledger its managed ledger lists that has no metadata, are reported; ``--strict`` exits 3."""
    root, _ = synthetic
    with pk.open_data_dir(root) as dd:
        first, second = dd.ml_ledgers(ORDERS)[:2]
        assert dd.issues == []
    no_data, no_meta = tmp_path / "no-data", tmp_path / "no-meta"
    shutil.copytree(root, no_data)
    bk = pk.bookkeeper.DbLedgerStorage(no_data / "bookie")
    bk.delete_ledger(first)
    bk.close()
    shutil.copytree(root, no_meta)
    md = pk.metadata.MetadataStore(no_meta / "metadata")
    md.delete_ledger_metadata(second)
    md.close()
    for d in (no_data, no_meta):
        for p in d.rglob("LOCK"):
            p.unlink()
    for command in ("topics", "messages"):
        assert main([command, str(root), "--strict"]) == 0
        capsys.readouterr()
        assert main([command, str(no_data), "--strict"]) == 3
        assert f"ledger_data_missing: {no_data / 'metadata'}" in capsys.readouterr().err
        assert main([command, str(no_meta), "--strict"]) == 3
        assert f"ledger {second} of {ORDERS} has no metadata" in capsys.readouterr().err
        assert main([command, str(no_data)]) == 0  # without --strict: warned, not failed
        capsys.readouterr()
    # The seed's "missing ledgers": orphans names the ledger whose data is gone, and no cleanup runs on it.
    with pk.open_data_dir(no_data) as dd:
        found = {f.ledger_id: f for f in find_orphans(dd)}
        plan = cleanup_plan(dd, include_review=True)
    assert (found[first].category, found[first].verdict) == ("data_missing", "inconsistent")
    assert found[first].owner == ORDERS and "no given bookie holds any" in found[first].evidence
    assert first not in [i.ledger_id for i in plan.items]
    with pytest.raises(OrphanCleanupError, match=rf"refusing: ledgers \[{first}\].*data_missing"):
        execute_cleanup(plan, backup_dir=tmp_path / "backup")
    with pk.open_data_dir(root) as dd:
        assert not [f for f in find_orphans(dd) if f.category == "data_missing"]


def test_a_lost_entry_log_is_one_issue_per_run_of_entries(synthetic, tmp_path):
    """Entries the index places in an entry log that is gone: consecutive unreadable entries of a
    ledger for the same reason are one issue (first entry's file, the count), not one per entry."""
    root, _ = synthetic
    copy = tmp_path / "data"
    shutil.copytree(root, copy)
    for p in copy.rglob("LOCK"):
        p.unlink()
    logs = sorted((copy / "bookie" / "current").glob("*.log"))
    assert logs
    for p in logs:
        p.unlink()
    dd = pk.open_data_dir(copy)
    rows = messages_table(dd, ORDERS)
    lost = [i for i in dd.issues if i.kind == "unreadable_entry" and i.ledger_id in dd.ml_ledgers(ORDERS)]
    per_ledger = {}
    for i in lost:
        per_ledger.setdefault(i.ledger_id, []).append(i)
    expected = {lid: dd.ledgers[lid].entries - dd.ledgers[lid].journal_only_entries for lid in dd.ml_ledgers(ORDERS)}
    expected = {lid: n for lid, n in expected.items() if n > 0}
    assert {lid: sum(i.count for i in v) for lid, v in per_ledger.items()} == expected
    assert all(len(v) == 1 for v in per_ledger.values()), per_ledger
    assert any(i.count > 1 and f"entries {i.entry_id}..{i.entry_id + i.count - 1}" in str(i) for i in lost)
    assert rows.num_rows == 2  # the journal's two entries are all that is left


def _pieces_by_loop(held: list[int], first: int, last: int) -> list[tuple[int, int, bool]]:
    """``held_pieces`` as an entry-by-entry walk: the oracle of the column-wise version."""
    out: list[tuple[int, int, bool]] = []
    e, pending = first, None
    for x in [h for h in held if first <= h <= last]:
        if pending is not None and x == pending[1] + 1:
            pending = (pending[0], x)
            continue
        if pending is not None:
            out.append((*pending, True))
            e = pending[1] + 1
        if x > e:
            out.append((e, x - 1, False))
        pending = (x, x)
    if pending is not None:
        out.append((*pending, True))
        e = pending[1] + 1
    if e <= last:
        out.append((e, last, False))
    return out


@settings(max_examples=400, deadline=None)
@given(
    held=st.lists(st.integers(-3, 60), unique=True).map(sorted),
    first=st.integers(-5, 40),
    span=st.integers(-3, 40),
)
def test_held_pieces_are_the_entry_by_entry_runs(held: list[int], first: int, span: int) -> None:
    last = first + span
    got = held_pieces(held, first, last)
    assert got == _pieces_by_loop(held, first, last)
    # the pieces tile first..last exactly, alternating held and not
    assert all(a <= b for a, b, _ in got) and all(x[1] + 1 == y[0] for x, y in zip(got, got[1:]))
    assert all(x[2] != y[2] for x, y in zip(got, got[1:]))


def test_held_pieces_of_a_forged_range_are_few() -> None:
    assert held_pieces([0, 1, 2, 5], 0, 4 * 10**9) == [(0, 2, True), (3, 4, False), (5, 5, True), (6, 4 * 10**9, False)]
    assert held_pieces([], 0, -1) == [] and held_pieces([], 3, 7) == [(3, 7, False)]
