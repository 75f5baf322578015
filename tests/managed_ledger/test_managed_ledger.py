"""Managed ledgers and cursors over the embedded store: Pulsar's metadata layout and values,
rollover rules, recovery on reopen, cursors (mark-delete, properties, individual and batch-index
acks, reset), read-only opening, and the metadata store's own encodings."""

from __future__ import annotations

import struct
import sys
import threading

import pulsarkit as pk
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pulsarkit import metadata as mdmod
from pulsarkit.bookkeeper import pack_entry, unpack_entry
from pulsarkit.broker import managed_ledger_interceptor
from pulsarkit.managed_ledger import ManagedLedgerConfig, Position, ack_set_for, bitset_words
from pulsarkit.proto import (
    LedgerMetadataFormat,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    ManagedLedgerInfoMetadata,
    PositionInfo,
)

NAME = "public/default/persistent/orders"


def cfg(**kw) -> ManagedLedgerConfig:
    kw.setdefault("minimum_rollover_time_ms", 0)
    return ManagedLedgerConfig(**kw)


def reopen(store: pk.Store, path, clock) -> pk.Store:
    store.close()
    return pk.Store.open(path, clock=clock)


# ------------------------------------------------------------------------ writing and layout


def test_add_read_and_metadata_layout(store, clock, tmp_path) -> None:
    ml = store.managed_ledger(NAME, cfg(max_entries_per_ledger=3))
    positions = [ml.add_entry(b"m%d" % i) for i in range(7)]
    first = positions[0].ledger_id
    assert positions == [
        Position(first, 0),
        Position(first, 1),
        Position(first, 2),
        Position(first + 1, 0),
        Position(first + 1, 1),
        Position(first + 1, 2),
        Position(first + 2, 0),
    ]
    assert ml.read(positions[0], 100) == [(p, b"m%d" % i) for i, p in enumerate(positions)]
    assert ml.read(Position(first, 3), 2) == [
        (positions[3], b"m3"),
        (positions[4], b"m4"),
    ]  # past a ledger's end
    assert ml.read_entry(positions[5]) == b"m5"
    assert [(li.ledger_id, li.entries, li.size) for li in ml.ledgers()] == [
        (first, 3, 6),
        (first + 1, 3, 6),
        (first + 2, 1, 2),
    ]
    assert [li.timestamp for li in ml.ledgers()] == [clock.t, clock.t, 0]
    assert ml.number_of_entries == 7 and ml.total_size == 14

    # the ManagedLedgerInfo node, framed as RocksdbMetadataStore frames values
    raw = store.metadata._db.get(f"/managed-ledgers/{NAME}".encode())
    hsize, fmt, version, owner, _ctime, _mtime, eph = struct.unpack_from(">iiqqqqb", raw)
    assert (hsize, fmt, eph) == (41, 1, 0) and version >= 2 and owner == store.metadata.instance_id
    info = ManagedLedgerInfo.FromString(raw[41:])
    assert [(li.ledgerId, li.entries, li.size) for li in info.ledgerInfo] == [
        (first, 3, 6),
        (first + 1, 3, 6),
        (first + 2, 0, 0),
    ]

    # every data ledger has BookKeeper metadata v3 with Pulsar's custom metadata
    raw = store.metadata.get_data(mdmod.ledger_path(first))
    assert raw.startswith(b"BookieMetadataFormatVersion\t3\n")
    lmd, _ = store.metadata.ledger_metadata(first)
    assert lmd.state == LedgerMetadataFormat.CLOSED and lmd.lastEntryId == 2 and lmd.length == 6
    assert (
        lmd.digestType == LedgerMetadataFormat.CRC32C and lmd.ensembleSize == lmd.quorumSize == lmd.ackQuorumSize == 1
    )
    assert list(lmd.segment[0].ensembleMember) == ["127.0.0.1:3181"]
    assert {e.key: e.value for e in lmd.customMetadata} == {
        "application": b"pulsar",
        "component": b"managed-ledger",
        "pulsar/managed-ledger": NAME.encode(),
    }
    assert store.ledger_owner(first + 2) == NAME
    assert store.metadata.ledger_metadata(first + 2)[0].state == LedgerMetadataFormat.OPEN

    # entries on the bookie are packed by the client with CRC32C
    stored = store.bookie.read_entry(first + 1, 1)
    e = unpack_entry(stored, "CRC32C", ledger_id=first + 1, entry_id=1)
    assert (e.last_add_confirmed, e.length, e.payload) == (0, 4, b"m4")


def test_rollover_by_size(store) -> None:
    ml = store.managed_ledger(NAME, cfg(max_size_per_ledger_mb=1))
    chunk = b"x" * (300 * 1024)
    ids = [ml.add_entry(chunk).ledger_id for _ in range(8)]
    # 4 x 300 KiB reach 1 MiB: the 4th add closes the ledger
    assert ids == [ids[0]] * 4 + [ids[0] + 1] * 4
    assert ml.ledgers()[0].size == 4 * len(chunk)


