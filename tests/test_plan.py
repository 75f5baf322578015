"""The one plan shape (``pulsarkit.plan``): every maintenance operation's plan is a frozen dataclass
with a reason per item that goes through JSON and back unchanged; a malformed or tampered plan file
is refused with a ``PlanFormatError`` naming the field (one line and exit 1 from the CLI); a dry run
is the plan alone; a plan made on a state that changed is refused with nothing done."""

from __future__ import annotations

import dataclasses
import json

import pulsarkit as pk
import pytest
from helpers import T0, entry
from helpers import ml_config as _cfg
from pulsarkit.analysis.orphans import OrphanCleanupPlan, cleanup_plan
from pulsarkit.bookkeeper.gc import GarbageCollector, GcConfig, GcPlan, GcRequest
from pulsarkit.bookkeeper.gc_cluster import GcPlans, plan_bookies
from pulsarkit.broker import expiry
from pulsarkit.broker.compaction import CompactionOptions, CompactionPlan, Compactor
from pulsarkit.broker.topic_name import COMPACTION_CURSOR
from pulsarkit.cli import EXIT_ERROR, main
from pulsarkit.errors import CursorNotFoundError, LifecycleError, PlanFormatError, PulsarkitError, StalePlanError
from pulsarkit.managed_ledger import Position, trim
from pulsarkit.managed_ledger.ledger_handle import LedgerHandle
from pulsarkit.managed_ledger.trim import TrimPlan
from pulsarkit.plan import FORMAT_VERSION, Plan
from pulsarkit.scan.datadir import open_data_dir

NAME = "public/default/persistent/plans"
GC = dict(
    compaction_rate_by_entries=0,
    gc_wait_time_ms=1000,
    minor_compaction_interval_s=1,
    major_compaction_interval_s=2,
    major_compaction_threshold=0.9,
    disk_usage_warn_threshold=1.01,
    disk_usage_threshold=1.01,
)


def _keyed(ml, n, keys=5):
    for i in range(n):
        md = pk.message_metadata("p", i, T0 + i, partition_key=f"k{i % keys}")
        ml.add_entry(pk.encode_entry(md, b"v%d" % i))


def _store_with_everything(root, clock):
    """A store where every operation has something to plan: consumed ledgers, an old backlog, a
    deleted topic's bytes on the bookie, keys to compact."""
    store = pk.Store.open(root, clock=clock, log_size_limit=64 << 10)
    ml = store.managed_ledger(NAME, _cfg(max_entries_per_ledger=5, retention_time_ms=0))
    sub = ml.open_cursor("sub", "earliest")
    _keyed(ml, 23)
    sub.mark_delete(Position(ml.ledgers()[1].ledger_id, 4))
    gone = store.managed_ledger("public/default/persistent/gone")
    for i in range(40):
        gone.add_entry(entry(T0 + i, b"x" * 2000))
    store.flush()
    gone.delete()
    owner = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": b"public/x/y/nobody"}
    orphan = LedgerHandle.create(store, owner, "CRC32C")  # its managed ledger does not exist: owner_gone
    orphan.add_entry(entry(T0, b"o"))
    orphan.close()
    store.flush()
    clock.t += 3_600_000
    return store, ml


@pytest.fixture
def world(tmp_path, clock):
    store, ml = _store_with_everything(tmp_path / "d", clock)
    yield store, ml
    store.close()


def _every_plan(store, ml, root) -> list[Plan]:
    gc = GarbageCollector(store.bookie.dirs[0], store.metadata, GcConfig(**GC), fsync=False)
    plans: list[Plan] = [
        trim.plan(ml),
        expiry.plan(ml, 60),
        gc.plan(GcRequest(force=True)),
        plan_bookies(store.bookie.dirs, store.metadata, GcConfig(**GC), GcRequest(force=True)),
        Compactor(store, ml).plan(),
    ]
    return plans


def test_every_plan_kind_round_trips_through_json_with_a_reason_per_item(world, tmp_path):
    store, ml = world
    plans = _every_plan(store, ml, tmp_path / "d")
    store.flush()
    with open_data_dir(tmp_path / "d") as dd:
        plans.append(cleanup_plan(dd, include_review=True))
    kinds = set()
    for p in plans:
        assert dataclasses.is_dataclass(p) and p.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert p.items, f"{p.kind}: the test store gives every operation something to do"
        assert all(isinstance(r, str) and r for r in p.reasons()), p.kind
        text = p.to_json()
        doc = json.loads(text)
        assert doc["kind"] == p.kind and doc["format_version"] == FORMAT_VERSION
        back = type(p).from_json(text)
        assert back == p and type(back) is type(p)
        assert Plan.from_json(text) == p  # the base reads any kind
        assert back.to_json() == text
        kinds.add(p.kind)
    assert kinds == {"retention", "ttl", "bookie-gc", "bookie-gc-plans", "topic-compaction", "orphan-ledger-cleanup"}


