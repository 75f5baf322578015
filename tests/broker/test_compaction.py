"""Topic compaction and the compacted view, checked as Pulsar's ``CompactionTest`` and
``GetLastMessageIdCompactedTest`` check them, against a plain-Python model of the two phases."""

from __future__ import annotations

import random

import pulsarkit as pk
import pytest
from pulsarkit.broker.compaction import EARLIEST, CompactedTopic, CompactionOptions, Compactor, MessagePosition
from pulsarkit.broker.topic_name import COMPACTED_LEDGER_PROPERTY, COMPACTION_CURSOR
from pulsarkit.codec.entry import Entry
from pulsarkit.errors import LedgerNotFoundError
from pulsarkit.managed_ledger.ledger_handle import LedgerHandle
from pulsarkit.managed_ledger.position import Position

CODECS = ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"]
T0 = 1_700_000_000_000


def md(seq, **kw):
    return pk.message_metadata("p", seq, T0 + seq, **kw)


def publish(ml, messages, batch=True, compression="NONE", rng=None):
    """Adds ``(key, payload)`` messages, batched in random-sized batches; returns what was read:
    ``[(position, batch_index, key, payload)]``."""
    rng = rng or random.Random(0)
    out, i, seq = [], 0, 0
    while i < len(messages):
        n = rng.randint(1, 6) if batch else 1
        chunk = messages[i : i + n]
        if batch:
            items = [{"payload": p, **({"key": k} if k is not None else {})} for k, p in chunk]
            pos = ml.add_entry(pk.encode_batch(md(seq), items, compression=compression), num_messages=len(chunk))
            out += [(pos, bi, k, p) for bi, (k, p) in enumerate(chunk)]
        else:
            k, p = chunk[0]
            kw = {"partition_key": k} if k is not None else {}
            pos = ml.add_entry(pk.encode_entry(md(seq, **kw), p, compression=compression))
            out.append((pos, -1, k, p))
        i += n
        seq += n
    return out


def model(read, retain_null_key=False):
    """Pulsar's phase one and two in plain Python: the messages a readCompacted reader gets."""
    latest = {}
    for pos, bi, k, p in read:
        if k is None:
            continue
        if p:
            latest[k] = (pos, bi)
        else:
            latest.pop(k, None)
    return [(pos, bi, k, p) for pos, bi, k, p in read if (k is None and retain_null_key) or latest.get(k) == (pos, bi)]


def view_messages(view, start=None):
    out = []
    for pos, data in view.read_entries(start):
        e = Entry.parse(data)
        for m in e.messages():
            out.append((pos, m.batch_index, m.key, m.payload))
    return out


def keyed(n, keys, rng, tombstone_rate=0.1):
    return [(f"k{rng.randrange(keys)}", b"" if rng.random() < tombstone_rate else b"v%d" % i) for i in range(n)]


@pytest.mark.parametrize("codec", CODECS)
def test_batches_with_mixed_keys_every_codec(store, codec):
    rng = random.Random(codec)
    ml = store.managed_ledger("public/default/persistent/mixed")
    read = publish(ml, keyed(300, 25, rng), compression=codec, rng=rng)
    r = Compactor(store, ml).compact()
    view = CompactedTopic.open(store, ml)
    assert view_messages(view) == model(read)
    assert (r.horizon, view.horizon, view.compacted_ledger_id) == (ml.last_confirmed_entry,) * 2 + (r.ledger_id,)
    # every rewritten batch lists its retained indexes (PIP-429) and keeps its codec
    for _, data in view.compacted_entries():
        e = Entry.parse(data)
        if e.is_batch:
            assert list(e.metadata.compacted_batch_indexes) == [m.batch_index for m in e.messages()]
            assert (
                pk.Entry.parse(data).metadata.compression
                == Entry.parse(ml.read_entry(Position(0, 0))).metadata.compression
            )


def test_unbatched_and_the_compacted_ledgers_metadata(store):
    ml = store.managed_ledger("public/default/persistent/plain")
    read = publish(ml, keyed(100, 10, random.Random(1)), batch=False)
    r = Compactor(store, ml).compact()
    assert view_messages(CompactedTopic.open(store, ml)) == model(read)
    h = LedgerHandle.open(store, r.ledger_id)
    cm = h.custom_metadata
    assert (cm["component"], cm["pulsar/compactedTopic"]) == (b"compacted-ledger", b"persistent://public/default/plain")
    assert h.digest_type == "CRC32" and h.password == b""
    c = ml.cursor(COMPACTION_CURSOR)
    assert c.mark_delete_position == r.horizon and c.properties[COMPACTED_LEDGER_PROPERTY] == r.ledger_id