def test_rollover_by_age_and_minimum_age(store, clock) -> None:
    ml = store.managed_ledger(NAME, cfg(maximum_rollover_time_ms=60_000, minimum_rollover_time_ms=0))
    a = ml.add_entry(b"a")
    clock.t += 59_000
    assert ml.add_entry(b"b").ledger_id == a.ledger_id
    clock.t += int(60_000 * 0.05) + 1_001  # past the maximum plus Pulsar's up-to-5 % jitter
    c = ml.add_entry(b"c")  # the add that finds the ledger full still goes into it, then it rolls
    assert c.ledger_id == a.ledger_id and ml.current_ledger_id == a.ledger_id + 1
    assert ml.ledgers()[0].entries == 3 and ml.add_entry(b"d").ledger_id == a.ledger_id + 1

    ml2 = store.managed_ledger("t/ns/persistent/min", cfg(max_entries_per_ledger=2, minimum_rollover_time_ms=10_000))
    ps = [ml2.add_entry(b"%d" % i) for i in range(5)]
    assert len({p.ledger_id for p in ps}) == 1  # full, but younger than the minimum
    clock.t += 10_001
    assert ml2.add_entry(b"late").ledger_id == ps[0].ledger_id  # this add finds it full and old enough
    assert ml2.add_entry(b"next").ledger_id == ps[0].ledger_id + 1


def test_idle_ledger_rolls_on_the_periodic_check(store, clock) -> None:
    ml = store.managed_ledger(NAME, cfg(maximum_rollover_time_ms=1000, rollover_jitter=0))
    p = ml.add_entry(b"a")
    assert not ml.roll_current_ledger_if_full()
    clock.t += 1000
    assert ml.roll_current_ledger_if_full()
    assert ml.current_ledger_id == p.ledger_id + 1
    assert ml.ledgers()[0].entries == 1


def test_reopen_recovers_open_ledger_and_drops_empty_ones(tmp_path, clock) -> None:
    path = tmp_path / "data"
    s = pk.Store.open(path, clock=clock)
    ml = s.managed_ledger(NAME, cfg())
    ps = [ml.add_entry(b"e%d" % i) for i in range(5)]
    ml.flush()
    lid = ps[0].ledger_id
    # simulate a broker that died: nothing closed, nothing persisted beyond the flush
    s.bookie.close()
    s.metadata.close()
    clock.t += 5_000
    s = pk.Store.open(path, clock=clock)
    ml = s.managed_ledger(NAME, cfg())
    infos = ml.ledgers()
    assert infos[0] == pk.managed_ledger.LedgerInfo(lid, 5, 10, clock.t)
    assert infos[1].ledger_id > lid and infos[1].timestamp == 0
    lmd, _ = s.metadata.ledger_metadata(lid)
    assert lmd.state == LedgerMetadataFormat.CLOSED and lmd.lastEntryId == 4 and lmd.length == 10
    assert s.bookie.ledger_data(lid).fenced
    assert [d for _, d in ml.read(Position(lid, 0), 10)] == [b"e%d" % i for i in range(5)]
    empty = ml.current_ledger_id
    ml.close()
    s.close()
    s = pk.Store.open(path, clock=clock)
    ml = s.managed_ledger(NAME, cfg())
    ids = [li.ledger_id for li in ml.ledgers()]
    assert empty not in ids and ids[0] == lid  # the empty ledger was dropped and deleted
    assert empty not in s.metadata.ledger_ids() and not s.bookie.ledger_exists(empty)
    assert ml.add_entry(b"more") == Position(ml.current_ledger_id, 0)
    s.close()


def test_same_name_returns_same_object_and_list_of_names(store) -> None:
    a = store.managed_ledger(NAME, cfg(max_entries_per_ledger=100))
    assert store.managed_ledger(NAME) is a
    # opening again with another config applies it, as ManagedLedger.setConfig does
    assert store.managed_ledger(NAME, cfg(max_entries_per_ledger=1)) is a
    p = a.add_entry(b"x")
    assert a.current_ledger_id == p.ledger_id + 1
    store.managed_ledger("my-test-ledger")
    store.managed_ledger("t/ns/persistent/other").open_cursor("sub")
    assert sorted(store.managed_ledgers()) == sorted([NAME, "my-test-ledger", "t/ns/persistent/other"])


def test_terminate_and_closed_states(store) -> None:
    ml = store.managed_ledger(NAME, cfg())
    p = ml.add_entry(b"a")
    assert ml.terminate() == p
    with pytest.raises(pk.ManagedLedgerTerminatedError):
        ml.add_entry(b"b")
    assert ml.read(p, 1) == [(p, b"a")]
    ml.close()
    with pytest.raises(pk.ManagedLedgerClosedError):
        ml.read(p, 1)
    again = store.managed_ledger(NAME, cfg())
    assert again.terminated_position == p and again.state == "terminated"
    # subscriptions still come and go on a terminated topic
    sub = again.open_cursor("late", "earliest")
    assert sub.read(5) == [(p, b"a")]
    sub.mark_delete(p)
    again.delete_cursor("late")
    assert again.cursors() == []


