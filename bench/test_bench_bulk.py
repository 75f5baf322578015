"""Bulk kernels over one million 1 KiB stored entries (a pyarrow BinaryArray, ~1 GiB) against per-entry
Python loops doing the same work: over pulsarkit's own single-entry functions, and over the ``crc32c``
package. Smoke runs (benchmarks disabled) use 20,000 entries.
"""

from __future__ import annotations

import array
import random
import struct

import crc32c as crc32c_pypi
import pulsarkit as pk
import pyarrow as pa
import pytest
from pulsarkit import _native

ENTRY_SIZE = 1024
TEMPLATES = 4096
CORRUPT_EVERY = 1000  # one entry in a thousand has a flipped payload byte


def _template(i: int, rng: random.Random) -> bytes:
    """One stored entry of exactly ENTRY_SIZE bytes: broker entry metadata, checksum, metadata, JSON payload."""
    md = pk.message_metadata(
        f"standalone-0-{i % 8}",
        i,
        1_700_000_000_000 + i,
        partition_key=f"d-{i % 97}",
        properties={"app": "bench-ingest"},
        uncompressed_size=900,  # placeholder of the final varint width, fixed below
    )
    head = pk.add_broker_entry_metadata(pk.encode_entry(md, b""), 1_700_000_000_000 + i, 1_000_000 + i)
    n = ENTRY_SIZE - len(head)
    line = b'{"device":"d-%d","seq":%d,"temp":%.2f,"status":"ok"}\n' % (i % 97, i, rng.uniform(10, 40))
    payload = (line * (n // len(line) + 1))[:n]
    md.uncompressed_size = n
    e = pk.add_broker_entry_metadata(pk.encode_entry(md, payload), 1_700_000_000_000 + i, 1_000_000 + i)
    assert len(e) == ENTRY_SIZE
    return e


@pytest.fixture(scope="module")
def entries(full_size):
    """(BinaryArray, list of bytes) holding the same N entries, every CORRUPT_EVERY-th one corrupt."""
    n = 1_000_000 if full_size else 20_000
    rng = random.Random(3)
    tmpl = [_template(i, rng) for i in range(TEMPLATES)]
    values = bytearray(b"".join(tmpl[i % TEMPLATES] for i in range(n)))  # contiguous, as in a real column
    for i in range(0, n, CORRUPT_EVERY):
        values[(i + 1) * ENTRY_SIZE - 1] ^= 0x01
    offsets = array.array("i", range(0, (n + 1) * ENTRY_SIZE, ENTRY_SIZE))
    arr = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(values)])
    arr.validate(full=False)
    return arr, arr.to_pylist()


def expected_ok(n: int) -> list[bool]:
    return [i % CORRUPT_EVERY != 0 for i in range(n)]


# --- strip --------------------------------------------------------------------------------------------


def strip_loop(items: list[bytes]) -> list[bytes]:
    strip = pk.strip_broker_entry_metadata
    return [strip(b) for b in items]


def _assert_same_binary(col: pa.Array, items: list[bytes]) -> None:
    assert len(col) == len(items)
    step = 65536
    for s in range(0, len(items), step):
        assert col.slice(s, step).to_pylist() == items[s : s + step]


@pytest.mark.parametrize("side", ["loop-pk-strip", "ref-copy", "candidate"])
def test_strip(benchmark, ratios, entries, side):
    arr, items = entries
    benchmark.group = "strip 1M x 1 KiB"
    if side == "candidate":
        label = "pulsarkit.bulk.strip_broker_entry_metadata(arr)"
        out = benchmark.pedantic(pk.bulk.strip_broker_entry_metadata, args=(arr,), rounds=5, warmup_rounds=1)
        assert out.column("error").null_count == len(arr)
        got = out.column("entry")
        del out
        assert got.type == pa.binary()
        # Same bytes as the per-entry function (fully compared in the baseline test), sampled here.
        sample = list(range(0, len(items), 97))
        assert got.take(pa.array(sample)).to_pylist() == [pk.strip_broker_entry_metadata(items[i]) for i in sample]
    elif side == "ref-copy":
        # Not a baseline: one plain copy of the whole column into fresh memory, the floor for any
        # strip that returns a new binary array.
        label = "reference: values buffer .to_pybytes() (one copy of the column)"
        values = arr.buffers()[2]
        got = benchmark.pedantic(values.to_pybytes, rounds=5, warmup_rounds=1)
        assert len(got) == len(arr) * ENTRY_SIZE
    else:
        label = "loop: [pk.strip_broker_entry_metadata(b) for b in list_of_bytes]"
        got = benchmark.pedantic(strip_loop, args=(items,), rounds=3, warmup_rounds=1)
        bulk = pk.bulk.strip_broker_entry_metadata(arr).column("entry")
        _assert_same_binary(bulk, got)
        del bulk
    del got
    ratios.add(benchmark, "strip 1M x 1 KiB", side, label, items=len(arr), unit="entry", nbytes=arr.nbytes)


