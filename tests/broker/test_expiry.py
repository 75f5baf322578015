"""Message TTL, checked against the broker's rules: expiry by ledger close time then by entry time
(broker timestamp first, OpFindNewest's probing order), properties kept, plan/execute and dry runs,
refusal of inconsistent inputs; and TTL followed by retention reclaiming the expired data."""

from __future__ import annotations

import pulsarkit as pk
import pytest
from helpers import T0, TIMESTAMP_INTERCEPTOR, entry
from helpers import ml_config as _cfg
from pulsarkit.broker import expiry, managed_ledger_interceptor
from pulsarkit.managed_ledger import Position, trim

NAME = "public/default/persistent/events"


def ml_of(store, **kw) -> pk.ManagedLedger:
    return store.managed_ledger(NAME, _cfg(**kw))


def test_ttl_expires_whole_ledgers_by_close_time_not_client_clock(store, clock) -> None:
    ml = ml_of(store, max_entries_per_ledger=3)
    future = T0 + 86_400_000  # producers whose clocks run a day ahead
    ps = [ml.add_entry(entry(future)) for _ in range(3)]  # ledger A closes at T0
    clock.t += 60_000
    ps += [ml.add_entry(entry(future)) for _ in range(3)]  # ledger B closes at T0 + 60 s
    ps += [ml.add_entry(entry(future)) for _ in range(2)]  # current ledger
    c = ml.open_cursor("sub", "earliest")
    clock.t = T0 + 30_000 + 1
    r = expiry.expire_messages(c, ttl_seconds=30)
    # A closed more than 30 s ago, B did not; the entry-time step finds nothing (future timestamps)
    assert r.by_ledger_close_time == ps[2] and r.by_entry_time is None
    assert c.mark_delete_position == ps[2] and r.expired_entries == 3
    clock.t = T0 + 90_001
    r = expiry.expire_messages(c, ttl_seconds=30)
    assert r.by_ledger_close_time == ps[5] and c.mark_delete_position == ps[5]
    assert r.previous_mark_delete == ps[2] and r.expired_entries == 3


def test_ttl_uses_broker_timestamp_when_present(store, clock) -> None:
    ml = ml_of(store, managed_ledger_interceptor=managed_ledger_interceptor((TIMESTAMP_INTERCEPTOR,), clock))
    old = T0 - 3_600_000
    ps = [ml.add_entry(entry(old)) for _ in range(3)]  # old publish time, broker time T0
    c = ml.open_cursor("sub", "earliest")
    clock.t = T0 + 59_000
    r = expiry.expire_messages(c, ttl_seconds=60)
    assert r.by_entry_time is None and c.mark_delete_position == Position(ps[0].ledger_id, -1)
    clock.t = T0 + 60_001
    r = expiry.expire_messages(c, ttl_seconds=60)
    assert r.by_entry_time == ps[2] and c.mark_delete_position == ps[2] and r.expired_entries == 3

    # without broker entry metadata the publish time decides
    ml2 = store.managed_ledger("public/default/persistent/plain", pk.ManagedLedgerConfig())
    q = [ml2.add_entry(entry(clock.t - 120_000)), ml2.add_entry(entry(clock.t - 10_000))]
    c2 = ml2.open_cursor("sub", "earliest")
    assert expiry.expire_messages(c2, ttl_seconds=60).by_entry_time == q[0]
    assert c2.mark_delete_position == q[0]


def test_ttl_search_probes_like_op_find_newest(store, clock) -> None:
    ml = ml_of(store)
    now = T0 + 1_000_000
    expired, fresh = now - 100_000, now
    # expired pattern T F T T T F F: first matches, last does not, then mid 3 (T), mid 5 (F), mid 4 (T)
    pattern = [expired, fresh, expired, expired, expired, fresh, fresh]
    ps = [ml.add_entry(entry(t)) for t in pattern]
    c = ml.open_cursor("sub", "earliest")
    clock.t = now
    r = expiry.expire_messages(c, ttl_seconds=60)
    assert r.by_entry_time == ps[4]  # the unexpired entry 1 is acknowledged with them, as in Pulsar
    # a first entry that has not expired stops the search (apache/pulsar#5579)
    ml2 = store.managed_ledger("public/default/persistent/b", pk.ManagedLedgerConfig())
    q = [ml2.add_entry(entry(t)) for t in (fresh, expired, expired)]
    c2 = ml2.open_cursor("sub", "earliest")
    assert expiry.expire_messages(c2, 60).by_entry_time is None
    assert c2.mark_delete_position == Position(q[0].ledger_id, -1)


def test_ttl_keeps_properties_absorbs_deleted_ranges_and_dry_run_changes_nothing(store, clock) -> None:
    ml = ml_of(store)
    ps = [ml.add_entry(entry(T0)) for _ in range(3)] + [ml.add_entry(entry(T0 + 500_000)) for _ in range(3)]
    c = ml.open_cursor("sub", "earliest")
    c.mark_delete(ps[0], {"dedup-producer": 41})
    c.delete([ps[3], ps[4]])
    clock.t = T0 + 120_000
    info_before = store.metadata.cursor_info(NAME, "sub")
    dry = expiry.expire_messages(c, 60, dry_run=True)
    assert store.metadata.cursor_info(NAME, "sub") == info_before
    assert c.mark_delete_position == ps[0] and c.individually_deleted_ranges == [(ps[2], ps[4])]
    real = expiry.expire_messages(c, 60)
    assert (dry.mark_delete, dry.expired_entries, dry.by_entry_time) == (
        real.mark_delete,
        real.expired_entries,
        real.by_entry_time,
    )
    # entries 1, 2 expired; the deleted 3, 4 that follow are absorbed into the mark-delete
    assert real.by_entry_time == ps[2] and c.mark_delete_position == ps[4]
    assert c.properties == {"dedup-producer": 41} and real.expired_entries == 2


def test_ttl_zero_negative_and_inconsistent_cursor(store, clock) -> None:
    ml = ml_of(store)
    ps = [ml.add_entry(entry(T0 - 10**9)) for _ in range(2)]
    c = ml.open_cursor("sub", "earliest")
    clock.t = T0 + 10**9
    r = expiry.expire_messages(c, 0)
    assert r.by_entry_time is None and r.by_ledger_close_time is None and r.expired_entries == 0
    with pytest.raises(pk.LifecycleError):
        expiry.expire_messages(c, -1)
    c._md = Position(ps[1].ledger_id, 50)  # a cursor past the end: refuse rather than guess
    with pytest.raises(pk.LifecycleError):
        expiry.expire_messages(c, 10)
    c._md = Position(ps[0].ledger_id, -1)
    results = expiry.apply_ttl(ml, 10)
    assert [x.cursor for x in results] == ["sub"] and c.mark_delete_position == ps[1]


def test_ttl_then_retention_reclaims_expired_data(store, clock) -> None:
    ml = ml_of(store, max_entries_per_ledger=2)
    ps = [ml.add_entry(entry(T0)) for _ in range(4)]
    c = ml.open_cursor("sub", "earliest")
    clock.t = T0 + 3_600_001
    expiry.apply_ttl(ml, 3600)
    assert c.mark_delete_position == ps[3]
    r = trim.trim_ledgers(ml, retention_time_ms=0, retention_size_mb=-1)
    assert r.deleted_ids == [ps[0].ledger_id, ps[2].ledger_id]
