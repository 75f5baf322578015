"""Bookie GC benchmarks (issue 13): the transactional compactor's copy of an entry log (live records,
CRC32C digest verified on each, sealed with its ledgers map) against copying the same number of bytes
with a plain file copy, in the same run. Smoke runs use a small log."""

from __future__ import annotations

import os

import pytest
from pulsarkit import _native
from pulsarkit.bookkeeper import EntryLogWriter, pack_entry


@pytest.fixture(scope="module")
def log(tmp_path_factory, full_size):
    """One entry log: 8 ledgers of 16 KiB entries, half of them still live."""
    d = tmp_path_factory.mktemp("gc-bench")
    n = 16_000 if full_size else 200
    payload = b"x" * (16 << 10)
    with EntryLogWriter(d, log_size_limit=1 << 30) as w:
        for i in range(n):
            lid, eid = 1 + i % 8, i // 8
            w.append(lid, pack_entry(lid, eid, payload, last_add_confirmed=eid - 1, length=(eid + 1) * len(payload)))
        w.flush()
    (src,) = [int(f[:-4], 16) for f in os.listdir(d) if f.endswith(".log")]
    live = {lid: ("CRC32C", b"") for lid in (1, 2, 3, 4)}
    return d, src, live


def run_compaction(d, src, live, k):
    out = _native.compact_entry_log(str(d), src, 1000 + k, live, True)
    os.remove(out["compacted_path"])
    return out["bytes"]


def plain_copy(d, src, nbytes, k):
    path, dst = os.path.join(d, f"{src:x}.log"), os.path.join(d, f"copy-{k}")
    with open(path, "rb") as a, open(dst, "wb") as b:
        left = nbytes
        while left > 0:
            chunk = a.read(min(left, 1 << 20))
            b.write(chunk)
            left -= len(chunk)
        b.flush()
        os.fsync(b.fileno())
    os.remove(dst)
    return nbytes


@pytest.mark.parametrize("side", ["plain-copy-of-the-live-bytes", "candidate"])
def test_compaction_copy_throughput(benchmark, ratios, log, full_size, side):
    d, src, live = log
    counter = iter(range(10**6))
    live_bytes = run_compaction(d, src, live, 999)  # the bytes the copy must move, measured once
    benchmark.group = "entry-log compaction"
    if side == "candidate":
        got = benchmark.pedantic(lambda: run_compaction(d, src, live, next(counter)), rounds=3 if full_size else 1)
        label = "compact_entry_log: live records copied, CRC32C verified per entry, sealed and fsynced"
    else:
        got = benchmark.pedantic(lambda: plain_copy(d, src, live_bytes, next(counter)), rounds=3 if full_size else 1)
        label = "read + write + fsync of the same number of bytes"
    assert got == live_bytes
    ratios.add(benchmark, f"compact {live_bytes >> 20} MiB of live records", side, label, nbytes=live_bytes)
