"""Message explode (issue 15): ``bulk.explode_messages`` against the two figures its targets name.

* Uncompressed batches of 100 small messages (4-byte payloads, no key or properties, as a metrics
  producer sends them): messages per second, target 20 M/s. There is no baseline to divide by; the
  ratio row compares it with a Python loop over ``Entry.parse(...).messages()`` so the run has one.
* Compressed batches (LZ4, ZSTD, SNAPPY, ZLIB) of 100 messages of ~1 KiB text with a key and two
  properties: the kernel against decompressing the same entries' payloads with the same native codec
  (``_native.decompress``, one call per entry): target within 1.5x, i.e. a ratio of at least 0.67.

Calls are 200 entries each (about 20 MB of output for the compressed cases), the size the data
sources and ``pulsarkit export`` hand the kernel; one huge call would mostly measure page faults on
fresh output memory.

    python -m pytest bench/test_bench_explode.py -p no:cacheprovider -q --benchmark-enable
"""

from __future__ import annotations

import random

import pulsarkit as pk
import pyarrow as pa
import pytest
from pulsarkit import _native, bulk

WORDS = b"alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
CALL_ENTRIES = 200


def _small_batches(calls: int) -> tuple[list[pa.Array], int]:
    md = pk.message_metadata("metrics", 0, 1_700_000_000_000)
    e = pk.encode_batch(md, [b"m%03d" % i for i in range(100)])
    arrs = [pa.array([e] * CALL_ENTRIES, pa.binary()) for _ in range(calls)]
    return arrs, calls * CALL_ENTRIES * 100


def _text_batch(codec: str) -> bytes:
    rng = random.Random(1)
    items = [
        {
            "payload": b" ".join(rng.choice(WORDS) for _ in range(170)),
            "key": f"key-{i}",
            "properties": {"source": "bench", "n": str(i)},
        }
        for i in range(100)
    ]
    return pk.encode_batch(pk.message_metadata("orders", 0, 1_700_000_000_000), items, compression=codec)


def _explode_all(arrs: list[pa.Array]) -> int:
    return sum(bulk.explode_messages(a).num_rows for a in arrs)


@pytest.mark.parametrize("side", ["loop-entry-messages", "candidate"])
def test_explode_small_uncompressed(benchmark, ratios, full_size, side):
    calls = 50 if full_size else 1
    arrs, n = _small_batches(calls)
    benchmark.group = "explode: batches of 100 small uncompressed messages"
    if side == "candidate":
        rows = benchmark.pedantic(_explode_all, args=(arrs,), rounds=5 if full_size else 1, warmup_rounds=1)
        assert rows == n
        out = bulk.explode_messages(arrs[0])
        assert out.column("payload")[99].as_py() == b"m099" and out.column("error").null_count == out.num_rows
        label = "bulk.explode_messages, one call per 200 entries"
    else:
        # The baseline covers one call's entries only (it is slow); items scale the ratio per message.
        entries = arrs[0].to_pylist()

        def loop() -> int:
            return sum(len(pk.Entry.parse(e).messages()) for e in entries)

        rows = benchmark.pedantic(loop, rounds=3 if full_size else 1, warmup_rounds=1)
        assert rows == CALL_ENTRIES * 100
        n = rows
        label = "loop: Entry.parse(e).messages() per entry"
    ratios.add(benchmark, "explode small uncompressed", side, label, items=n, unit="message")


@pytest.mark.parametrize("codec", ["LZ4", "ZSTD", "SNAPPY", "ZLIB"])
@pytest.mark.parametrize("side", ["decompress-only", "candidate"])
def test_explode_vs_codec(benchmark, ratios, full_size, codec, side):
    e = _text_batch(codec)
    calls = 10 if full_size else 1
    arrs = [pa.array([e] * CALL_ENTRIES, pa.binary()) for _ in range(calls)]
    benchmark.group = f"explode vs decompression: {codec}"
    parsed = pk.Entry.parse(e)
    comp, size = bytes(parsed.payload), parsed.metadata.uncompressed_size
    if side == "candidate":
        rows = benchmark.pedantic(_explode_all, args=(arrs,), rounds=5 if full_size else 1, warmup_rounds=1)
        assert rows == calls * CALL_ENTRIES * 100
        label = "bulk.explode_messages, one call per 200 entries"
    else:

        def decompress_all() -> int:
            total = 0
            for _ in range(calls * CALL_ENTRIES):
                total += len(_native.decompress(codec, comp, size))
            return total

        total = benchmark.pedantic(decompress_all, rounds=5 if full_size else 1, warmup_rounds=1)
        assert total == calls * CALL_ENTRIES * size
        label = f"_native.decompress({codec!r}) of each entry's payload"
    ratios.add(
        benchmark,
        f"explode {codec} batches",
        side,
        label,
        items=calls * CALL_ENTRIES * 100,
        unit="message",
        nbytes=calls * CALL_ENTRIES * size,
    )