def test_concurrent_metadata_change_fences_the_writer(store) -> None:
    ml = store.managed_ledger(NAME, cfg(max_entries_per_ledger=1))
    ml.add_entry(b"a")
    # someone else rewrites the node: our version is stale now
    store.metadata.put(f"/managed-ledgers/{NAME}", ManagedLedgerInfo().SerializeToString())
    with pytest.raises(pk.ManagedLedgerFencedError):
        ml.add_entry(b"b")
    with pytest.raises(pk.ManagedLedgerFencedError):
        ml.add_entry(b"c")


def test_broker_entry_metadata_index_survives_reopen(tmp_path, clock) -> None:
    def c() -> ManagedLedgerConfig:  # a new interceptor per open, as the broker makes one per topic
        return cfg(
            managed_ledger_interceptor=managed_ledger_interceptor(
                (
                    "org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor",
                    "org.apache.pulsar.common.intercept.AppendBrokerTimestampMetadataInterceptor",
                ),
                clock,
            )
        )

    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, c())
    entry = pk.encode_entry(pk.message_metadata("p", 0, 1), b"x")
    p1 = ml.add_entry(entry, num_messages=3)
    p2 = ml.add_entry(entry, num_messages=2)
    assert pk.peek_broker_entry_metadata(ml.read_entry(p1)).index == 2
    assert pk.peek_broker_entry_metadata(ml.read_entry(p2)) == pk.BrokerEntryMetadata(clock.t, 4)
    s.close()
    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, c())
    p3 = ml.add_entry(entry, num_messages=1)
    assert pk.peek_broker_entry_metadata(ml.read_entry(p3)).index == 5
    assert pk.Entry.parse(ml.read_entry(p3)).metadata.producer_name == "p"
    s.close()


# ----------------------------------------------------------------------------------- cursors


def test_cursor_initial_positions_and_reads(store) -> None:
    ml = store.managed_ledger(NAME, cfg(max_entries_per_ledger=2))
    ps = [ml.add_entry(b"%d" % i) for i in range(3)]
    latest = ml.open_cursor("latest")
    earliest = ml.open_cursor("earliest", initial_position="earliest")
    assert latest.mark_delete_position == ps[-1] and latest.read(10) == []
    assert earliest.mark_delete_position == Position(ps[0].ledger_id, -1)
    assert earliest.number_of_entries_in_backlog == 3
    assert earliest.read(2) == [(ps[0], b"0"), (ps[1], b"1")]
    assert earliest.read_position == ps[2]
    p3 = ml.add_entry(b"3")
    assert latest.read(5) == [(p3, b"3")]
    assert earliest.read(5) == [(ps[2], b"2"), (p3, b"3")]
    earliest.rewind()
    assert len(earliest.read(10)) == 4
    assert ml.open_cursor("latest") is latest


def test_mark_delete_properties_and_errors(tmp_path, clock) -> None:
    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, cfg())
    ps = [ml.add_entry(b"%d" % i) for i in range(4)]
    c = ml.open_cursor("sub", "earliest")
    c.mark_delete(ps[1], {"seq-a": 10, "seq-b": -3})
    assert c.mark_delete_position == ps[1] and c.properties == {"seq-a": 10, "seq-b": -3}
    assert c.read_position == ps[2] and c.number_of_entries_in_backlog == 2
    with pytest.raises(pk.InvalidCursorPositionError):
        c.mark_delete(ps[0])
    with pytest.raises(pk.InvalidCursorPositionError):
        c.mark_delete(Position(ps[3].ledger_id, 9))
    c.set_cursor_properties({"owner": "me"})
    s.close()
    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, cfg())
    c = ml.cursor("sub")
    assert c.mark_delete_position == ps[1] and c.properties == {"seq-a": 10, "seq-b": -3}
    assert c.cursor_properties == {"owner": "me"}
    info, _ = s.metadata.cursor_info(NAME, "sub")
    assert info.cursorsLedgerId == -1 and (info.markDeleteLedgerId, info.markDeleteEntryId) == ps[1]
    assert {p.name: p.value for p in info.properties} == {"seq-a": 10, "seq-b": -3}
    assert info.lastActive == clock.t
    c.mark_delete(ps[2])  # markDelete(position) stores no properties
    assert c.properties == {}
    s.close()


