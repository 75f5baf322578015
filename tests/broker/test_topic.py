"""PersistentTopic: the broker's publish path, PIP-70 index/timestamps, dispatch, seek, PIP-6 dedup.
Mirrors ManagedLedgerInterceptorImplTest, PersistentMessageFinderTest, MessageDeduplicationTest."""

import itertools

import pulsarkit as pk
import pytest
from helpers import Clock
from pulsarkit.broker import DEDUPLICATION_CURSOR_NAME, DeduplicationConfig, MessageDupStatus, PersistentTopic
from pulsarkit.broker.interceptors import INDEX_INTERCEPTOR, TIMESTAMP_INTERCEPTOR
from pulsarkit.managed_ledger import ManagedLedgerConfig

TOPIC = "public/default/persistent/orders"


def batch(producer, seq, n, publish_time=1000):
    return pk.encode_batch(pk.message_metadata(producer, seq, publish_time), [b"m%d" % i for i in range(n)])


def single(producer, seq, publish_time=1000, payload=b"x"):
    return pk.encode_entry(pk.message_metadata(producer, seq, publish_time), payload)


@pytest.mark.parametrize("size", [1, 10])
def test_index_per_entry_for_batches(store, size):
    t = PersistentTopic(store.managed_ledger(TOPIC), interceptors=[INDEX_INTERCEPTOR])
    for i in range(10):
        r = t.publish(batch("p", i * size, size), "p", i * size, (i + 1) * size - 1, num_messages=size)
        assert r.status == "OK"
        stored = t.ml.read_entry((r.message_id.ledger_id, r.message_id.entry_id))
        assert pk.peek_broker_entry_metadata(stored).index == (i + 1) * size - 1
        msgs = pk.Entry.parse(stored).messages()
        assert [m.index for m in msgs] == list(range(i * size, (i + 1) * size))
    for msg_index in range(0, 10 * size, 3):
        assert t.find_position_by_index(msg_index).entry_id == msg_index // size


def test_index_recovered_after_reopen(store):
    t = PersistentTopic(store.managed_ledger(TOPIC), interceptors=[INDEX_INTERCEPTOR])
    for i in range(5):
        t.publish(batch("p", i * 4, 4), "p", i * 4, i * 4 + 3, num_messages=4)
    assert t.index == 19
    t.close()
    t2 = PersistentTopic(store.managed_ledger(TOPIC), interceptors=[INDEX_INTERCEPTOR])
    assert t2.index == 19  # from the last entry of the last ledger
    r = t2.publish(batch("p", 20, 2), "p", 20, 21, num_messages=2)
    assert pk.peek_broker_entry_metadata(t2.ml.read_entry((r.message_id.ledger_id, r.message_id.entry_id))).index == 21


def test_index_recovered_from_property_when_last_ledger_is_empty(store):
    cfg = ManagedLedgerConfig(max_entries_per_ledger=3, minimum_rollover_time_ms=0)
    t = PersistentTopic(store.managed_ledger(TOPIC, cfg), interceptors=[INDEX_INTERCEPTOR])
    for i in range(3):  # fills the ledger, which rolls; the ML info update stores "index"
        t.publish(batch("p", i * 2, 2), "p", i * 2, i * 2 + 1, num_messages=2)
    assert t.ml.properties.get("index") == "5"
    t.close()
    t2 = PersistentTopic(store.managed_ledger(TOPIC, cfg), interceptors=[INDEX_INTERCEPTOR])
    assert t2.index == 5


class _PassThrough:
    """A ``ManagedLedgerInterceptor`` of the user's own (the protocol's five hooks), not the broker's."""

    def before_add_entry(self, data, number_of_messages):
        return bytes(data)

    def after_failed_add_entry(self, number_of_messages):
        pass

    def on_managed_ledger_properties_initialize(self, properties):
        pass

    def on_managed_ledger_last_ledger_initialize(self, last_entry):
        pass

    def on_update_managed_ledger_info(self, properties):
        pass


