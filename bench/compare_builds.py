"""Interleaved in-process comparison of several builds of pulsarkit._native.

usage: python bench/compare_builds.py OUT.json ROUNDS NAME=path/to/_native.so ...
Inputs are the benchmark files' inputs (bench/test_bench_bulk.py: 1M x 1 KiB entries;
bench/test_bench_codec.py: 100k batch entries for decode_metadata). Each round calls every kernel
once in every build (build order rotated each round); CPU time (time.process_time) per call.
"""

import array
import importlib.machinery
import importlib.util
import json
import pathlib
import random
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import pyarrow as pa
import test_bench_bulk as tb
import test_bench_codec as tc
from pulsarkit import _native
from pulsarkit.proto import MessageMetadata

out_path, rounds = sys.argv[1], int(sys.argv[2])
builds = dict(a.split("=", 1) for a in sys.argv[3:])


def load(path):
    loader = importlib.machinery.ExtensionFileLoader("pulsarkit._native", path)
    spec = importlib.util.spec_from_file_location("pulsarkit._native", path, loader=loader)
    m = importlib.util.module_from_spec(spec)
    loader.exec_module(m)
    return m


mods = {k: load(v) for k, v in builds.items()}

# bulk inputs (as tb.entries)
n = 1_000_000
rng = random.Random(3)
tmpl = [tb._template(i, rng) for i in range(tb.TEMPLATES)]
values = bytearray(b"".join(tmpl[i % tb.TEMPLATES] for i in range(n)))
for i in range(0, n, tb.CORRUPT_EVERY):
    values[(i + 1) * tb.ENTRY_SIZE - 1] ^= 0x01
offsets = array.array("i", range(0, (n + 1) * tb.ENTRY_SIZE, tb.ENTRY_SIZE))
arr = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(values)])
slices = [arr.slice(s, 10_000) for s in range(0, n, 10_000)]

# decode_metadata inputs (as tc.metadata_entries)
templates = tc._templates(64)
md = MessageMetadata()
ents = []
for i in range(100_000):
    t_md, payload = templates[i % len(templates)]
    md.ParseFromString(t_md)
    md.sequence_id = 10_000 + i * 20
    md.highest_sequence_id = md.sequence_id + md.num_messages_in_batch - 1
    md.publish_time = 1_700_000_000_000 + i
    e = _native.encode_metadata_and_payload(md.SerializeToString(), payload, True)
    ents.append(_native.add_broker_entry_metadata(e, 1_700_000_000_000 + i, 50_000 + i * 20))
mdarr = pa.array(ents, pa.binary())
crc16 = random.Random(1).randbytes(16 << 20)
crc1k = crc16[:1024]


def strip_stream(m):
    n = 0
    for s in slices:  # each result dropped before the next, as bench/test_bench_bulk.py
        n += m.bulk_strip_broker_entry_metadata(s, "binary").num_rows
    return n


def kernels(m):
    return {
        "decode_metadata 100k": lambda: m.bulk_decode_metadata(mdarr, False),
        "decode_metadata+verify 100k": lambda: m.bulk_decode_metadata(mdarr, True),
        "verify_checksums 1M": lambda: m.bulk_verify_checksums(arr),
        "peek_bem 1M": lambda: m.bulk_peek_broker_entry_metadata(arr),
        "strip binary_view 1M": lambda: m.bulk_strip_broker_entry_metadata(arr, "binary_view"),
        "strip 100x10k": lambda: strip_stream(m),
        "crc32c 16MiB x10": lambda: [m.crc32c(crc16) for _ in range(10)],
        "crc32c 1KiB x10000": lambda: [m.crc32c(crc1k) for _ in range(10000)],
    }


ks = {b: kernels(m) for b, m in mods.items()}
# sanity: every build computes the same columns
for k in ["decode_metadata 100k", "verify_checksums 1M", "peek_bem 1M"]:
    outs = [pa.record_batch(ks[b][k]()) for b in ks]
    assert all(o.equals(outs[0]) for o in outs), k
names = list(next(iter(ks.values())).keys())
times = {b: {k: [] for k in names} for b in ks}
order = list(ks)
WARMUP = 2
for r in range(rounds + WARMUP):
    order = order[1:] + order[:1]
    for k in names:
        for b in order:
            f = ks[b][k]
            t0 = time.process_time()
            f()
            t1 = time.process_time()
            if r >= WARMUP:
                times[b][k].append(t1 - t0)
    print(
        f"round {r + 1 - WARMUP}/{rounds} load={open('/proc/loadavg').read().split()[:3]}", file=sys.stderr, flush=True
    )
json.dump({"builds": builds, "times": times}, open(out_path, "w"))
for k in names:
    print(k)
    for b in ks:
        t = times[b][k]
        print(f"  {b:6s} min {min(t) * 1e3:9.2f} ms  median {statistics.median(t) * 1e3:9.2f} ms")