def test_individual_deletes_merge_and_advance_across_ledgers(tmp_path, clock) -> None:
    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, cfg(max_entries_per_ledger=3))
    ps = [ml.add_entry(b"%d" % i) for i in range(8)]  # ledgers L:[0,1,2] L+1:[3,4,5] L+2:[6,7]
    c = ml.open_cursor("sub", "earliest")
    c.delete(ps[4])
    c.delete([ps[3], ps[6]])
    L = ps[0].ledger_id
    # (L:2, L+1:1] holds 3 and 4 (the range starts at the entry before 3, the last of ledger L)
    assert c.individually_deleted_ranges == [(ps[2], ps[4]), (ps[5], ps[6])]
    assert c.mark_delete_position == Position(L, -1) and c.number_of_entries_in_backlog == 5
    assert [p for p, _ in c.read(10)] == [ps[0], ps[1], ps[2], ps[5], ps[7]]
    c.delete([ps[1], ps[0]])
    assert c.mark_delete_position == ps[1]
    c.delete(ps[2])  # joins (L:-1..L:2] with the deleted 3, 4
    assert c.mark_delete_position == ps[4] and c.individually_deleted_ranges == [(ps[5], ps[6])]
    c.delete(ps[5])  # joins 5 and then 6 across the ledger boundary
    assert c.mark_delete_position == ps[6] and c.individually_deleted_ranges == []
    assert c.number_of_entries_in_backlog == 1
    c.delete(ps[3])  # already deleted: a no-op
    with pytest.raises(pk.InvalidCursorPositionError):
        c.delete(Position(ps[7].ledger_id, 5))
    c.delete(ps[7])
    assert c.mark_delete_position == ps[7] and c.number_of_entries_in_backlog == 0
    s.close()


def test_individual_deletes_are_persisted_as_message_ranges(tmp_path, clock) -> None:
    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, cfg())
    ps = [ml.add_entry(b"%d" % i) for i in range(6)]
    c = ml.open_cursor("sub", "earliest")
    c.delete([ps[2], ps[3], ps[5]])
    info, _ = s.metadata.cursor_info(NAME, "sub")
    ranges = [
        (
            (r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId),
            (r.upperEndpoint.ledgerId, r.upperEndpoint.entryId),
        )
        for r in info.individualDeletedMessages
    ]
    assert ranges == [(ps[1], ps[3]), (ps[4], ps[5])]
    s.close()
    s = pk.Store.open(tmp_path / "d", clock=clock)
    c = s.managed_ledger(NAME, cfg()).cursor("sub")
    assert c.individually_deleted_ranges == [(ps[1], ps[3]), (ps[4], ps[5])]
    assert c.number_of_entries_in_backlog == 3
    assert [p for p, _ in c.read(10)] == [ps[0], ps[1], ps[4]]
    s.close()


def test_batch_index_acks(tmp_path, clock) -> None:
    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, cfg())
    ps = [ml.add_entry(b"batch%d" % i, num_messages=70) for i in range(3)]
    c = ml.open_cursor("sub", "earliest")
    assert ack_set_for(3, [1]) == [0b101]
    assert ack_set_for(70, [0]) == [-2, 0b111111]  # two BitSet words, the first one's bit 63 set
    c.delete_batch_index(ps[1], 0, 70)
    c.delete_batch_index(ps[1], 69, 70)
    assert c.deleted_batch_indexes(ps[1]) == bitset_words(((1 << 70) - 1) & ~1 & ~(1 << 69))
    assert not c.is_deleted(ps[1]) and c.number_of_entries_in_backlog == 3
    info, _ = s.metadata.cursor_info(NAME, "sub")
    (b,) = info.batchedEntryDeletionIndexInfo
    assert (b.position.ledgerId, b.position.entryId) == ps[1] and list(b.deleteSet) == c.deleted_batch_indexes(ps[1])
    s.close()
    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, cfg())
    c = ml.cursor("sub")
    assert c.deleted_batch_indexes(ps[1]) == bitset_words(((1 << 70) - 1) & ~1 & ~(1 << 69))
    c.delete(ps[1], ack_set=[0])  # no bit left: the whole entry is deleted
    assert c.is_deleted(ps[1]) and c.deleted_batch_indexes(ps[1]) is None
    # a cumulative ack inside a batch: mark-delete stops before it, the batch keeps its ack set
    c.mark_delete(ps[2], ack_set=ack_set_for(70, range(10)))
    assert c.mark_delete_position == ps[1]  # the entry before the partly acknowledged batch
    assert c.deleted_batch_indexes(ps[2]) == ack_set_for(70, range(10))
    c.mark_delete(ps[2])
    assert c.deleted_batch_indexes(ps[2]) is None and c.number_of_entries_in_backlog == 0
    s.close()


def test_reset_and_delete_cursor(store) -> None:
    ml = store.managed_ledger(NAME, cfg(max_entries_per_ledger=2))
    ps = [ml.add_entry(b"%d" % i) for i in range(5)]
    c = ml.open_cursor("sub", "earliest")
    c.delete([ps[3]])
    c.mark_delete(ps[1], {"k": 1})
    c.reset(ps[2])
    assert c.mark_delete_position == ps[1] and c.individually_deleted_ranges == [] and c.read_position == ps[2]
    c.reset(ps[0])
    assert c.mark_delete_position == Position(ps[0].ledger_id, -1)
    assert [p for p, _ in c.read(9)] == ps
    c.reset(ml.next_valid_position(ps[-1]))  # the end is a valid reset position
    assert c.read(1) == []
    with pytest.raises(pk.InvalidCursorPositionError):
        c.reset(Position(ps[0].ledger_id, 7))
    ml.delete_cursor("sub")
    assert store.metadata.cursor_info(NAME, "sub") is None
    with pytest.raises(pk.CursorNotFoundError):
        ml.delete_cursor("sub")
    with pytest.raises(KeyError):
        ml.cursor("sub")
    with pytest.raises(pk.CursorNotFoundError):
        c.mark_delete(ps[0])