def test_no_index_with_a_managed_ledger_interceptor_of_its_own(store):
    """The topic keeps the managed ledger's own interceptor; with no index interceptor, ``index`` is None (it
    raised AttributeError: the protocol has no ``index_interceptor``)."""
    cfg = ManagedLedgerConfig(managed_ledger_interceptor=_PassThrough())
    t = PersistentTopic(store.managed_ledger(TOPIC, cfg))
    assert t.publish(single("p", 0), "p", 0, 0).status == "OK"
    assert t.index is None


def test_index_rolled_back_after_failed_add(store, monkeypatch):
    t = PersistentTopic(store.managed_ledger(TOPIC), interceptors=[INDEX_INTERCEPTOR])
    bk = store.bookie

    def failing(*a, **k):
        raise OSError("bookie write failed")

    with monkeypatch.context() as m:
        m.setattr(bk, "add_entry", failing)
        r = t.publish(batch("p", 0, 10), "p", 0, 9, num_messages=10)
    assert r.status == "ERROR" and "bookie write failed" in r.error and r.server_error == "PersistenceError"
    assert t.index == -1
    r = t.publish(batch("p", 0, 10), "p", 0, 9, num_messages=10)
    assert r.status == "OK"
    assert pk.peek_broker_entry_metadata(t.ml.read_entry((r.message_id.ledger_id, r.message_id.entry_id))).index == 9


def test_checksum_error_stores_nothing(store):
    t = PersistentTopic(store.managed_ledger(TOPIC), interceptors=[INDEX_INTERCEPTOR], deduplication=True)
    bad = bytearray(single("p", 0))
    bad[-1] ^= 0x55
    r = t.publish(bytes(bad), "p", 0)
    assert r.status == "CHECKSUM_ERROR" and r.server_error == "ChecksumError"
    assert t.ml.number_of_entries == 0 and t.index == -1 and t.last_sequence_id("p") == -1
    assert t.publish(b"\x00\x01", "p", 0).status == "ERROR"
    with_bem = pk.add_broker_entry_metadata(single("p", 0), 1, 1)
    assert t.publish(with_bem, "p", 0).status == "ERROR"


def test_seek_prefers_broker_time_when_client_clocks_are_skewed(store):
    clock = Clock()
    hour = 3_600_000
    t = PersistentTopic(
        store.managed_ledger(TOPIC), interceptors=[TIMESTAMP_INTERCEPTOR, INDEX_INTERCEPTOR], clock=clock
    )
    arrivals = []
    for i in range(60):
        clock.t += 1000
        producer = i % 3
        client_time = clock.t + (producer - 1) * 5 * hour  # clocks five hours apart
        r = t.publish(single(f"p{producer}", i, client_time), f"p{producer}", i)
        arrivals.append((clock.t, r.message_id))
    # Messages land in broker order; seeking to any broker time lands on the entry stored then.
    for ts, mid in arrivals:
        pos = t.find_position_by_time(ts)
        assert (pos.ledger_id, pos.entry_id) == (mid.ledger_id, mid.entry_id)
    cursor = t.ml.open_cursor("sub")
    t.reset_cursor("sub", publish_time_ms=arrivals[30][0])
    assert cursor.read(1)[0][0].entry_id == arrivals[30][1].entry_id


def test_seek_by_publish_time_without_broker_timestamps(store):
    t = PersistentTopic(store.managed_ledger(TOPIC))
    for i in range(20):
        t.publish(single("p", i, 10_000 + 100 * i), "p", i)
    assert t.find_position_by_time(10_000).entry_id == 0
    assert t.find_position_by_time(10_550).entry_id == 6
    assert t.find_position_by_time(99_999).entry_id == 20
    assert t.reset_cursor("s", index=None, publish_time_ms=10_000).entry_id == 0
    with pytest.raises(pk.PulsarkitError):
        t.reset_cursor("s")