def test_all_tombstone_batch_is_dropped_and_keyless_follow_retain(store):
    ml = store.managed_ledger("public/default/persistent/tomb")
    read = publish(ml, [("a", b"1"), ("b", b"2"), (None, b"n1")], rng=random.Random(5))
    read += publish(ml, [("a", b""), ("b", b"")], rng=random.Random(5))  # one batch of tombstones
    read += publish(ml, [(None, b"n2"), ("c", b"3")], batch=False)
    Compactor(store, ml).compact()
    assert view_messages(CompactedTopic.open(store, ml)) == model(read) == [read[-1]]
    ml2 = store.managed_ledger("public/default/persistent/tomb2")
    read2 = publish(ml2, [("a", b"1"), (None, b"n1"), ("a", b"")], rng=random.Random(5))
    Compactor(store, ml2, CompactionOptions(retain_null_key=True)).compact()
    assert [m[2:] for m in view_messages(CompactedTopic.open(store, ml2))] == [(None, b"n1")]
    assert view_messages(CompactedTopic.open(store, ml2)) == model(read2, retain_null_key=True)


def test_encrypted_batches_are_kept_whole_by_the_entry_key(store):
    ml = store.managed_ledger("public/default/persistent/enc")

    def encrypted(seq):
        m = md(seq, num_messages_in_batch=3, partition_key="e")
        m.encryption_keys.add(key="k", value=b"x")
        return pk.encode_entry(m, b"opaque-%d" % seq)

    p0 = ml.add_entry(encrypted(0))
    p1 = ml.add_entry(encrypted(1))
    Compactor(store, ml).compact()
    view = CompactedTopic.open(store, ml)
    assert [pos for pos, _ in view.read_entries()] == [p1] and p0 < p1
    assert view.last_message_position()[:3] == (p1.ledger_id, p1.entry_id, 2)  # batch_size - 1, never opened


def test_incremental_compaction_deletes_the_previous_ledger_only_after(store):
    rng = random.Random(7)
    ml = store.managed_ledger("public/default/persistent/incr")
    read = publish(ml, keyed(200, 20, rng), rng=rng)
    first = Compactor(store, ml).compact()
    read += publish(ml, keyed(200, 30, rng), rng=rng)
    second = Compactor(store, ml).compact()
    assert second.previous_ledger_id == first.ledger_id != second.ledger_id
    with pytest.raises(LedgerNotFoundError):
        store.delete_ledger(first.ledger_id)
    assert view_messages(CompactedTopic.open(store, ml)) == model(read)
    assert Compactor(store, ml).compact().ledger_id is None  # nothing new


def test_a_failed_run_leaves_the_old_state(store, monkeypatch):
    rng = random.Random(9)
    ml = store.managed_ledger("public/default/persistent/fail")
    read = publish(ml, keyed(100, 10, rng), rng=rng)
    first = Compactor(store, ml).compact()
    publish(ml, keyed(50, 10, rng), rng=rng)
    before = store.metadata.ledger_ids()
    calls = {"n": 0}
    real = LedgerHandle.add_entry

    def flaky(self, data):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError("bookie full")
        return real(self, data)

    monkeypatch.setattr(LedgerHandle, "add_entry", flaky)
    with pytest.raises(OSError):
        Compactor(store, ml).compact()
    monkeypatch.undo()
    view = CompactedTopic.open(store, ml)
    assert (view.compacted_ledger_id, view.horizon) == (first.ledger_id, first.horizon)
    assert store.metadata.ledger_ids() == before  # the half-written ledger is gone
    assert [m for m in view_messages(view) if m[0] <= first.horizon] == model(read)


def test_retained_only_format_reads_the_same_messages_in_fewer_bytes(store):
    msgs = keyed(300, 15, random.Random(11))
    views = []
    for name, retained_only in (("placeholders", False), ("small", True)):
        ml = store.managed_ledger(f"public/default/persistent/{name}")
        read = publish(ml, msgs, compression="LZ4", rng=random.Random(11))
        Compactor(store, ml, CompactionOptions(retained_only=retained_only)).compact()
        views.append(CompactedTopic.open(store, ml))
        assert view_messages(views[-1]) == model(read)
    sizes = [sum(len(d) for _, d in v.compacted_entries()) for v in views]
    assert sizes[1] < sizes[0]
    for _, data in views[1].compacted_entries():
        e = Entry.parse(data)
        if e.is_batch:  # the payload holds only the retained records, under their real indexes
            assert [m.batch_index for m in e.messages()] == list(e.metadata.compacted_batch_indexes)