def test_cursor_recovered_from_a_pulsar_cursor_ledger(tmp_path, clock) -> None:
    """A broker keeps mark-deletes in a cursor ledger (PositionInfo entries) and points to it from
    ManagedCursorInfo.cursorsLedgerId; reopening reads its last entry."""
    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, cfg())
    ps = [ml.add_entry(b"%d" % i) for i in range(5)]
    ml.close()
    cursor_ledger = s.metadata.generate_ledger_id()
    lmd = LedgerMetadataFormat(
        quorumSize=1,
        ensembleSize=1,
        length=0,
        state=LedgerMetadataFormat.OPEN,
        digestType=LedgerMetadataFormat.CRC32C,
        password=b"",
    )
    s.metadata.put_ledger_metadata(cursor_ledger, lmd, expected_version=-1)
    s.bookie.create_ledger(cursor_ledger)
    total = 0
    for i, (md_pos, props) in enumerate([(ps[0], {"a": 1}), (ps[2], {"a": 2})]):
        pi = PositionInfo(ledgerId=md_pos.ledger_id, entryId=md_pos.entry_id)
        p = pi.properties.add()
        p.name, p.value = next(iter(props.items()))
        r = pi.individualDeletedMessages.add()
        r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId = ps[3]
        r.upperEndpoint.ledgerId, r.upperEndpoint.entryId = ps[4]
        body = pi.SerializeToString()
        total += len(body)
        s.bookie.add_entry(pack_entry(cursor_ledger, i, body, last_add_confirmed=i - 1, length=total))
    s.bookie.flush()
    info = ManagedCursorInfo(cursorsLedgerId=cursor_ledger, markDeleteLedgerId=ps[0].ledger_id, markDeleteEntryId=0)
    s.metadata.put_cursor_info(NAME, "sub", info, expected_version=-1)
    s.close()
    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, cfg())
    c = ml.cursor("sub")
    assert c.mark_delete_position == ps[2] and c.properties == {"a": 2}
    assert c.individually_deleted_ranges == [(ps[3], ps[4])]
    c.mark_delete(ps[2], c.properties)  # persisting switches to the snapshot and drops that ledger
    info, _ = s.metadata.cursor_info(NAME, "sub")
    assert info.cursorsLedgerId == -1
    assert cursor_ledger not in s.metadata.ledger_ids() and not s.bookie.ledger_exists(cursor_ledger)
    s.close()


def test_cursor_past_recovered_end_is_clamped(tmp_path, clock) -> None:
    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, cfg())
    ps = [ml.add_entry(b"%d" % i) for i in range(3)]
    ml.flush()
    c = ml.open_cursor("sub")
    ml.add_entry(b"lost")  # never flushed
    c.mark_delete(ml.last_confirmed_entry)
    s.bookie.dirs[0].write_cache.clear()  # the crash loses the unflushed add
    s.bookie.dirs[0].write_cache_bytes = 0
    s.bookie.close()
    s.metadata.close()
    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, cfg())
    assert ml.cursor("sub").mark_delete_position == ps[-1]
    s.close()


# ------------------------------------------------------------------------------ read-only


