"""Issue 24's kernel targets, each against its own baseline in the same process, interleaved, medians.

    python bench/kernel_targets.py metadata   # decode_metadata vs upb per entry (target 10x)
    python bench/kernel_targets.py explode    # explode_messages, small uncompressed messages (target 20 M/s)
    python bench/kernel_targets.py scan       # verified copying scan vs a plain 1 MiB-read loop (target 0.5x)
    python bench/kernel_targets.py add        # ManagedLedger.add_entries + flush vs write + fsync (target 0.5x)
    python bench/kernel_targets.py txn        # TxnLogBufferedWriter, per record and in one call (Java: java_compare)
    python bench/kernel_targets.py all --rounds 7

The inputs are the pytest benchmarks' (bench/test_bench_*.py). On a shared machine compare ratios measured
in one run (each round times the baseline and the candidate back to back), not absolute times across runs.
To compare two builds, run this script once with each on PYTHONPATH, alternately. Java's TxnLogBufferedWriter
figure comes from ``python bench/java_compare.py --only txn`` (JMH); the ``txn`` rows here are pulsarkit's side.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _report(name: str, unit: str, base: list[float], cand: list[float], items: int, base_label: str) -> None:
    ratios = [b / c for b, c in zip(base, cand, strict=True)]
    print(
        f"{name}: {base_label} median {statistics.median(base) / items * 1e9:.0f} ns/{unit}, pulsarkit median "
        f"{statistics.median(cand) / items * 1e9:.1f} ns/{unit}; ratio {statistics.median(ratios):.2f}x "
        f"(rounds {', '.join(f'{r:.2f}' for r in ratios)})"
    )


def metadata(rounds: int) -> None:
    import pulsarkit as pk
    import test_bench_codec as tb

    arr, md = tb.metadata_entries.__wrapped__(True)
    base, cand = [], []
    for _ in range(rounds):
        t = time.process_time()
        tb.decode_with_upb(md)
        base.append(time.process_time() - t)
        best = []
        for _ in range(5):  # the pytest benchmark's candidate also runs many more rounds than upb
            t = time.process_time()
            pk.bulk.decode_metadata(arr)
            best.append(time.process_time() - t)
        cand.append(min(best))
    _report("decode_metadata, 100k entries", "entry", base, cand, len(arr), "upb FromString + 8 fields")


def explode(rounds: int) -> None:
    import test_bench_explode as tb

    arrs, n = tb._small_batches(50)
    times = []
    for _ in range(rounds):
        t = time.process_time()
        tb._explode_all(arrs)
        times.append(time.process_time() - t)
    med, best = statistics.median(times), min(times)
    print(
        f"explode_messages, {n} small uncompressed messages in calls of 200 entries: median {med / n * 1e9:.1f} "
        f"ns/message ({n / med / 1e6:.1f} M/s), best {best / n * 1e9:.1f} ns ({n / best / 1e6:.1f} M/s)"
    )


def _make_logs(root: Path, size: int, total: int = 200 << 20) -> Path:
    import pulsarkit as pk
    from pulsarkit.bookkeeper import EntryLogWriter, pack_entry

    d = root / f"logs{size}"
    d.mkdir()
    e = pk.encode_entry(pk.message_metadata("p", 0, 1_700_000_000_000), b"x" * (size - 40))
    with EntryLogWriter(d, log_size_limit=64 << 20) as w:
        length = 0
        for i in range(total // size):
            lid, eid = 10 + i // 50_000, i % 50_000
            length = length + len(e) if eid else len(e)
            w.append(lid, pack_entry(lid, eid, e, last_add_confirmed=eid - 1, length=length))
        w.flush()
    return d


def scan(rounds: int) -> None:
    import pulsarkit as pk
    from test_bench_storage import read_chunks

    root = Path(tempfile.mkdtemp(prefix="pk-kernel-targets-"))
    try:
        for size in (1024, 16384):
            d = _make_logs(root, size)
            files = sorted(str(p) for p in d.glob("*.log"))
            read_chunks(files)  # into the page cache
            for mode in ("binary", "binary_view"):
                base, cand = [], []
                for _ in range(rounds):
                    t = time.perf_counter()
                    read_chunks(files)
                    base.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    rows = ok = 0
                    for b in pk.bookkeeper.scan_entry_logs([d], "CRC32C", payload_type=mode):
                        rows += b.num_rows
                        ok += b.column("digest_ok").true_count
                    cand.append(time.perf_counter() - t)
                    assert rows == ok
                # the ratio is plain read time / scan time: above 0.5 is "at least half the speed of a read"
                _report(f"scan 200 MiB, {size >> 10} KiB entries, {mode}", "entry", base, cand, rows, "plain read")
    finally:
        shutil.rmtree(root)


def add(rounds: int) -> None:
    import pulsarkit as pk
    from pulsarkit.managed_ledger import ManagedLedgerConfig, Store

    n = 50_000
    data = pk.encode_entry(pk.message_metadata("p", 0, 1_700_000_000_000), b"y" * (1024 - 40))
    root = Path(tempfile.mkdtemp(prefix="pk-kernel-targets-"))
    base, cand = [], []
    try:
        for k in range(rounds):
            with open(root / f"f{k}", "wb") as f:
                t = time.perf_counter()
                for _ in range(n):
                    f.write(data)
                f.flush()
                os.fsync(f.fileno())
                base.append(time.perf_counter() - t)
            store = Store.open(root / f"s{k}")
            ml = store.managed_ledger("public/default/persistent/bench", ManagedLedgerConfig(max_entries_per_ledger=n))
            chunk = [data] * 1000
            t = time.perf_counter()
            for i in range(0, n, len(chunk)):
                ml.add_entries(chunk[: n - i])
            ml.flush()
            store.close()
            cand.append(time.perf_counter() - t)
    finally:
        shutil.rmtree(root)
    _report("add 50 000 x 1 KiB, add_entries x 1000 + flush + close", "entry", base, cand, n, "write + fsync")


def txn(rounds: int) -> None:
    import java_compare as jc

    recs = jc._bench_module("test_bench_txn").records(20_000)
    ex = jc._DirectExecutor()
    for label, fn in (("async_add_data per record", jc.txn_write), ("async_add_many, one call", jc.txn_write_many)):
        v = jc.timed(lambda fn=fn: fn(recs, ex, jc._StubLedger()), rounds, min_time=0.05)
        print(
            f"TxnLogBufferedWriter, 20 000 records, {label}: median {statistics.median(v) / len(recs) * 1e9:.0f} "
            f"ns/record, best {min(v) / len(recs) * 1e9:.0f}"
        )


def main() -> None:
    cases = {"metadata": metadata, "explode": explode, "scan": scan, "add": add, "txn": txn}
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case", choices=[*cases, "all"])
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    for name, fn in cases.items():
        if a.case in (name, "all"):
            fn(a.rounds)


if __name__ == "__main__":
    main()
