"""A real client (pulsar-client, the C++ client underneath) reads pulsarkit's compacted ledger through
the fake broker with ``is_read_compacted=True``: exactly the retained messages, with their batch
indexes, and the right ``has_message_available`` answers, for the default format (placeholders and
``compacted_batch_indexes``, which this client predates) with every codec, a tombstone at the tail,
an all-tombstone topic, and messages published after the horizon.

Found on the way: this C++ client does not drop ``compacted_out`` placeholders (the Java client does);
it hands them to the application as empty, keyless messages. It does the same with the compacted
ledger a real Pulsar 4.0.7 wrote (see the standalone oracle test
``test_the_cpp_client_shows_placeholders_of_pulsars_own_compacted_ledger``),
so the expected view below adds them back where a compacted batch has them."""

from __future__ import annotations

import logging
import random

import pytest
from conftest import require_module
from pulsarkit.broker.compaction import CompactedTopic
from pulsarkit.codec.entry import Entry
from pulsarkit.testing.compaction import CompactedTopicOracle
from pulsarkit.testing.fake_broker import FakeBroker

pulsar = require_module("pulsar", "pip install pulsar-client")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]
CODECS = {
    "NONE": pulsar.CompressionType.NONE,
    "LZ4": pulsar.CompressionType.LZ4,
    "ZLIB": pulsar.CompressionType.ZLib,
    "ZSTD": pulsar.CompressionType.ZSTD,
    "SNAPPY": pulsar.CompressionType.SNAPPY,
}
_log = logging.getLogger("pulsarkit.tests.pulsar-client")
_log.setLevel(logging.WARNING)


@pytest.fixture
def broker():
    b = FakeBroker().start()
    yield b
    b.stop()
    assert b.errors == [], b.errors


@pytest.fixture
def client(broker):
    c = pulsar.Client(broker.service_url, operation_timeout_seconds=10, connection_timeout_ms=5000, logger=_log)
    yield c
    c.close()


def produce(client, topic, messages, codec="NONE", batch=True):
    p = client.create_producer(
        topic,
        compression_type=CODECS[codec],
        batching_enabled=batch,
        batching_max_messages=5,
        batching_max_publish_delay_ms=50,
    )
    for k, v in messages:
        if k is None:
            p.send_async(v, None)
        else:
            p.send_async(v, None, partition_key=k)
    p.flush()
    p.close()


def read_compacted(client, topic):
    r = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    got, available = [], r.has_message_available()
    while r.has_message_available():
        m = r.read_next(5000)
        mid = m.message_id()
        got.append(((mid.ledger_id(), mid.entry_id(), mid.batch_index()), m.partition_key() or None, m.data()))
    r.close()
    return available, got


def expected(broker, topic):
    """What pulsarkit's compacted view says a readCompacted reader gets (the oracle's own answer)."""
    out = []
    v = CompactedTopic.open(broker.store, broker._topic(topic).persistent.ml)
    for pos, data in v.read_entries():
        for m in Entry.parse(data).messages():
            out.append(((pos.ledger_id, pos.entry_id, m.batch_index), m.key, bytes(m.payload)))
    return v, out


def as_cpp_client_sees(view, retained):
    """The retained messages plus, for each rewritten batch, its placeholders as empty keyless messages."""
    out = list(retained)
    for pos, data in view.compacted_entries():
        e = Entry.parse(data)
        if e.is_batch:
            kept = {m.batch_index for m in e.messages()}
            n = e.metadata.num_messages_in_batch
            out += [((pos.ledger_id, pos.entry_id, i), None, b"") for i in range(n) if i not in kept]
    return sorted(out, key=lambda m: m[0])


def model(messages):
    latest = {}
    for i, (k, v) in enumerate(messages):
        if k is not None:
            latest[k] = i if v else None
    return [(k, v) for i, (k, v) in enumerate(messages) if k is not None and latest.get(k) == i]


@pytest.mark.parametrize("codec", list(CODECS))
def test_read_compacted_gets_exactly_the_retained_messages(broker, client, codec):
    rng = random.Random(codec)
    msgs = [(f"k{rng.randrange(8)}", b"" if rng.random() < 0.15 else b"v%d" % i) for i in range(60)]
    msgs += [("k1", b"")]  # a tombstone at the tail
    topic = f"persistent://public/default/compacted-{codec.lower()}"
    produce(client, topic, msgs, codec)
    broker.compact(topic)
    available, got = read_compacted(client, topic)
    view, want = expected(broker, topic)
    assert got == as_cpp_client_sees(view, want)
    assert [(k, v) for _, k, v in want] == model(msgs)
    assert available == bool(want)
    assert any(mid[2] > 0 for mid, _, _ in want), "batch indexes survive compaction"


def test_all_tombstones_leave_nothing_available(broker, client):
    topic = "persistent://public/default/all-tombstones"
    produce(client, topic, [("a", b"1"), ("b", b"2"), ("a", b""), ("b", b"")])
    broker.compact(topic)
    assert read_compacted(client, topic) == (False, [])


def test_messages_after_the_horizon_follow_the_compacted_ones(broker, client):
    topic = "persistent://public/default/tail-after-horizon"
    produce(client, topic, [("a", b"1"), ("b", b"2"), ("a", b"3")])
    broker.compact(topic)
    produce(client, topic, [("b", b"4"), ("c", b"5")], batch=False)
    available, got = read_compacted(client, topic)
    view, want = expected(broker, topic)
    assert available and [(k, v) for _, k, v in want] == [("b", b"2"), ("a", b"3"), ("b", b"4"), ("c", b"5")]
    assert got == as_cpp_client_sees(view, want)


def test_the_oracle_fixture_agrees_with_the_real_client(broker, client):
    """``CompactedTopicOracle`` (for people testing clients) answers what the real client observed."""
    msgs = [("a", b"1"), ("b", b"2"), ("a", b""), ("c", b"3")]
    topic = "persistent://public/default/oracle-check"
    produce(client, topic, msgs, batch=False)
    broker.compact(topic)
    available, got = read_compacted(client, topic)
    with CompactedTopicOracle() as t:
        for k, v in msgs:
            t.send(k, v)
        t.compact()
        assert [(m.key, m.payload) for m in t.expected_messages()] == [(k, v) for _, k, v in got]
        assert t.has_message_available() == available