def test_read_only_store(tmp_path, clock) -> None:
    path = tmp_path / "d"
    s = pk.Store.open(path, clock=clock)
    ml = s.managed_ledger(NAME, cfg(max_entries_per_ledger=2))
    ps = [ml.add_entry(b"%d" % i) for i in range(5)]
    ml.open_cursor("sub", "earliest").mark_delete(ps[1])
    s.close()
    files = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    with pk.Store.open(path, read_only=True) as ro:
        ml = ro.managed_ledger(NAME)
        assert [d for _, d in ml.read(ps[0], 10)] == [b"%d" % i for i in range(5)]
        assert ml.cursor("sub").mark_delete_position == ps[1]
        with pytest.raises(pk.ManagedLedgerClosedError):
            ml.add_entry(b"x")
        with pytest.raises(pk.ManagedLedgerClosedError):
            ml.cursor("sub").mark_delete(ps[2])
        with pytest.raises(pk.ManagedLedgerError):
            ro.managed_ledger("does/not/persistent/exist")
    assert {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == files


# ------------------------------------------------------------------------- metadata encodings


def test_ledger_paths() -> None:
    assert mdmod.ledger_path(5) == "/ledgers/00/0000/L0005"
    assert mdmod.ledger_path(1234567890) == "/ledgers/12/3456/L7890"
    assert mdmod.ledger_path(2**31) == "/ledgers/000/0000/0021/4748/L3648"
    for lid in (0, 5, 1234567890, 2**31, 2**62 + 3):
        assert mdmod.ledger_id_from_path(mdmod.ledger_path(lid)) == lid
    assert mdmod.ledger_id_from_path("/ledgers/idgen") is None
    assert mdmod.ledger_id_from_path("/ledgers/00/0000/Lxx05") is None


def test_ledger_metadata_serde() -> None:
    md = LedgerMetadataFormat(quorumSize=2, ensembleSize=3, length=10, state=LedgerMetadataFormat.CLOSED, lastEntryId=4)
    raw = mdmod.serialize_ledger_metadata(md)
    body = md.SerializeToString()
    assert raw == b"BookieMetadataFormatVersion\t3\n" + bytes([len(body)]) + body
    assert mdmod.parse_ledger_metadata(raw) == md
    v2 = b"BookieMetadataFormatVersion\t2\nquorumSize: 2\nensembleSize: 3\nlength: 10\nlastEntryId: 4\nstate: CLOSED\n"
    assert mdmod.parse_ledger_metadata(v2) == md
    for bad in (
        b"junk",
        b"BookieMetadataFormatVersion\t9\n",
        b"BookieMetadataFormatVersion\t3\n\xff\xff",
        b"BookieMetadataFormatVersion\t3\n" + bytes([50]) + body,
        b"BookieMetadataFormatVersion\tx\n",
        b"BookieMetadataFormatVersion\t3\n\x00",
    ):
        with pytest.raises(pk.MetadataStoreError):
            mdmod.parse_ledger_metadata(bad)


def test_compressed_managed_ledger_info_is_read() -> None:
    info = ManagedLedgerInfo()
    for i in range(20):
        li = info.ledgerInfo.add()
        li.ledgerId, li.entries, li.size, li.timestamp = i, 100, 5000, 1_700_000_000_000
    body = info.SerializeToString()
    meta = ManagedLedgerInfoMetadata(compressionType=1, uncompressedSize=len(body)).SerializeToString()
    raw = struct.pack(">Hi", 0x4778, len(meta)) + meta + pk.compress("LZ4", body)
    assert mdmod.parse_managed_ledger_info(raw) == info
    assert mdmod.parse_managed_ledger_info(body) == info
    with pytest.raises(pk.MetadataStoreError):
        mdmod.parse_managed_ledger_info(struct.pack(">Hi", 0x4778, 99) + meta)
    with pytest.raises(pk.MetadataStoreError):
        mdmod.parse_managed_cursor_info(b"\x08")  # required cursorsLedgerId cut short


@settings(max_examples=60, deadline=None)
@given(
    ledgers=st.lists(
        st.tuples(st.integers(0, 2**63 - 1), st.integers(-1, 2**40), st.integers(0, 2**40), st.booleans()),
        max_size=6,
    ),
    mark=st.tuples(st.integers(-1, 2**40), st.integers(-1, 2**40)),
    props=st.lists(st.tuples(st.text(max_size=8), st.integers(-(2**63), 2**63 - 1)), max_size=3),
)
def test_text_format_values_of_older_brokers_read_like_binary(ledgers, mark, props) -> None:
    """Older brokers wrote managed-ledger and cursor values in protobuf text format; Pulsar reads binary
    first and falls back to text. Both forms of one value read the same; garbage names both failures."""
    from google.protobuf import text_format

    info = ManagedLedgerInfo()
    for lid, entries, size, offloaded in ledgers:
        li = info.ledgerInfo.add(ledgerId=lid, entries=entries, size=size)
        if offloaded:
            li.offloadContext.complete = True
    cursor = ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=mark[0], markDeleteEntryId=mark[1])
    for name, value in props:
        cursor.properties.add(name=name, value=value)
    for msg, parse in ((info, mdmod.parse_managed_ledger_info), (cursor, mdmod.parse_managed_cursor_info)):
        text = text_format.MessageToString(msg).encode()
        assert parse(text) == msg == parse(msg.SerializeToString())
    with pytest.raises(pk.MetadataStoreError, match="not binary .* not text format"):
        mdmod.parse_managed_ledger_info(b"ledgerInfo { ledgerId: x }")
    with pytest.raises(pk.MetadataStoreError, match="required fields missing"):
        mdmod.parse_managed_cursor_info(b"markDeleteLedgerId: 5")  # cursorsLedgerId is required


