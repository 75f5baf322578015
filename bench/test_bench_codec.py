"""CRC32C and MessageMetadata decoding: pulsarkit against the Python packages a user would reach for.

Each case times a baseline and the candidate in the same run (see conftest.py) and first checks that
both compute the same thing.
"""

from __future__ import annotations

import random
import time

import crc32c as crc32c_pypi
import pulsarkit as pk
import pyarrow as pa
import pytest
from pulsarkit import _native
from pulsarkit.proto import MessageMetadata

SIDES = ["crc32c-pypi", "candidate"]
CRC_SIZES = {"64 B": 64, "1 KiB": 1024, "64 KiB": 64 * 1024, "16 MiB": 16 * 1024 * 1024}


@pytest.fixture(scope="module")
def crc_inputs():
    rng = random.Random(1)
    return {label: rng.randbytes(n) for label, n in CRC_SIZES.items()}


# Calls of 0.1-1 µs are timed on the wall clock: reading the process CPU clock costs ~0.8 µs on a VM and
# now and then yields a zero-length round. Best-of-thousands rounds filters out other jobs anyway.
@pytest.mark.benchmark(timer=time.perf_counter)
@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("size", list(CRC_SIZES))
def test_crc32c(benchmark, ratios, crc_inputs, size, side):
    data = crc_inputs[size]
    expected = crc32c_pypi.crc32c(data)
    assert pk.crc32c(data) == expected
    fn, label = (
        (crc32c_pypi.crc32c, "crc32c.crc32c(data)") if side != "candidate" else (pk.crc32c, "pulsarkit.crc32c(data)")
    )
    benchmark.group = f"crc32c {size}"
    assert benchmark(fn, data) == expected
    ratios.add(benchmark, f"crc32c {size}", side, label, items=1, unit="call", nbytes=len(data))


# --- MessageMetadata: bulk Arrow kernel vs upb protobuf per entry ------------------------------------

FIELDS = (
    "publish_time",
    "producer_name",
    "sequence_id",
    "num_messages",
    "compression",
    "uncompressed_size",
    "partition_key",
    "event_time",
)
COMPRESSION_NAMES = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")


def _templates(n: int) -> list[tuple[bytes, bytes]]:
    """Real producer batches (metadata bytes, compressed payload): 5-20 JSON messages with keys and
    properties, compressed with each codec in turn, metadata with properties and a partition key."""
    rng = random.Random(7)
    out = []
    codecs = ["ZSTD", "LZ4", "SNAPPY", "ZLIB", "NONE"]
    for t in range(n):
        msgs = [
            {
                "payload": b'{"device":"d-%d","seq":%d,"temp":%.2f,"status":"ok"}' % (t, i, rng.uniform(10, 40)),
                "key": f"d-{t}",
                "properties": {"content-type": "application/json"},
                "event_time": 1_700_000_000_000 + i,
            }
            for i in range(rng.randint(5, 20))
        ]
        md = pk.message_metadata(
            f"standalone-{t % 4}-{1000 + t}",
            0,
            1_700_000_000_000,
            partition_key=f"d-{t}",
            event_time=1_700_000_000_000,
            properties={"app": "bench-ingest", "region": "eu-west-1"},
        )
        e = pk.Entry.parse(pk.encode_batch(md, msgs, compression=codecs[t % len(codecs)]))
        out.append((e.metadata.SerializeToString(), e.payload))
    return out


@pytest.fixture(scope="module")
def metadata_entries(full_size):
    """N stored entries (broker entry metadata + checksum + batch metadata + compressed batch), each with
    its own sequence id and publish time, plus the raw MessageMetadata bytes of each for the baseline."""
    n = 100_000 if full_size else 2_000
    templates = _templates(64)
    md = MessageMetadata()
    entries, md_bytes = [], []
    for i in range(n):
        t_md, payload = templates[i % len(templates)]
        md.ParseFromString(t_md)
        md.sequence_id = 10_000 + i * 20
        md.highest_sequence_id = md.sequence_id + md.num_messages_in_batch - 1
        md.publish_time = 1_700_000_000_000 + i
        raw_md = md.SerializeToString()
        e = _native.encode_metadata_and_payload(raw_md, payload, True)
        entries.append(_native.add_broker_entry_metadata(e, 1_700_000_000_000 + i, 50_000 + i * 20))
        md_bytes.append(raw_md)
    return pa.array(entries, pa.binary()), md_bytes


def decode_with_upb(md_bytes: list[bytes]) -> list[tuple]:
    """What a Python user does today: parse each MessageMetadata with upb and read the fields."""
    from_string = MessageMetadata.FromString
    out = []
    append = out.append
    for b in md_bytes:
        m = from_string(b)
        append(
            (
                m.publish_time,
                m.producer_name,
                m.sequence_id,
                m.num_messages_in_batch if m.HasField("num_messages_in_batch") else 1,
                m.compression,
                m.uncompressed_size,
                m.partition_key,
                m.event_time,
            )
        )
    return out


def _as_rows(batch) -> list[tuple]:
    cols = [batch.column(f).to_pylist() for f in FIELDS]
    ci = FIELDS.index("compression")
    cols[ci] = [COMPRESSION_NAMES.index(c) for c in cols[ci]]
    return list(zip(*cols))


@pytest.fixture(scope="module")
def upb_reference(metadata_entries):
    arr, md_bytes = metadata_entries
    ref = decode_with_upb(md_bytes)
    got = pk.bulk.decode_metadata(arr)
    assert got.column("error").null_count == len(arr)
    assert _as_rows(got) == ref
    return ref


@pytest.mark.parametrize("side", ["upb", "candidate"])
def test_decode_metadata(benchmark, ratios, metadata_entries, upb_reference, side):
    arr, md_bytes = metadata_entries
    benchmark.group = "decode_metadata"
    if side == "upb":
        label = "loop: MessageMetadata.FromString(md) + read 8 fields"
        result = benchmark.pedantic(decode_with_upb, args=(md_bytes,), rounds=5, warmup_rounds=1)
        assert result == upb_reference
    else:
        label = "pulsarkit.bulk.decode_metadata(BinaryArray of entries)"
        result = benchmark.pedantic(pk.bulk.decode_metadata, args=(arr,), rounds=20, warmup_rounds=2)
        assert _as_rows(result) == upb_reference
    ratios.add(benchmark, "decode_metadata", side, label, items=len(arr), unit="entry")
