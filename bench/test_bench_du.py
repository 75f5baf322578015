"""Disk attribution at scale (issue 13): ``pulsarkit du`` and the orphan finder over a data directory,
against reading every entry log once with plain 1 MiB reads, in the same run.

The directory is real-shaped: 24 topics of 4-16 KiB batched entries, rolled into ledgers of 500
entries and 64 MiB logs; a third of the topics deleted afterwards, so logs mix live and dead ledgers.
Smoke runs build 32 MiB; ``PULSARKIT_DU_GB=4 pytest bench/test_bench_du.py --benchmark-enable`` builds
4 GiB (about two minutes) and measures. Target: the du + orphan scan within 2x of the plain read.
"""

from __future__ import annotations

import os
import random

import pulsarkit as pk
import pytest
from pulsarkit.analysis.orphans import disk_usage_rows, find_orphans
from pulsarkit.scan.datadir import open_data_dir


@pytest.fixture(scope="module")
def datadir(tmp_path_factory, full_size):
    gib = float(os.environ.get("PULSARKIT_DU_GB", "4")) if full_size else 1 / 32
    root = tmp_path_factory.mktemp("du-bench") / "d"
    rnd = random.Random(7)
    cfg = pk.ManagedLedgerConfig(max_entries_per_ledger=500, minimum_rollover_time_ms=0)
    blobs = [rnd.randbytes(16 << 10) for _ in range(8)]
    with pk.Store.open(root, log_size_limit=64 << 20, sync=False) as store:
        mls = [store.managed_ledger(f"public/default/persistent/t{i}", cfg) for i in range(24)]
        md = pk.message_metadata("p", 0, 1_700_000_000_000)
        written, i = 0, 0
        while written < gib * (1 << 30):
            size = rnd.randrange(4 << 10, 16 << 10)
            entry = pk.encode_entry(md, blobs[i % 8][:size])
            mls[i % 24].add_entry(entry)
            written += len(entry)
            i += 1
        for ml in mls[::3]:
            ml.delete()
    logs = [os.path.join(root, "bookie", "current", f) for f in os.listdir(root / "bookie" / "current")]
    return root, [p for p in logs if p.endswith(".log")]


def plain_read(paths):
    n = 0
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while chunk := f.read(1 << 20):
                n += len(chunk)
    return n


def du_and_orphans(root):
    with open_data_dir(root) as dd:
        rows = list(disk_usage_rows(dd))
        orphans = find_orphans(dd)
    return sum(r["bytes"] for r in rows), len(orphans)


@pytest.mark.parametrize("side", ["plain-read-of-every-log", "candidate"])
def test_du_scan(benchmark, ratios, datadir, full_size, side):
    root, paths = datadir
    total = sum(os.path.getsize(p) for p in paths)
    plain_read(paths)  # warm the page cache for both sides alike
    benchmark.group = "du + orphan scan"
    rounds = 3 if full_size else 1
    if side == "candidate":
        got, orphans = benchmark.pedantic(lambda: du_and_orphans(root), rounds=rounds)
        # every byte of the logs is attributed; nothing here is an orphan (deleted topics left no metadata)
        assert 0 < got <= total and orphans == 0
        label = "open_data_dir + disk_usage_rows + find_orphans (ledgers maps, index, metadata)"
    else:
        got = benchmark.pedantic(lambda: plain_read(paths), rounds=rounds)
        assert got == total
        label = "read every entry log once, 1 MiB reads"
    ratios.add(benchmark, f"du scan of {total >> 20} MiB of entry logs", side, label, nbytes=total)