def test_metadata_store_nodes_versions_and_framing(tmp_path, clock) -> None:
    with pk.metadata.MetadataStore(tmp_path / "m", clock=clock) as m:
        st = m.put("/a/b", b"one", expected_version=-1)
        assert (st.version, st.creation_timestamp) == (0, clock.t)
        clock.t += 5
        st = m.put("/a/b", b"two", expected_version=0)
        assert st.version == 1 and st.modification_timestamp == clock.t
        with pytest.raises(pk.BadVersionError):
            m.put("/a/b", b"x", expected_version=0)
        with pytest.raises(pk.BadVersionError):
            m.put("/a/b", b"x", expected_version=-1)
        m.put("/a/c/d", b"")
        assert m.children("/a") == ["b", "c"] and m.get_data("/a/b") == b"two"
        raw = m._db.get(b"/a/b")
        assert raw == mdmod.encode_meta_value(b"two", 1, m.instance_id, clock.t - 5, clock.t)
        m.delete("/a/b", expected_version=1)
        assert m.get("/a/b") is None
        with pytest.raises(pk.MetadataNotFoundError):
            m.delete("/a/b")
        with pytest.raises(pk.MetadataStoreError):
            m.put("no-slash", b"")
        assert [m.generate_ledger_id() for _ in range(3)] == [0, 1, 2]
        first_instance = m.instance_id
    with pk.metadata.MetadataStore(tmp_path / "m", clock=clock) as m:
        assert m.instance_id == first_instance + 1
        assert m.generate_ledger_id() == 3
        assert struct.unpack(">q", m._db.get(b"__metadata_sequentialId_key"))[0] == 4
        # an ephemeral node of a previous session is gone
        m._db.put(b"/eph", mdmod.encode_meta_value(b"x", 0, first_instance, 0, 0, ephemeral=True))
        assert m.get("/eph") is None
    for bad in (b"\x00\x00", struct.pack(">i", 99) + b"x", struct.pack(">ii", 41, 0) + bytes(33)):
        with pytest.raises(pk.MetadataStoreError):
            mdmod.decode_meta_value(bad)


def test_concurrent_adds_get_distinct_consecutive_positions_and_survive_reopen(tmp_path, clock) -> None:
    """Eight threads add to one managed ledger (rolling every 37 entries) while others read and
    acknowledge: no position is handed out twice, none is skipped, and after a reopen every
    position holds exactly the bytes its add was answered for."""

    store = pk.Store.open(tmp_path / "d", clock=clock, sync=False)
    ml = store.managed_ledger(NAME, cfg(max_entries_per_ledger=37))
    cursor = ml.open_cursor("sub", initial_position="earliest")
    answered: dict[Position, bytes] = {}
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(t: int) -> None:
        try:
            for i in range(150):
                payload = b"%d-%d" % (t, i)
                pos = ml.add_entry(payload)
                assert pos not in answered, f"{pos} handed out twice"
                answered[pos] = payload
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    def reader() -> None:
        try:
            while not stop.is_set():
                for pos, data in cursor.read(5):
                    assert data == answered.get(pos, data)
                    cursor.delete(pos)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        writers = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
        readers = [threading.Thread(target=reader) for _ in range(2)]
        for th in writers + readers:
            th.start()
        for th in writers:
            th.join()
        stop.set()
        for th in readers:
            th.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors
    assert len(answered) == 8 * 150
    first = min(answered)
    assert ml.count_entries(ml.previous_position(first), max(answered)) == len(answered)  # none skipped
    store.close()
    with pk.Store.open(tmp_path / "d", clock=clock) as s2:
        ml2 = s2.managed_ledger(NAME)
        assert dict(ml2.read(first, 10_000)) == answered


def test_a_store_in_use_is_a_typed_error_naming_it(tmp_path) -> None:
    """A second writer on the same directory gets a PulsarkitError saying the directory is in use,
    not RocksDB's raw lock error; the directories pulsarkit creates are private to the user."""
    with pk.Store.open(tmp_path / "d", sync=False):
        with pytest.raises(pk.PulsarkitError, match=r"in use") as ei:
            pk.Store.open(tmp_path / "d", sync=False)
        assert str(tmp_path / "d") in str(ei.value)
        for sub in ("d", "d/metadata", "d/bookie", "d/bookie/current"):
            assert (tmp_path / sub).stat().st_mode & 0o777 == 0o700, sub


# ------------------------------------------------------------------------------- bulk adds