# ---------------------------------------------------------------- GetLastMessageIdCompactedTest


def test_last_message_id_batch_index_after_compaction(store):
    ml = store.managed_ledger("public/default/persistent/lastid")
    pos = ml.add_entry(
        pk.encode_batch(
            md(0),
            [
                {"payload": b"1", "key": "a"},
                {"payload": b"2", "key": "b"},
                {"payload": b"3", "key": "a"},
                {"payload": b"", "key": "b"},
            ],
        ),
        num_messages=4,
    )
    Compactor(store, ml).compact()
    view = CompactedTopic.open(store, ml)
    assert view.last_message_id()[:3] == (pos.ledger_id, pos.entry_id, 2)  # not 3: index 3 was a tombstone
    assert view.has_message_available(Position(-1, -1)) and not view.has_message_available(pos, 2)


def test_tombstone_at_the_tail_and_an_empty_compacted_ledger(store):
    ml = store.managed_ledger("public/default/persistent/tail")
    first = ml.add_entry(pk.encode_entry(md(0, partition_key="a"), b"v"))
    ml.add_entry(pk.encode_entry(md(1, partition_key="b"), b"w"))
    ml.add_entry(pk.encode_entry(md(2, partition_key="b"), b""))  # tombstone at the tail
    Compactor(store, ml).compact()
    view = CompactedTopic.open(store, ml)
    assert view.last_message_id() == MessagePosition(first.ledger_id, first.entry_id, -1, T0)
    ml.add_entry(pk.encode_entry(md(3, partition_key="a"), b""))
    Compactor(store, ml).compact()
    view = CompactedTopic.open(store, ml)
    assert view.last_message_id() == EARLIEST and not view.has_message_available(Position(-1, -1))
    assert list(view.read_entries()) == []
    tail = ml.add_entry(pk.encode_batch(md(4), [b"x", b"y"]), num_messages=2)
    # an entry past the horizon answers with its own last batch index
    assert CompactedTopic.open(store, ml).last_message_id()[:3] == (tail.ledger_id, tail.entry_id, 1)
    # a batch of one (what a batching producer sends when its timer fires on one message) answers index 0,
    # as ServerCnx.getLargestBatchIndexWhenPossible does; an entry that is not a batch answers -1
    one = ml.add_entry(pk.encode_batch(md(5), [b"z"]), num_messages=1)
    assert CompactedTopic.open(store, ml).last_message_id()[:3] == (one.ledger_id, one.entry_id, 0)
    plain = ml.add_entry(pk.encode_entry(md(6), b"w"))
    assert CompactedTopic.open(store, ml).last_message_id()[:3] == (plain.ledger_id, plain.entry_id, -1)


def test_find_start_point_and_seek_by_publish_time(store):
    ml = store.managed_ledger("public/default/persistent/seek")
    ps = [ml.add_entry(pk.encode_entry(md(i, partition_key=f"k{i}"), b"v")) for i in range(10)]
    Compactor(store, ml).compact()
    view = CompactedTopic.open(store, ml)
    assert view.find_start_point(ps[3]) == 3 and view.find_start_point(Position(-1, -1)) == 0
    assert view.find_start_point(Position(ps[-1].ledger_id, ps[-1].entry_id + 1)) == view.NEWER_THAN_COMPACTED
    assert view.find_entry_by_publish_time(T0 + 4) == ps[4]
    assert view.find_entry_by_publish_time(T0 + 99) is None
    assert [p for p, _ in view.read_entries(ps[7])] == ps[7:]


def test_seek_by_broker_index_in_the_compacted_ledger(store):
    ml = store.managed_ledger("public/default/persistent/indexed")
    ps = []
    for i in range(6):
        e = pk.add_broker_entry_metadata(pk.encode_entry(md(i, partition_key=f"k{i}"), b"v"), index=i * 10 + 9)
        ps.append(ml.add_entry(e))
    Compactor(store, ml).compact()
    view = CompactedTopic.open(store, ml)
    assert view.find_entry_by_index(0) == ps[0] and view.find_entry_by_index(25) == ps[2]
    assert view.find_entry_by_index(59) == ps[5] and view.find_entry_by_index(60) is None