BATCH = 10_000  # Spark's default arrow.maxRecordsPerBatch


def strip_batches_bulk(batches: list[pa.Array]) -> int:
    n = 0
    for b in batches:  # each result is dropped before the next batch, as in a streaming job
        n += len(pk.bulk.strip_broker_entry_metadata(b))
    return n


def strip_batches_loop(lists: list[list[bytes]]) -> int:
    strip, n = pk.strip_broker_entry_metadata, 0
    for items in lists:
        n += len([strip(b) for b in items])
    return n


@pytest.mark.parametrize("side", ["loop-pk-strip", "candidate"])
def test_strip_batches(benchmark, ratios, entries, side):
    """The same strip as a stream of 10k-entry slices, each result dropped before the next: the
    allocator can then reuse memory, which a single 1 GiB result cannot."""
    arr, items = entries
    case = f"strip {len(arr) // BATCH} x {BATCH // 1000}k batches"
    benchmark.group = "strip batches"
    if side == "candidate":
        label = "for each 10k slice: pulsarkit.bulk.strip_broker_entry_metadata(slice)"
        batches = [arr.slice(s, BATCH) for s in range(0, len(arr), BATCH)]
        # Slices share the parent's buffers: results must still be exactly the slice's entries.
        assert pk.bulk.strip_broker_entry_metadata(batches[-1]).column("entry").to_pylist() == strip_loop(
            items[-len(batches[-1]) :]
        )
        assert benchmark.pedantic(strip_batches_bulk, args=(batches,), rounds=5, warmup_rounds=1) == len(arr)
    else:
        label = "for each 10k list: [pk.strip_broker_entry_metadata(b) for b in list]"
        lists = [items[s : s + BATCH] for s in range(0, len(items), BATCH)]
        assert benchmark.pedantic(strip_batches_loop, args=(lists,), rounds=3, warmup_rounds=1) == len(arr)
    ratios.add(benchmark, case, side, label, items=len(arr), unit="entry", nbytes=arr.nbytes)


# --- verify -------------------------------------------------------------------------------------------


def verify_entry_parse(items: list[bytes]) -> list[bool]:
    parse, mismatch = pk.Entry.parse, pk.ChecksumMismatchError
    out = []
    for b in items:
        try:
            parse(b)
            out.append(True)
        except mismatch:
            out.append(False)
    return out


def verify_layout(items: list[bytes]) -> list[bool]:
    layout, mismatch = _native.parse_entry_layout, pk.ChecksumMismatchError
    out = []
    for b in items:
        try:
            layout(b, True)
            out.append(True)
        except mismatch:
            out.append(False)
    return out


def verify_crc32c_pypi(items: list[bytes]) -> list[bool | None]:
    """Hand-written framing walk: skip 0x0e02 broker entry metadata, read 0x0e01 + stored CRC, CRC the rest."""
    unpack, crc = struct.unpack_from, crc32c_pypi.crc32c
    out = []
    for b in items:
        off = 0
        if b[0] == 0x0E and b[1] == 0x02:
            off = 6 + unpack(">I", b, 2)[0]
        magic, stored = unpack(">HI", b, off)
        out.append(crc(memoryview(b)[off + 6 :]) == stored if magic == 0x0E01 else None)
    return out


VERIFY_BASELINES = {
    "loop-entry-parse": (verify_entry_parse, "loop: pk.Entry.parse(b) (verify_checksum=True)", 2),
    "loop-layout": (verify_layout, "loop: native parse_entry_layout(b, verify_checksum=True)", 3),
    "loop-crc32c-pypi": (verify_crc32c_pypi, "loop: struct.unpack_from + crc32c.crc32c(memoryview)", 3),
}


@pytest.mark.parametrize("side", [*VERIFY_BASELINES, "candidate"])
def test_verify(benchmark, ratios, entries, side):
    arr, items = entries
    want = expected_ok(len(arr))
    benchmark.group = "verify 1M x 1 KiB"
    if side == "candidate":
        label = "pulsarkit.bulk.verify_checksums(arr)"
        out = benchmark.pedantic(pk.bulk.verify_checksums, args=(arr,), rounds=10, warmup_rounds=1)
        assert out.column("error").null_count == len(arr)
        assert out.column("has_checksum").to_pylist() == [True] * len(arr)
        assert out.column("checksum_ok").to_pylist() == want
    else:
        fn, label, rounds = VERIFY_BASELINES[side]
        got = benchmark.pedantic(fn, args=(items,), rounds=rounds, warmup_rounds=0)
        assert got == want
    ratios.add(benchmark, "verify 1M x 1 KiB", side, label, items=len(arr), unit="entry", nbytes=arr.nbytes)
