"""Retention, checked against the broker's rules: the slowest-cursor bound, time and size limits with
-1/0, the current ledger kept, deletion from metadata and bookie, plan/execute and dry runs, refusal
of inconsistent inputs, trimming on rollover."""

from __future__ import annotations

import pulsarkit as pk
import pytest
from helpers import T0, MiB
from helpers import ml_config as _cfg
from pulsarkit.managed_ledger import Position, trim
from pulsarkit.metadata import ledger_path
from pulsarkit.proto import LedgerMetadataFormat

NAME = "public/default/persistent/events"


def ml_of(store, **kw) -> pk.ManagedLedger:
    return store.managed_ledger(NAME, _cfg(**kw))


def _fill(ml, ledgers: int, per_ledger: int, size: int = 10) -> list[Position]:
    return [ml.add_entry(b"x" * size) for _ in range(ledgers * per_ledger)]


def test_retention_zero_without_cursors_deletes_everything_but_current(store, clock) -> None:
    ml = ml_of(store, max_entries_per_ledger=2)
    ps = _fill(ml, 3, 2)
    ml.add_entry(b"current")
    ids = [li.ledger_id for li in ml.ledgers()]
    closed, current = ids[:-1], ids[-1]
    clock.t += 1
    r = trim.trim_ledgers(ml)  # config defaults: 0 minutes, 0 MB
    assert r.deleted_ids == closed and r.slowest_reader_ledger_id == current + 1
    assert [li.ledger_id for li in ml.ledgers()] == [current]
    assert ml.number_of_entries == 1 and ml.total_size == 7
    for lid in closed:
        assert store.metadata.get(ledger_path(lid)) is None and not store.bookie.ledger_exists(lid)
    info, _ = store.metadata.managed_ledger_info(NAME)
    assert [li.ledgerId for li in info.ledgerInfo] == [current]
    assert ml.first_position == Position(current, 0)
    assert ml.read(ps[0], 10) == [(Position(current, 0), b"current")]
    # the current ledger survives even a truncate
    assert trim.trim_ledgers(ml, truncate=True).deleted_ids == []


def test_retention_unlimited_keeps_everything(store, clock) -> None:
    ml = ml_of(store, max_entries_per_ledger=2)
    _fill(ml, 3, 2)
    clock.t += 10**9
    assert trim.trim_ledgers(ml, -1, -1).deleted == []
    assert len(ml.ledgers()) == 4


def test_retention_by_time(store, clock) -> None:
    ml = ml_of(store, max_entries_per_ledger=1)
    ml.add_entry(b"a")  # closes at T0
    clock.t = T0 + 60_000
    ml.add_entry(b"b")  # closes at T0 + 60 s
    clock.t = T0 + 120_000
    ml.add_entry(b"c")  # closes at T0 + 120 s
    ids = [li.ledger_id for li in ml.ledgers()]
    clock.t = T0 + 150_000
    # ages now: 150 s, 90 s, 30 s
    r = trim.trim_ledgers(ml, retention_time_ms=89_999, retention_size_mb=-1, dry_run=True)
    assert r.deleted_ids == ids[:2] and r.reasons == {ids[0]: "expired", ids[1]: "expired"}
    r = trim.trim_ledgers(ml, retention_time_ms=90_000, retention_size_mb=-1)
    assert r.deleted_ids == ids[:1]  # "now - closeTime > time": 90 s is not more than 90 s
    r = trim.apply_retention(ml, retention_time_minutes=1, retention_size_mb=-1, now_ms=T0 + 181_000)
    assert r.deleted_ids == [ids[1], ids[2]] and r.retention_time_ms == 60_000


def test_retention_by_size_stops_when_what_is_left_fits(store, clock) -> None:
    ml = ml_of(store, max_entries_per_ledger=2)
    _fill(ml, 4, 2, size=256 * 1024)  # four closed ledgers of 512 KiB, an empty current one
    ids = [li.ledger_id for li in ml.ledgers()]
    assert ml.total_size == 2 * MiB and len(ids) == 5
    r = trim.trim_ledgers(ml, retention_time_ms=-1, retention_size_mb=1)
    # 2 MiB - 0.5 >= 1 -> delete; 2 - 1.0 >= 1 -> delete; 2 - 1.5 < 1 -> stop
    assert r.deleted_ids == ids[:2] and r.reasons == {ids[0]: "over_quota", ids[1]: "over_quota"}
    assert r.total_size_after == ml.total_size == MiB
    # size 0 with unlimited time still deletes every consumed ledger
    assert trim.trim_ledgers(ml, retention_time_ms=-1, retention_size_mb=0).deleted_ids == ids[2:4]