def test_seek_across_closed_ledgers_uses_close_time(store):
    clock = Clock(1_000_000)
    cfg = ManagedLedgerConfig(max_entries_per_ledger=5, minimum_rollover_time_ms=0, clock=clock)
    t = PersistentTopic(store.managed_ledger(TOPIC, cfg), interceptors=[TIMESTAMP_INTERCEPTOR], clock=clock)
    for i in range(23):
        clock.t += 20_000
        t.publish(single("p", i, 0), "p", i)
    ledgers = t.ml.ledgers()
    assert len(ledgers) == 5 and ledgers[-1].timestamp == 0
    for i in range(23):
        ts = 1_000_000 + 20_000 * (i + 1)
        pos = t.find_position_by_time(ts)
        expected = divmod(i, 5)
        assert (pos.ledger_id, pos.entry_id) == (ledgers[expected[0]].ledger_id, expected[1])


@pytest.mark.parametrize(
    "version,supports,exposing", list(itertools.product([10, 17, 18, 21], [False, True], [False, True]))
)
def test_dispatch_rules(store, version, supports, exposing):
    t = PersistentTopic(
        store.managed_ledger(TOPIC),
        interceptors=[INDEX_INTERCEPTOR, TIMESTAMP_INTERCEPTOR],
        exposing_broker_entry_metadata_to_client=exposing,
    )
    client = single("p", 0)
    r = t.publish(client, "p", 0)
    stored = t.ml.read_entry((r.message_id.ledger_id, r.message_id.entry_id))
    out = t.dispatch_bytes(stored, version, supports)
    if version >= 18 and supports and exposing:
        assert out == stored
    elif version < 11:
        assert out == client[6:]  # checksum skipped too
    else:
        assert out == client
    assert t.ml.read_entry((r.message_id.ledger_id, r.message_id.entry_id)) == stored


# ------------------------------------------------------------------------------ deduplication


def dedup_topic(store, **kw):
    return PersistentTopic(store.managed_ledger(TOPIC), deduplication=True, **kw)


def test_dup_unknown_notdup_and_batches(store):
    t = dedup_topic(store)
    d = t.deduplication
    assert t.publish(batch("p", 0, 5), "p", 0, 4, num_messages=5).status == "OK"
    assert t.last_sequence_id("p") == 4
    for seq in range(5):  # any message of the persisted batch is a duplicate
        assert t.publish(single("p", seq), "p", seq).status == "DUPLICATE"
    assert t.publish(batch("p", 5, 3), "p", 5, 7, num_messages=3).status == "OK"
    # pushed but not persisted yet: Unknown
    assert d.is_duplicate("p", 8, 9) is MessageDupStatus.NotDup
    assert d.is_duplicate("p", 9) is MessageDupStatus.Unknown
    assert d.is_duplicate("p", 7) is MessageDupStatus.Dup
    assert t.publish(single("p", 9), "p", 9).status == "UNKNOWN"
    assert t.publish(single("q", 0), "q", 0).status == "OK"  # producers are independent
    assert t.last_sequence_id("nobody") == -1


def test_chunks_only_the_last_is_checked(store):
    t = dedup_topic(store)
    d = t.deduplication
    t.publish(single("p", 3), "p", 3)
    assert d.is_duplicate("p", 3, is_chunk=True, is_last_chunk=False) is MessageDupStatus.NotDup
    assert d.is_duplicate("p", 3, is_chunk=True, is_last_chunk=True) is MessageDupStatus.Dup
    body = b"c" * 30
    for cid in range(3):
        md = pk.message_metadata("p", 4, 1, uuid="p-4", chunk_id=cid, num_chunks_from_msg=3, total_chunk_msg_size=30)
        r = t.publish(pk.encode_entry(md, body[cid * 10 : (cid + 1) * 10]), "p", 4, is_chunk=True)
        assert r.status == "OK"
    md = pk.message_metadata("p", 4, 1, uuid="p-4", chunk_id=2, num_chunks_from_msg=3, total_chunk_msg_size=30)
    assert t.publish(pk.encode_entry(md, body[20:]), "p", 4, is_chunk=True).status == "DUPLICATE"