def _bad(cls, text, match, field=None):
    with pytest.raises(PlanFormatError, match=match) as e:
        cls.from_json(text)
    assert isinstance(e.value, PulsarkitError)
    if field is not None:
        assert e.value.field == field
    return e.value


def test_malformed_plans_name_the_field(world, tmp_path):
    store, ml = world
    gc = GarbageCollector(store.bookie.dirs[0], store.metadata, GcConfig(**GC), fsync=False)
    text = plan_bookies(store.bookie.dirs, store.metadata, GcConfig(**GC), GcRequest(force=True)).to_json()
    doc = json.loads(text)
    assert doc["bookies"][0]["compaction"]["logs"]
    _bad(GcPlans, text[: len(text) // 2], "not valid JSON")  # truncated
    _bad(GcPlans, b"\xff\xfe", "not valid JSON")
    _bad(GcPlans, "[" * 100_000 + "]" * 100_000, "nests too deeply")  # never a RecursionError
    nested: object = 0
    for _ in range(40):  # parses, but deeper than any plan
        nested = [nested]
    _bad(GcPlans, json.dumps({"kind": "bookie-gc-plans", "x": nested}), "deeply")
    _bad(GcPlans, "[]", "a JSON object", "")
    _bad(GcPlans, text.replace('"threshold": 0.9', '"threshold": NaN'), "NaN is not a number")
    _bad(GcPlans, json.dumps({**doc, "kind": "retention"}), "not a 'bookie-gc-plans' plan", "kind")
    _bad(Plan, json.dumps({**doc, "kind": "no-such-thing"}), "unknown plan kind", "kind")
    _bad(GcPlans, json.dumps({**doc, "format_version": 99}), "format version 99", "format_version")
    missing = json.loads(text)
    del missing["bookies"][0]["compaction"]["logs"][0]["log_id"]
    _bad(GcPlans, json.dumps(missing), "is missing", "bookies[0].compaction.logs[0].log_id")
    wrong = json.loads(text)
    wrong["bookies"][0]["compaction"]["logs"][0]["log_id"] = "7"
    _bad(GcPlans, json.dumps(wrong), "expected an integer, got a string", "bookies[0].compaction.logs[0].log_id")
    wrong["bookies"][0]["compaction"]["logs"][0]["log_id"] = True
    _bad(GcPlans, json.dumps(wrong), "expected an integer, got a boolean")
    wrong = json.loads(text)
    wrong["bookies"][0]["ledgers_to_delete"] = {"0": 1}
    _bad(GcPlans, json.dumps(wrong), "expected an array, got an object", "bookies[0].ledgers_to_delete")
    extra = json.loads(text)
    extra["bookies"][0]["disk_pressure"]["sneaky"] = 1
    _bad(GcPlans, json.dumps(extra), "not a field of DiskPressure", "bookies[0].disk_pressure.sneaky")
    # an int-keyed mapping with a key that is no int; a Position that is not a pair
    t = json.loads(trim.plan(ml).to_json())
    t["cursor_advances"] = {"sub": [1]}
    _bad(TrimPlan, json.dumps(t), "expected an array of 2", "cursor_advances.sub")
    assert GcPlan.from_json(gc.plan(GcRequest(force=True)).to_json()).compaction.logs  # and a good one reads


def test_cli_plan_files_that_are_malformed_give_one_line_and_exit_1(world, tmp_path, capsys):
    store, _ = world
    store.close()
    root = tmp_path / "d"
    good = tmp_path / "gc.json"
    assert main(["gc", str(root), "--force", "--disk-usage", "0.5", "--plan", str(good)]) == 0
    orphans = tmp_path / "orphans.json"
    assert main(["orphans", str(root), "--plan", str(orphans)]) == 0
    assert GcPlans.from_json(good.read_text()).bookies and OrphanCleanupPlan.from_json(orphans.read_text()).items
    capsys.readouterr()
    text = good.read_text()
    deep = "[" * 50_000 + "]" * 50_000
    cases = {
        "truncated": text[:-20],
        "types": text.replace('"forced": true', '"forced": "yes"'),
        "missing": json.dumps({k: v for k, v in json.loads(text).items() if k != "bookies"}),
        "deep": deep,
        "kind": orphans.read_text(),
    }
    assert cases["types"] != text
    for name, body in cases.items():
        bad = tmp_path / f"{name}.json"
        bad.write_text(body)
        for argv in (["gc", str(root), "--execute", "--from-plan", str(bad)], ["orphans-cleanup", str(bad)]):
            if name == "kind" and argv[0] == "orphans-cleanup":
                continue  # an orphan plan is right there
            assert main(argv) == EXIT_ERROR, (name, argv)
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "error:" in err and str(bad) in err, (name, err)
    bad = tmp_path / "kind.json"
    bad.write_text(text)
    assert main(["orphans-cleanup", str(bad)]) == EXIT_ERROR
    assert "not a 'orphan-ledger-cleanup' plan" in capsys.readouterr().err
    assert main(["orphans-cleanup", str(tmp_path / "absent.json")]) == EXIT_ERROR
    assert "cannot read the plan" in capsys.readouterr().err


def test_a_dry_run_is_the_plan_alone(world, tmp_path):
    store, ml = world
    p = trim.plan(ml)
    r = trim.trim_ledgers(ml, dry_run=True)
    assert (
        r.dry_run
        and r.deleted_ids == [it.ledger_id for it in p.items]
        and r.reasons == {it.ledger_id: it.reason for it in p.items}
    )
    assert expiry.apply_ttl(ml, 60, dry_run=True) == expiry.plan(ml, 60).cursors
    gc = GarbageCollector(store.bookie.dirs[0], store.metadata, GcConfig(**GC), clock_ms=store.clock, fsync=False)
    assert gc.run(GcRequest(force=True), dry_run=True) == gc.plan(GcRequest(force=True))
    (dry,) = store.garbage_collect(GcConfig(**GC), force=True, dry_run=True)
    assert dry.result is None and dry.plan == gc.plan(GcRequest(force=True))
    before = (ml.ledgers(), [c.name for c in ml.cursors()], store.metadata.ledger_ids())
    cp = Compactor(store, ml).plan()
    assert cp.keys == 5 and cp.horizon == ml.last_confirmed_entry
    assert (ml.ledgers(), [c.name for c in ml.cursors()], store.metadata.ledger_ids()) == before  # nothing written
    with pytest.raises(CursorNotFoundError):
        ml.cursor(COMPACTION_CURSOR)


def test_a_plan_made_on_another_state_is_refused_with_nothing_done(world, clock):
    store, ml = world
    # retention
    p = trim.plan(ml)
    assert p.items
    _keyed(ml, 1)
    ledgers = ml.ledgers()
    with pytest.raises(StalePlanError, match="changed since"):
        trim.execute(ml, p)
    assert ml.ledgers() == ledgers and issubclass(StalePlanError, LifecycleError)
    # TTL
    t = expiry.plan(ml, 60)
    assert any(r.mark_delete > r.previous_mark_delete for r in t.cursors)
    sub = ml.cursor("sub")
    moved = Position(ml.ledgers()[2].ledger_id, 0)
    sub.mark_delete(moved)
    with pytest.raises(StalePlanError, match="moved"):
        expiry.execute(ml, t)
    assert sub.mark_delete_position == moved
    # topic compaction: a message published after the plan
    c = Compactor(store, ml)
    cp = c.plan()
    _keyed(ml, 1)
    ids = store.metadata.ledger_ids()
    with pytest.raises(StalePlanError, match="changed since the compaction plan"):
        c.execute(cp)
    assert store.metadata.ledger_ids() == ids
    with pytest.raises(CursorNotFoundError):
        ml.cursor(COMPACTION_CURSOR)
    # a plan read back from its file executes like the one in memory, once
    cp = c.plan()
    done = Compactor(store, ml).execute(CompactionPlan.from_json(cp.to_json()))
    assert done.keys == cp.keys and done.horizon == cp.horizon and done.ledger_id is not None
    with pytest.raises(StalePlanError):
        c.execute(cp)  # the compaction moved the cursor: this plan's state is gone
    with pytest.raises(LifecycleError, match="made with"):
        Compactor(store, ml, CompactionOptions(retain_null_key=True)).execute(Compactor(store, ml).plan())
