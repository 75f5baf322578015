"""Randomized fault test for PIP-6 deduplication through the whole publish path.

Each run: a few producers publish single messages and batches with explicit sequence ids; receipts
get lost (the client resends after a timeout), bookie adds fail (the client retries), resends arrive
while the original add is still in flight (Unknown), and the topic is closed and recovered from
storage at random points (snapshot + replay). At the end the topic must hold every message exactly
once and every producer's last_sequence_id must be right.
"""

import random
from collections import Counter

import pulsarkit as pk
import pytest
from pulsarkit.broker import DeduplicationConfig, PersistentTopic
from pulsarkit.managed_ledger import ManagedLedgerConfig, Store

RUNS = 1000
SEED = 20261121


class FaultyBookie:
    """Wraps the bookie's add: may fail, and may run a callback while the add is "in flight"."""

    def __init__(self, bookie, rng):
        self.bookie, self.rng = bookie, rng
        self.real_add = bookie.add_entry
        self.fail_prob = 0.0
        self.in_flight = None
        self.failures = 0
        bookie.add_entry = self.add_entry

    def add_entry(self, *a, **k):
        if self.in_flight is not None:
            cb, self.in_flight = self.in_flight, None
            cb()
        if self.rng.random() < self.fail_prob:
            self.failures += 1
            raise OSError("injected bookie failure")
        return self.real_add(*a, **k)


def one_run(store, bk, rng, run, stats):
    name = f"public/default/persistent/fault-{run}"
    cfg = ManagedLedgerConfig(max_entries_per_ledger=rng.choice([3, 7, 50]), minimum_rollover_time_ms=0)
    interval = rng.choice([1, 2, 5, 1000])

    def open_topic():
        return PersistentTopic(
            store.managed_ledger(name, cfg),
            interceptors=["AppendIndexMetadataInterceptor"],
            deduplication=True,
            deduplication_config=DeduplicationConfig(entries_interval=interval),
        )

    topic = open_topic()
    producers = {f"prod-{i}": 0 for i in range(rng.randint(1, 3))}  # next sequence id to send
    goal = {p: rng.randint(3, 25) for p in producers}
    bk.fail_prob = rng.choice([0.0, 0.05, 0.2])
    sent = Counter()
    steps = 0
    while any(producers[p] < goal[p] for p in producers):
        steps += 1
        assert steps < 5000, "run does not converge"
        p = rng.choice([q for q in producers if producers[q] < goal[q]])
        seq = producers[p]
        n = min(rng.choice([1, 1, 2, 5]), goal[p] - seq)
        if n == 1:
            data = pk.encode_entry(pk.message_metadata(p, seq, 1000 + steps), b"%s:%d" % (p.encode(), seq))
        else:
            data = pk.encode_batch(
                pk.message_metadata(p, seq, 1000 + steps),
                [b"%s:%d" % (p.encode(), s) for s in range(seq, seq + n)],
            )
        if rng.random() < 0.05:  # a resend arrives while this add is in flight

            def resend(topic=topic, data=data, p=p, seq=seq, n=n):
                r = topic.publish(data, p, seq, seq + n - 1, num_messages=n)
                stats["unknown"] += r.status == "UNKNOWN"
                assert r.status in ("UNKNOWN", "DUPLICATE"), r

            bk.in_flight = resend
        for attempt in range(50):
            r = topic.publish(data, p, seq, seq + n - 1, num_messages=n)
            stats[r.status] += 1
            if r.status == "OK":
                sent[p] += n
                if rng.random() < 0.1:  # receipt lost: the client times out and resends
                    stats["lost_receipts"] += 1
                    continue
                break
            if r.status == "DUPLICATE":
                break
            assert r.status in ("ERROR", "UNKNOWN"), r
        else:
            pytest.fail(f"run {run}: {p} seq {seq} never acknowledged")
        bk.in_flight = None
        producers[p] = seq + n
        if rng.random() < 0.08:  # broker restart: close and recover from storage
            stats["recoveries"] += 1
            topic.close()
            topic = open_topic()
            for q in producers:
                assert (
                    topic.last_sequence_id(q) == producers[q] - 1
                    or producers[q] == 0
                    and topic.last_sequence_id(q) == -1
                )
    bk.fail_prob = 0.0
    if rng.random() < 0.5:
        topic.close()
        topic = open_topic()
    seen = Counter()
    for _, data in topic.ml.read(topic.ml.first_position or (0, 0), 10_000) if topic.ml.first_position else []:
        e = pk.Entry.parse(data)
        for m in e.messages():
            seen[m.payload] += 1
    expected = {b"%s:%d" % (p.encode(), s) for p in producers for s in range(goal[p])}
    assert set(seen) == expected, f"run {run}: missing {expected - set(seen)} extra {set(seen) - expected}"
    dups = [k for k, v in seen.items() if v > 1]
    assert not dups, f"run {run}: stored more than once: {dups[:5]}"
    for p in producers:
        assert topic.last_sequence_id(p) == goal[p] - 1
    total = sum(goal.values())
    indexes = [m.index for _, d in topic.ml.read(topic.ml.first_position, 10_000) for m in pk.Entry.parse(d).messages()]
    assert indexes == list(range(total)), f"run {run}: broker index not continuous"
    topic.close()
    stats["messages"] += total


def test_dedup_randomized_faults(tmp_path):
    rng = random.Random(SEED)
    stats = Counter()
    with Store.open(tmp_path / "data", sync=False) as store:
        bk = FaultyBookie(store.bookie, rng)
        for run in range(RUNS):
            one_run(store, bk, rng, run, stats)
        stats["bookie_failures"] = bk.failures
    print(f"\ndedup fault test: {RUNS} runs, seed {SEED}: {dict(stats)}")
    assert stats["ERROR"] > 0 and stats["DUPLICATE"] > 0 and stats["recoveries"] > 0 and stats["unknown"] > 0
