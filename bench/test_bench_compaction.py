"""Topic compaction benchmarks (issue 12): both phases over 1 M keyed messages in one process, against
a plain-Python dict-based compactor doing the same work (phase one over every message, phase two
re-encoding each batch with its retained messages), and the Spark compactor in local mode.
Smoke runs (benchmarks disabled) use 20 k messages."""

from __future__ import annotations

import random

import pulsarkit as pk
import pyarrow as pa
import pytest
from pulsarkit import _native

T0 = 1_700_000_000_000
PER_BATCH = 100


def build(n_messages: int, keys: int, seed: int = 1) -> list[tuple[int, int, bytes]]:
    rng = random.Random(seed)
    rows = []
    for e in range(n_messages // PER_BATCH):
        items = [
            {
                "payload": b"" if rng.random() < 0.05 else b"value-%08d" % rng.randrange(10**8),
                "key": f"key-{rng.randrange(keys)}",
            }
            for _ in range(PER_BATCH)
        ]
        rows.append(
            (
                10 + e // 50_000,
                e % 50_000,
                pk.encode_batch(pk.message_metadata("p", e, T0 + e), items, compression="LZ4"),
            )
        )
    return rows


@pytest.fixture(scope="module")
def topic(full_size):
    n = 1_000_000 if full_size else 20_000
    rows = build(n, keys=n // 20)
    cols = (
        pa.array([r[2] for r in rows], pa.binary()),
        pa.array([r[0] for r in rows], pa.int64()),
        pa.array([r[1] for r in rows], pa.int64()),
    )
    return rows, cols, n


def native_compact(cols):
    latest = _native.LatestForKey()
    latest.add_entries(*cols)
    return latest.compact_entries(*cols).num_rows


def python_compact(rows):
    latest: dict[str, tuple[int, int, int]] = {}
    for lid, eid, data in rows:  # phase one
        for m in pk.Entry.parse(data).messages():
            if m.key is None:
                continue
            if m.payload:
                latest[m.key] = (lid, eid, m.batch_index)
            else:
                latest.pop(m.key, None)
    written = 0
    for lid, eid, data in rows:  # phase two: each batch with only its retained messages
        e = pk.Entry.parse(data)
        kept = [
            {"payload": m.payload, "key": m.key}
            for m in e.messages()
            if m.key is not None and latest.get(m.key) == (lid, eid, m.batch_index)
        ]
        if kept:
            pk.encode_batch(e.metadata, kept, compression="LZ4")
            written += 1
    return written


@pytest.mark.parametrize("side", ["python-dict-compactor", "candidate"])
def test_compaction_single_process(benchmark, ratios, topic, full_size, side):
    rows, cols, n = topic
    benchmark.group = "topic compaction"
    if side == "candidate":
        got = benchmark.pedantic(native_compact, args=(cols,), rounds=3 if full_size else 1)
        label = "LatestForKey.add_entries + compact_entries (both phases, native)"
    else:
        got = benchmark.pedantic(python_compact, args=(rows,), rounds=1)
        label = "dict phase one + re-encoding each batch's retained messages (pk.Entry / pk.encode_batch)"
    assert got > 0
    ratios.add(benchmark, f"compact {n} keyed messages", side, label, items=n, unit="message")