def test_retention_is_bounded_by_the_slowest_cursor(store, clock) -> None:
    ml = ml_of(store, max_entries_per_ledger=3)
    ps = _fill(ml, 3, 3)  # ledgers A B C closed, empty current
    A, B, C = ps[0].ledger_id, ps[3].ledger_id, ps[6].ledger_id
    fast = ml.open_cursor("fast", "earliest")
    slow = ml.open_cursor("slow", "earliest")
    fast.mark_delete(ps[8])
    clock.t += 1
    assert trim.trim_ledgers(ml).deleted == []  # slow has consumed nothing
    slow.mark_delete(ps[4])  # in the middle of B
    r = trim.trim_ledgers(ml)
    assert r.slowest_reader_ledger_id == B and r.deleted_ids == [A]
    slow.mark_delete(ps[5])  # B's last entry: B is fully consumed
    r = trim.trim_ledgers(ml)
    assert r.slowest_reader_ledger_id == B + 1 and r.deleted_ids == [B]
    slow.mark_delete(ps[8])
    assert trim.trim_ledgers(ml).deleted_ids == [C]
    assert [li.ledger_id for li in ml.ledgers()] == [ml.current_ledger_id]
    assert slow.mark_delete_position == ps[8] and slow.number_of_entries_in_backlog == 0


def test_retention_refuses_inconsistent_inputs(store, clock) -> None:
    ml = ml_of(store, max_entries_per_ledger=1)
    ps = _fill(ml, 3, 1)
    clock.t += 1
    with pytest.raises(pk.LifecycleError):
        trim.trim_ledgers(ml, retention_time_ms=-2)
    with pytest.raises(pk.LifecycleError):
        trim.trim_ledgers(ml, retention_size_mb=1.5)  # type: ignore[arg-type]
    lid = ps[1].ledger_id
    lmd, st = store.metadata.ledger_metadata(lid)
    lmd.customMetadata[2].value = b"public/default/persistent/someone-else"
    store.metadata.put_ledger_metadata(lid, lmd, st.version)
    with pytest.raises(pk.LifecycleError, match="someone-else"):
        trim.trim_ledgers(ml)
    assert len(ml.ledgers()) == 4 and all(store.bookie.ledger_exists(p.ledger_id) for p in ps)
    lmd.customMetadata[2].value = NAME.encode()
    lmd.state = LedgerMetadataFormat.OPEN
    store.metadata.put_ledger_metadata(lid, lmd, st.version + 1)
    with pytest.raises(pk.LifecycleError, match="still open"):
        trim.trim_ledgers(ml)
    lmd.state = LedgerMetadataFormat.CLOSED
    store.metadata.put_ledger_metadata(lid, lmd, st.version + 2)
    # a ledger whose BookKeeper metadata is already gone is simply dropped
    store.metadata.delete_ledger_metadata(ps[0].ledger_id)
    assert trim.trim_ledgers(ml).deleted_ids == [p.ledger_id for p in ps]


def test_dry_run_plans_exactly_what_the_run_does(store, clock) -> None:
    ml = ml_of(store, max_entries_per_ledger=2)
    ps = _fill(ml, 4, 2)
    c = ml.open_cursor("sub", "earliest")
    c.mark_delete(ps[5])
    clock.t += 1
    before = store.metadata.managed_ledger_info(NAME)
    plan = trim.trim_ledgers(ml, dry_run=True)
    assert store.metadata.managed_ledger_info(NAME) == before and len(ml.ledgers()) == 5
    done = trim.trim_ledgers(ml)
    assert plan.deleted == done.deleted and plan.deleted_ids == [
        ps[0].ledger_id,
        ps[2].ledger_id,
        ps[4].ledger_id,
    ]
    assert (plan.total_size_after, plan.slowest_reader_ledger_id) == (
        done.total_size_after,
        done.slowest_reader_ledger_id,
    )


def test_trim_on_rollover_like_the_broker(store, clock) -> None:
    ml = ml_of(store, max_entries_per_ledger=2, trim_on_rollover=True)
    clock.t += 1
    ps = _fill(ml, 3, 2)
    # each rollover trims: with no cursor and 0/0 retention nothing but the current ledger stays
    assert [li.ledger_id for li in ml.ledgers()] == [ps[-1].ledger_id + 1]
    info, _ = store.metadata.managed_ledger_info(NAME)
    assert [li.ledgerId for li in info.ledgerInfo] == [ps[-1].ledger_id + 1]
