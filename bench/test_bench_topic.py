"""Broker pipeline benchmarks (issue 4): publishes per second through PersistentTopic with and without
deduplication and the PIP-70 interceptors, against a managed ledger's own add_entry; and seek by time
on a topic of one million entries (binary search) against a linear scan. Smoke runs use small sizes.
"""

from __future__ import annotations

import itertools

import pulsarkit as pk
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pulsarkit.broker import INDEX_INTERCEPTOR, TIMESTAMP_INTERCEPTOR, PersistentTopic
from pulsarkit.managed_ledger import ManagedLedgerConfig, Store

_names = itertools.count()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = Store.open(tmp_path_factory.mktemp("bench-topic"), sync=False)
    yield s
    s.close()


def _entries(n: int) -> list[bytes]:
    # 10-message batches of ~100-byte JSON messages, like a modest producer.
    out = []
    for i in range(n):
        md = pk.message_metadata("bench-producer", i * 10, 1_700_000_000_000 + i)
        md.highest_sequence_id = i * 10 + 9
        out.append(
            pk.encode_batch(md, [b'{"order": %d, "sku": "SKU-%03d", "qty": 3}' % (i * 10 + k, k) for k in range(10)])
        )
    return out


VARIANTS = {
    "candidate": dict(interceptors=[INDEX_INTERCEPTOR, TIMESTAMP_INTERCEPTOR], deduplication=True),
    "topic-plain": dict(interceptors=[], deduplication=False),
    "topic-dedup": dict(interceptors=[], deduplication=True),
    "topic-interceptors": dict(interceptors=[INDEX_INTERCEPTOR, TIMESTAMP_INTERCEPTOR], deduplication=False),
}


@pytest.mark.parametrize("side", ["ml-add_entry", *VARIANTS])
def test_publish_rate(benchmark, ratios, store, full_size, side):
    n = 20_000 if full_size else 200
    data = _entries(n)
    benchmark.group = "publish"
    cfg = ManagedLedgerConfig(max_entries_per_ledger=50_000)

    def setup():
        ml = store.managed_ledger(f"public/default/persistent/bench-{next(_names)}", cfg)
        target = ml if side == "ml-add_entry" else PersistentTopic(ml, **VARIANTS[side])
        return (target,), {}

    def run(target):
        if side == "ml-add_entry":
            for i, d in enumerate(data):
                target.add_entry(d, num_messages=10)
            ml = target
        else:
            for i, d in enumerate(data):
                r = target.publish(d, "bench-producer", i * 10, i * 10 + 9, num_messages=10)
                assert r.status == "OK"
            ml = target.ml
        assert ml.number_of_entries == n
        ml.close()

    benchmark.pedantic(run, setup=setup, rounds=3 if full_size else 1)
    label = "ManagedLedger.add_entry" if side == "ml-add_entry" else f"PersistentTopic.publish {VARIANTS[side]}"
    ratios.add(benchmark, f"publish {n} batches", side, label, items=n, unit="entry")


@pytest.fixture(scope="module")
def big_topic(store, full_size):
    n = 1_000_000 if full_size else 5_000
    clock = [1_700_000_000_000]
    ml = store.managed_ledger(
        "public/default/persistent/bench-seek",
        ManagedLedgerConfig(max_entries_per_ledger=50_000, minimum_rollover_time_ms=0),
    )
    topic = PersistentTopic(ml, interceptors=[TIMESTAMP_INTERCEPTOR], clock=lambda: clock[0])
    md = pk.message_metadata("p", 0, 1)
    for i in range(n):
        clock[0] += 10
        md.sequence_id = i
        md.publish_time = clock[0] - 5
        ml.add_entry(pk.encode_entry(md, b"x" * 64))
    ml.flush()
    return topic, n, clock[0]


def linear_scan(topic, target_ms: int, chunk: int = 8192):
    """Reads forward in chunks, decoding entry timestamps with the bulk kernel, until one is >= T."""
    ml = topic.ml
    pos = ml.first_position
    while pos is not None:
        rows = ml.read(pos, chunk)
        if not rows:
            return None
        meta = pk.bulk.decode_metadata(pa.array([d for _, d in rows], pa.binary()))
        ts = pc.coalesce(meta.column("broker_timestamp"), meta.column("publish_time")).to_pylist()
        for (p, _), t in zip(rows, ts):
            if t >= target_ms:
                return p
        pos = ml.next_valid_position(rows[-1][0])
    return None


@pytest.mark.parametrize("side", ["linear-scan", "candidate"])
def test_seek_by_time(benchmark, ratios, big_topic, full_size, side):
    topic, n, last = big_topic
    target = 1_700_000_000_000 + 10 * (n * 3 // 4) + 1  # three quarters in
    benchmark.group = "seek by time"
    if side == "candidate":
        pos = benchmark.pedantic(
            topic.find_position_by_time, args=(target,), rounds=20 if full_size else 2, warmup_rounds=1
        )
    else:
        pos = benchmark.pedantic(linear_scan, args=(topic, target), rounds=2 if full_size else 1)
    assert pos == linear_scan(topic, target) if not full_size else pos is not None
    ratios.add(
        benchmark,
        f"seek by time, {n} entries",
        side,
        "PersistentTopic.find_position_by_time" if side == "candidate" else "linear scan, bulk-decoded chunks",
        items=1,
        unit="seek",
    )
