"""Storage benchmarks (issue 3): scanning entry logs from the page cache — every record decoded and
every CRC32C bookie digest verified — against merely reading the same files with plain Python file
reads; and entries added per second through ManagedLedger against writing the same bytes to a file.
Smoke runs (benchmarks disabled) use small sizes.
"""

from __future__ import annotations

import os

import pulsarkit as pk
import pytest
from pulsarkit.bookkeeper import EntryLogWriter, pack_entry
from pulsarkit.managed_ledger import ManagedLedgerConfig, Store

PAYLOAD = 1024


@pytest.fixture(scope="module")
def logs(tmp_path_factory, full_size):
    """Entry logs holding N 1 KiB Pulsar entries packed as the BookKeeper client does (CRC32C)."""
    d = tmp_path_factory.mktemp("bench-logs")
    n = 200_000 if full_size else 2_000
    md = pk.message_metadata("p", 0, 1_700_000_000_000)
    pulsar_entry = pk.encode_entry(md, b"x" * (PAYLOAD - 40))
    with EntryLogWriter(d, log_size_limit=64 << 20) as w:
        length = 0
        for i in range(n):
            lid, eid = 10 + i // 50_000, i % 50_000
            length = length + len(pulsar_entry) if eid else len(pulsar_entry)
            w.append(lid, pack_entry(lid, eid, pulsar_entry, last_add_confirmed=eid - 1, length=length))
        w.flush()
    files = sorted(str(p) for p in d.glob("*.log"))
    for f in files:  # into the page cache
        with open(f, "rb") as fh:
            while fh.read(1 << 20):
                pass
    return d, files, n, sum(os.path.getsize(f) for f in files)


def read_chunks(files):
    total = 0
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while b := fh.read(1 << 20):
                total += len(b)
    return total


def read_whole(files):
    total = 0
    for f in files:
        with open(f, "rb") as fh:
            total += len(fh.read())
    return total


def scan(d, payload_type):
    rows = ok = 0
    for b in pk.bookkeeper.scan_entry_logs([d], "CRC32C", payload_type=payload_type):
        rows += b.num_rows
        ok += b.column("digest_ok").true_count
    return rows, ok


@pytest.mark.parametrize("mode", ["binary_view", "binary"])
@pytest.mark.parametrize("side", ["plain-read-1MiB-chunks", "plain-read-whole-file", "candidate"])
def test_scan_entry_logs(benchmark, ratios, logs, full_size, side, mode):
    d, files, n, nbytes = logs
    benchmark.group = f"scan entry logs ({mode})"
    rounds = 5 if full_size else 1
    if side == "candidate":
        rows, ok = benchmark.pedantic(scan, args=(d, mode), rounds=rounds, warmup_rounds=1)
        assert rows == ok == n  # every record decoded, every digest verified and correct
        label = f"pulsarkit.bookkeeper.scan_entry_logs(payload_type={mode!r}), CRC32C verified"
    elif side == "plain-read-1MiB-chunks":
        assert benchmark.pedantic(read_chunks, args=(files,), rounds=rounds, warmup_rounds=1) == nbytes
        label = "open(f, 'rb', buffering=0).read(1 MiB) loop"
    else:
        assert benchmark.pedantic(read_whole, args=(files,), rounds=rounds, warmup_rounds=1) == nbytes
        label = "open(f, 'rb').read()"
    ratios.add(
        benchmark,
        f"scan {nbytes >> 20} MiB of entry logs ({mode})",
        side,
        label,
        items=n,
        unit="entry",
        nbytes=nbytes,
    )


@pytest.mark.parametrize("mode", ["add_entry", "add_entries"])
@pytest.mark.parametrize("side", ["file-write", "candidate"])
def test_managed_ledger_add_rate(benchmark, ratios, tmp_path, full_size, side, mode):
    n = 50_000 if full_size else 500
    data = pk.encode_entry(pk.message_metadata("p", 0, 1_700_000_000_000), b"y" * (PAYLOAD - 40))
    benchmark.group = f"managed ledger {mode}"
    counter = iter(range(10**6))

    def setup():
        k = next(counter)
        if side == "candidate":
            store = Store.open(tmp_path / f"s{k}")
            ml = store.managed_ledger(
                "public/default/persistent/bench", ManagedLedgerConfig(max_entries_per_ledger=50_000)
            )
            return (store, ml), {}
        return (open(tmp_path / f"f{k}", "wb"), None), {}

    def run(target, ml):
        if side == "candidate" and mode == "add_entries":
            chunk = [data] * 1000  # an importer's batch
            for i in range(0, n, len(chunk)):
                ml.add_entries(chunk[: n - i])
            ml.flush()  # durable: entry log fsynced, indexes written
            assert ml.number_of_entries == n
            target.close()
        elif side == "candidate":
            for _ in range(n):
                ml.add_entry(data)
            ml.flush()  # durable: entry log fsynced, indexes written
            assert ml.number_of_entries == n
            target.close()
        else:
            for _ in range(n):
                target.write(data)
            target.flush()
            os.fsync(target.fileno())
            target.close()

    benchmark.pedantic(run, setup=setup, rounds=3 if full_size else 1)
    calls = "add_entry x N" if mode == "add_entry" else "add_entries x N/1000"
    label = f"ManagedLedger.{calls} + flush" if side == "candidate" else "file.write(same bytes) x N + fsync"
    case = f"add {n} x 1 KiB entries" + ("" if mode == "add_entry" else " in batches of 1000")
    ratios.add(benchmark, case, side, label, items=n, unit="entry")