def test_snapshot_every_n_entries_and_recovery_by_replay(store):
    t = dedup_topic(store, deduplication_config=DeduplicationConfig(entries_interval=3))
    for i in range(7):
        t.publish(single("p", i), "p", i)
    t.publish(single("q", 100), "q", 100)
    cursor = t.ml.open_cursor(DEDUPLICATION_CURSOR_NAME)
    assert cursor.properties == {"p": 5}  # snapshot at the 6th entry
    assert (cursor.mark_delete_position.entry_id) == 5
    t.close()
    t2 = dedup_topic(store, deduplication_config=DeduplicationConfig(entries_interval=3))
    assert t2.deduplication.replayed_entries == 2
    assert t2.last_sequence_id("p") == 6 and t2.last_sequence_id("q") == 100
    assert t2.publish(single("p", 6), "p", 6).status == "DUPLICATE"
    assert t2.publish(single("p", 7), "p", 7).status == "OK"


def chunk(producer, seq, cid, n):
    md = pk.message_metadata(producer, seq, 1, uuid=f"{producer}-{seq}", chunk_id=cid, num_chunks_from_msg=n,
                             total_chunk_msg_size=n)  # fmt: skip
    return pk.encode_entry(md, b"c")


def test_every_chunk_counts_towards_the_snapshot(store):
    """``recordMessagePersistedNormal``: each persisted entry, every chunk included, counts towards the
    next snapshot; only the last chunk moves the persisted sequence id."""
    t = dedup_topic(store, deduplication_config=DeduplicationConfig(entries_interval=3))
    d = t.deduplication
    for cid in range(2):
        assert t.publish(chunk("p", 0, cid, 3), "p", 0, is_chunk=True).status == "OK"
        assert d.snapshot_counter == cid + 1 and "p" not in d.persisted
    t.publish(chunk("p", 0, 2, 3), "p", 0, is_chunk=True)
    cursor = t.ml.open_cursor(DEDUPLICATION_CURSOR_NAME)
    assert (cursor.mark_delete_position.entry_id, cursor.properties) == (2, {"p": 0})
    assert d.snapshot_counter == 0


def test_a_marker_is_not_recorded_as_persisted(store):
    """``recordMessagePersisted`` returns at once for a marker: no sequence id, no snapshot count."""
    t = dedup_topic(store, deduplication_config=DeduplicationConfig(entries_interval=2))
    d = t.deduplication
    t.publish(single("p", 0), "p", 0)
    marker = pk.encode_entry(pk.message_metadata("p", 100, 1000, marker_type=20), b"")
    assert t.publish(marker, "p", 100).status == "OK"
    assert d.persisted == {"p": 0} and d.snapshot_counter == 1
    assert t.ml.open_cursor(DEDUPLICATION_CURSOR_NAME).properties == {}


def test_replay_counts_the_entries_replayed_and_leaves_their_producers_inactive(store):
    """``replayCursor``: ``snapshotCounter`` is the number of entries replayed (a snapshot once it reaches
    the interval), and every producer replayed is inactive until it connects, so it can be purged."""
    clock = Clock()
    cfg = DeduplicationConfig(entries_interval=5, producer_inactivity_timeout_minutes=1)
    t = dedup_topic(store, deduplication_config=cfg, clock=clock)
    for i in range(3):
        t.publish(single("p", i), "p", i)
    t.close()
    t = dedup_topic(store, deduplication_config=cfg, clock=clock)
    d = t.deduplication
    assert (d.replayed_entries, d.snapshot_counter, d.persisted) == (3, 3, {"p": 2})
    assert "p" in d.inactive_producers
    t.publish(single("q", 0), "q", 0)
    fifth = t.publish(single("q", 1), "q", 1).message_id  # the 5th entry since the last snapshot
    cursor = t.ml.open_cursor(DEDUPLICATION_CURSOR_NAME)
    md = cursor.mark_delete_position
    assert ((md.ledger_id, md.entry_id), cursor.properties) == ((fifth.ledger_id, fifth.entry_id), {"p": 2, "q": 1})
    clock.t += 61_000
    assert d.purge_inactive_producers() == ["p"]
    assert t.last_sequence_id("p") == -1
    t.close()
    t = dedup_topic(store, deduplication_config=DeduplicationConfig(entries_interval=1), clock=clock)
    assert t.deduplication.snapshot_counter == 0  # nothing after the snapshot