def _bulk_config(clock, minimum_rollover_ms: int) -> ManagedLedgerConfig:
    return cfg(
        max_entries_per_ledger=7,
        max_size_per_ledger_mb=1,
        maximum_rollover_time_ms=10_000,
        minimum_rollover_time_ms=minimum_rollover_ms,
        rollover_jitter=0,
        managed_ledger_interceptor=managed_ledger_interceptor(
            (
                "org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor",
                "org.apache.pulsar.common.intercept.AppendBrokerTimestampMetadataInterceptor",
            ),
            clock,
        ),
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.sampled_from([1, 10, 1000, 300 * 1024]), min_size=8, max_size=60),
    calls=st.lists(st.tuples(st.integers(1, 9), st.sampled_from([0, 1, 2_500, 12_000])), min_size=1, max_size=40),
    minimum_rollover_ms=st.sampled_from([0, 3_000]),
)
# the rules random draws reach only now and then: a call that runs past the count or the size limit,
# one that starts past the maximum age, and calls into a full ledger younger than the minimum age
@example(sizes=[10] * 20, calls=[(10, 0)], minimum_rollover_ms=0)
@example(sizes=[300 * 1024] * 8, calls=[(3, 0), (5, 0)], minimum_rollover_ms=0)
@example(sizes=[10] * 10, calls=[(3, 12_000), (5, 0)], minimum_rollover_ms=0)
@example(sizes=[10] * 14, calls=[(8, 2_500), (4, 1_000), (2, 0)], minimum_rollover_ms=3_000)
def test_add_entries_is_the_same_as_one_add_entry_per_entry(
    tmp_path_factory, clock, sizes, calls, minimum_rollover_ms
) -> None:
    """Positions, rollovers (by count, size, age and minimum age), broker entry metadata and the
    stored bytes of a bulk add equal those of single adds, however the entries are split into calls
    and however much time passes between them."""
    entries = [pk.encode_entry(pk.message_metadata("p", i, 1), bytes([i % 251]) * n) for i, n in enumerate(sizes)]
    counts = [1 + i % 3 for i in range(len(entries))]
    one_by_one, bulk = (pk.Store.open(tmp_path_factory.mktemp("ml"), clock=clock) for _ in range(2))
    try:
        a = one_by_one.managed_ledger(NAME, _bulk_config(clock, minimum_rollover_ms))
        b = bulk.managed_ledger(NAME, _bulk_config(clock, minimum_rollover_ms))
        want: list[Position] = []
        got: list[Position] = []
        i = k = 0
        while i < len(entries):
            n, wait_ms = calls[k % len(calls)]
            want += [a.add_entry(e, num_messages=c) for e, c in zip(entries[i : i + n], counts[i : i + n])]
            got += b.add_entries(entries[i : i + n], counts[i : i + n])
            clock.t += wait_ms
            i, k = i + n, k + 1
        assert got == want
        assert [(x.entries, x.size) for x in b.ledgers()] == [(x.entries, x.size) for x in a.ledgers()]
        assert (b.number_of_entries, b.total_size) == (a.number_of_entries, a.total_size)
        a.flush()
        b.flush()
        for p in want:
            assert bulk.bookie.read_entry(*p) == one_by_one.bookie.read_entry(*p)  # digest, LAC and length too
    finally:
        one_by_one.close()
        bulk.close()


def test_add_entries_survives_reopen_and_refuses_bad_input(tmp_path, clock) -> None:
    s = pk.Store.open(tmp_path / "d", clock=clock)
    ml = s.managed_ledger(NAME, cfg(max_entries_per_ledger=100))
    ps = ml.add_entries([b"e%d" % i for i in range(250)])
    assert [p.entry_id for p in ps[:3]] == [0, 1, 2] and len({p.ledger_id for p in ps}) == 3
    with pytest.raises(pk.PulsarkitError, match="2 counts for 3 entries"):
        ml.add_entries([b"a", b"b", b"c"], [1, 1])
    assert ml.add_entries([]) == []
    with pytest.raises(pk.CorruptEntryError, match="entry 1 of the batch: needs at least 16 bytes"):
        s.bookie.add_entries([bytes(40), b"short"])
    s.close()
    s = pk.Store.open(tmp_path / "d", clock=clock, read_only=True)
    ml = s.managed_ledger(NAME)
    assert [e for _, e in ml.read(ps[0], 1000)] == [b"e%d" % i for i in range(250)]
    with pytest.raises(pk.PulsarkitError, match="read-only"):
        ml.add_entries([b"x"])
    s.close()


def test_bookie_add_entries_over_several_ledger_directories_and_repeated_keys(tmp_path) -> None:
    """``DbLedgerStorage.add_entries`` spreads entries over the directories as ``add_entry`` does, and
    an entry given twice (or added again) is cached once, with its last bytes."""
    from pulsarkit.bookkeeper import BookieEntryPacker
    from pulsarkit.bookkeeper.ledger_storage import DbLedgerStorage

    with DbLedgerStorage([tmp_path / "a", tmp_path / "b"], sync=False) as bk:
        for lid in (4, 5):
            bk.create_ledger(lid)
        four, five = BookieEntryPacker(4).pack_many([b"x", b"y"]), BookieEntryPacker(5).pack_many([b"p"])
        again = BookieEntryPacker(4).pack_many([b"x2"])[0]  # entry (4, 0) with other bytes
        assert bk.add_entries([four[0], five[0], four[1], again]) == [(4, 0), (5, 0), (4, 1), (4, 0)]
        a, b = bk.dirs
        assert set(a.write_cache) == {(4, 0), (4, 1)} and set(b.write_cache) == {(5, 0)}
        assert a.write_cache_bytes == len(again) + len(four[1]) and b.write_cache_bytes == len(five[0])
        bk.add_entries([four[1]])  # added again: replaces, not adds to, the cached bytes
        assert a.write_cache_bytes == len(again) + len(four[1])
        bk.flush()
        assert bk.read_entry(4, 0) == again and bk.read_entry(5, 0) == five[0]
        bk.fence_ledger(5)
        with pytest.raises(pk.BookieError, match="ledger 5 is fenced"):
            bk.add_entries([BookieEntryPacker(4, next_entry_id=2).pack(b"z"), five[0]])
        assert bk.last_entry_id(4) == 1  # the refused batch added nothing
