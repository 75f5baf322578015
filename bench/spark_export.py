"""``pulsarkit export`` (issue 14): the local engine vs Spark local[2] (``spark``: tasks writing Parquet
themselves; ``spark-sql``: the ``pulsarkit`` data source and Spark's writer) vs a plain read of the
same files, on a data directory of real-shaped traffic written by pulsarkit's own managed ledgers.

The directory: six topics (two are the partitions of one), producers batching up to 100 messages or 128 KiB
(Pulsar's defaults are 1000 messages / 128 KiB), JSON-like messages of 0.2-2 KiB with keys and
properties, LZ4 (most), ZSTD, SNAPPY and uncompressed batches, the broker's PIP-70 index and timestamp
interceptors, ledgers rolled every 2000 entries; written until the bookie holds ``--size-mb`` of entry
logs. Not run in CI (minutes, a JVM).

    python bench/spark_export.py --size-mb 220 [--work DIR] [--keep] > result.json

Each variant is timed twice on a warm page cache (best of two), the Spark one with the session
already up (its start-up is reported apart); rows and row counts are checked equal.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pulsarkit as pk
import pyarrow.dataset as ds
from pulsarkit.export import ExportSummary
from pulsarkit.scan import plan
from pulsarkit.spark import export as export_mod

TOPICS = [
    ("public/default/persistent/orders", "LZ4"),
    ("public/default/persistent/clicks", "LZ4"),
    ("public/default/persistent/payments-partition-0", "ZSTD"),
    ("public/default/persistent/payments-partition-1", "ZSTD"),
    ("public/default/persistent/audit", "SNAPPY"),
    ("public/default/persistent/metrics", "NONE"),
]
T0 = 1_700_000_000_000
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


def _message(rng: random.Random, i: int) -> bytes:
    fields = {
        "id": i,
        "user": f"user-{rng.randrange(100_000)}",
        "ts": 1_700_000_000_000 + i,
        "amount": round(rng.random() * 1000, 2),
        "tags": rng.sample(WORDS, rng.randint(1, 6)),
        "note": " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 250))),
    }
    return json.dumps(fields).encode()


def topic_list(n: int = len(TOPICS)) -> list[tuple[str, str]]:
    """The first ``n`` topics: :data:`TOPICS`, then ``more-<i>`` ones cycling through the codecs."""
    codecs = [c for _, c in TOPICS]
    extra = [(f"public/default/persistent/more-{i}", codecs[i % len(codecs)]) for i in range(max(n - len(TOPICS), 0))]
    return (TOPICS + extra)[:n]


def build(
    root: Path, size_mb: int, seed: int = 7, topics: int = len(TOPICS), hours: float | None = None, unbatched: int = 0
) -> dict:
    """Writes the directory. ``topics``: how many (:func:`topic_list`); ``hours``: publish times spread
    evenly over that many hours from ``T0`` as the logs fill (default: 50 ms per message, seconds
    to hours depending on the size); ``unbatched``: how many of the topics (the last ones) are written
    as producers with batching off write them, one message per entry (keys, properties and the
    topic's codec as in a batch)."""
    rng = random.Random(seed)
    pool = [_message(rng, i) for i in range(4000)]
    store = pk.Store.open(root, sync=False)
    names = topic_list(topics)
    cfg = {
        name: pk.ManagedLedgerConfig(
            managed_ledger_interceptor=pk.broker.managed_ledger_interceptor(
                (pk.broker.INDEX_INTERCEPTOR, pk.broker.TIMESTAMP_INTERCEPTOR)
            ),
            max_entries_per_ledger=2000,
            minimum_rollover_time_ms=0,
        )
        for name, _ in names
    }
    mls = {name: store.managed_ledger(name, cfg[name]) for name, _ in names}
    single = {name for name, _ in names[len(names) - unbatched :]} if unbatched else set()
    seq = {name: 0 for name, _ in names}
    messages = payload = entries = written = rounds = 0
    target = size_mb << 20
    t0 = T0
    while True:
        for name, codec in names:
            items, size = [], 0
            while len(items) < 100 and size < 128 << 10:
                m = pool[rng.randrange(len(pool))]
                item = {"payload": m, "properties": {"source": "bench", "n": str(messages)}}
                if rng.random() < 0.8:
                    item["key"] = f"key-{rng.randrange(10_000)}"
                items.append(item)
                size += len(m)
                messages += 1
            publish = t0 + messages * 50 if hours is None else t0 + int(hours * 3_600_000 * min(written / target, 1))
            if name in single:
                for it in items:
                    md = pk.message_metadata(f"producer-{name[-6:]}", seq[name], publish)
                    if "key" in it:
                        md.partition_key = it["key"]
                    for k, v in it["properties"].items():
                        md.properties.add(key=k, value=v)
                    data = pk.encode_entry(md, it["payload"], compression=None if codec == "NONE" else codec)
                    mls[name].add_entry(data, num_messages=1)
                    written += len(data)
                    seq[name] += 1
                    entries += 1
            else:
                md = pk.message_metadata(f"producer-{name[-6:]}", seq[name], publish)
                data = pk.encode_batch(md, items, compression=codec)
                mls[name].add_entry(data, num_messages=len(items))
                written += len(data)
                seq[name] += len(items)
                entries += 1
            payload += size
        rounds += 1
        if rounds % 50 == 0:
            for ml in mls.values():
                ml.flush()
            on_disk = sum(f.stat().st_size for f in (root / "bookie" / "current").glob("*.log"))
            if on_disk >= target:
                break
    store.close()
    for p in root.rglob("LOCK"):
        p.unlink()
    logs = sorted((root / "bookie" / "current").glob("*.log"))
    return {
        "messages": messages,
        "entries": entries,
        "payload_bytes": payload,
        "entry_log_bytes": sum(f.stat().st_size for f in logs),
        "data_dir_bytes": sum(f.stat().st_size for f in root.rglob("*") if f.is_file()),
    }


def plain_read(root: Path) -> float:
    """Reads every file of the data directory once (1 MiB reads): the I/O floor."""
    t = time.perf_counter()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        with open(f, "rb", buffering=0) as fh:
            while fh.read(1 << 20):
                pass
    return time.perf_counter() - t


def timed(fn, repeat: int = 2) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=220)
    ap.add_argument("--work", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--topics", type=int, default=len(TOPICS), help="how many topics (default 6)")
    ap.add_argument("--unbatched", type=int, default=0, help="how many of them are written one message per entry")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="pulsarkit-bench-export-"))
    work.mkdir(parents=True, exist_ok=True)
    root = work / "data"
    result: dict = {"size_mb": args.size_mb}
    try:
        if not (root / "metadata").exists():
            t = time.perf_counter()
            result["data"] = build(root, args.size_mb, topics=args.topics, unbatched=args.unbatched)
            result["topics"], result["unbatched_topics"] = args.topics, args.unbatched
            result["build_seconds"] = round(time.perf_counter() - t, 1)
        quiet = lambda m: None  # noqa: E731
        result["plain_read_seconds"], _ = timed(lambda: plain_read(root))
        result["plan_seconds"], p = timed(lambda: plan([str(root)]))
        result["partitions"] = len(p.partitions)

        def local() -> ExportSummary:
            out = work / "out-local"
            shutil.rmtree(out, ignore_errors=True)
            return export_mod.export(str(root), "parquet", str(out), engine="local", log=quiet)

        result["local_seconds"], s_local = timed(local)
        cpu = time.process_time()
        local()
        result["local_cpu_seconds"] = time.process_time() - cpu  # insensitive to other jobs on the machine
        t = time.perf_counter()
        spark = export_mod.spark_session("local[2]")
        result["spark_session_start_seconds"] = round(time.perf_counter() - t, 1)

        def read_only() -> None:  # the data source alone: every row into the JVM, written nowhere
            spark.read.format("pulsarkit").load(str(root)).write.format("noop").mode("overwrite").save()

        result["spark_source_read_seconds"], _ = timed(read_only)
        summaries = {"local": s_local}
        for engine in ("spark", "spark-sql"):

            def on_spark(engine: str = engine) -> ExportSummary:
                out = work / f"out-{engine}"
                shutil.rmtree(out, ignore_errors=True)
                return export_mod.export(str(root), "parquet", str(out), engine=engine, spark=spark, log=quiet)

            result[f"{engine}_seconds"], summaries[engine] = timed(on_spark)
        spark.stop()
        counts = {
            e: ds.dataset(str(work / f"out-{e}"), format="parquet", partitioning="hive").count_rows() for e in summaries
        }
        assert len({*counts.values(), *(s.rows for s in summaries.values())}) == 1, (counts, summaries)
        result["rows"] = counts["local"]
        for e in summaries:
            result[f"parquet_bytes_{e}"] = sum(f.stat().st_size for f in (work / f"out-{e}").rglob("*.parquet"))
        d = result.get("data") or {}
        mb = (d.get("entry_log_bytes") or sum(f.stat().st_size for f in root.rglob("*.log"))) / 1e6
        for k in ("plain_read", "local", "spark", "spark-sql", "spark_source_read"):
            result[f"{k}_MBps"] = round(mb / result[f"{k}_seconds"], 1)
        result["local_vs_plain_read"] = round(result["local_seconds"] / result["plain_read_seconds"], 1)
        result["spark_vs_local"] = round(result["spark_seconds"] / result["local_seconds"], 2)
        result["spark_sql_vs_local"] = round(result["spark-sql_seconds"] / result["local_seconds"], 2)
        result["load_average_1m"] = os.getloadavg()[0]
        for k, v in list(result.items()):
            if isinstance(v, float):
                result[k] = round(v, 3)
        result["cpus"] = os.cpu_count()
        json.dump(result, sys.stdout, indent=1)
        print()
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