def test_time_based_snapshot(store):
    clock = Clock()
    t = dedup_topic(store, deduplication_config=DeduplicationConfig(snapshot_interval_seconds=120), clock=clock)
    t.publish(single("p", 0), "p", 0)
    assert not t.deduplication.take_snapshot_if_due()
    clock.t += 121_000
    assert t.deduplication.take_snapshot_if_due()
    assert t.ml.open_cursor(DEDUPLICATION_CURSOR_NAME).properties == {"p": 0}
    clock.t += 121_000
    assert not t.deduplication.take_snapshot_if_due()  # nothing new beyond the mark-delete


def test_inactive_producers_are_purged(store):
    clock = Clock()
    t = dedup_topic(store, deduplication_config=DeduplicationConfig(producer_inactivity_timeout_minutes=1), clock=clock)
    d = t.deduplication
    t.publish(single("gone", 0), "gone", 0)
    t.publish(single("stays", 0), "stays", 0)
    d.producer_added("stays")
    d.producer_removed("gone")
    clock.t += 30_000
    assert d.purge_inactive_producers() == []
    clock.t += 31_000
    assert d.purge_inactive_producers() == ["gone"]
    assert t.last_sequence_id("gone") == -1 and t.last_sequence_id("stays") == 0


def test_producer_limit_in_snapshots(store):
    t = dedup_topic(store, deduplication_config=DeduplicationConfig(entries_interval=1, max_number_of_producers=2))
    for name in ["c", "a", "b"]:
        t.publish(single(name, 1), name, 1)
    assert t.ml.open_cursor(DEDUPLICATION_CURSOR_NAME).properties == {"a": 1, "b": 1}


def test_enable_and_disable_at_run_time(store):
    t = PersistentTopic(store.managed_ledger(TOPIC), deduplication=False)
    assert t.publish(single("p", 0), "p", 0).status == "OK"
    assert t.publish(single("p", 0), "p", 0).status == "OK"  # off: stored twice
    t.deduplication.set_enabled(True)
    assert t.deduplication.is_enabled
    assert t.publish(single("p", 1), "p", 1).status == "OK"
    assert t.publish(single("p", 1), "p", 1).status == "DUPLICATE"
    t.deduplication.set_enabled(False)
    assert DEDUPLICATION_CURSOR_NAME not in [c.name for c in t.ml.cursors()]
    assert t.last_sequence_id("p") == -1
    assert t.publish(single("p", 1), "p", 1).status == "OK"


def test_failed_add_resets_pushed_so_the_resend_is_stored(store, monkeypatch):
    t = dedup_topic(store)
    with monkeypatch.context() as m:
        m.setattr(store.bookie, "add_entry", lambda *a, **k: (_ for _ in ()).throw(OSError("no bookie")))
        assert t.publish(single("p", 0), "p", 0).status == "ERROR"
    assert t.last_sequence_id("p") == -1
    assert t.publish(single("p", 0), "p", 0).status == "OK"


def test_ttl_does_not_move_the_dedup_cursor(store):
    from pulsarkit.broker.expiry import apply_ttl

    clock = Clock()
    t = dedup_topic(store, clock=clock)
    sub = t.ml.open_cursor("sub", initial_position="earliest")
    for i in range(5):
        t.publish(single("p", i, clock.t), "p", i)
    dedup_cursor = t.ml.open_cursor(DEDUPLICATION_CURSOR_NAME)
    before = dedup_cursor.mark_delete_position
    results = apply_ttl(t.ml, ttl_seconds=1, now_ms=clock.t + 10_000)
    assert [r.cursor for r in results] == ["sub"]
    assert sub.mark_delete_position.entry_id == 4
    assert dedup_cursor.mark_delete_position == before
