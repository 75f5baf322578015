"""A filtered read through the ``pulsarkit`` data source (issue 14): one topic and one hour of publish
time out of a day, on real-shaped traffic (``bench/spark_export.py``'s generator: 12 topics, publish
times spread over 24 hours). Reports the bytes that hold the answer (the stored records, with their
length fields, of the entries with a matching row), the bytes the read took from the entry logs (the
driver's metadata pass plus every task, from the source's ``stats_dir`` counters) and their ratio
(the issue asks for at most 2x). The same query is run in this process too (plan + read_partition)
as a cross-check, the topic's full read for scale, and the way the engine read it before (a native
pass over all entry logs at planning, every entry of the topic read whole). Not run in CI.

    python bench/spark_filtered.py --size-mb 1024 [--topics 12] [--hours 24] [--work DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pulsarkit import bulk
from pulsarkit.bookkeeper.entrylog import scan_entry_logs
from pulsarkit.broker.topic_name import ml_to_topic
from pulsarkit.scan import ReadStats, plan, read_partition
from pulsarkit.scan.datadir import open_data_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spark_export import T0, build, topic_list  # noqa: E402

HOUR = 3_600_000


def answer_bytes(root: Path, ml: str, lo: int, hi: int) -> dict:
    """Independently of the engine: every entry of the topic's ledgers in the entry logs, its publish
    time (all rows of an entry share it) and its stored size."""
    with open_data_dir(root) as dd:
        ledgers = pa.array(dd.ml_ledgers(ml), pa.int64())
        logs = [(p, i) for p, i, _ in dd.entry_logs()]
    out = {"topic_entries": 0, "topic_bytes": 0, "answer_entries": 0, "answer_bytes": 0}
    for b in scan_entry_logs(logs, "AUTO", include_issues=False, payload_type="binary_view"):
        keep = pc.fill_null(pc.is_in(b.column("ledger_id"), value_set=ledgers), False)
        if not pc.any(keep).as_py():
            continue
        t = pa.table({"size": b.column("size"), "pt": bulk.decode_metadata(b.column("payload")).column("publish_time")})
        t = t.filter(keep)
        stored = pc.add(t.column("size").cast(pa.int64()), 4)  # the record and its length field
        hit = pc.fill_null(pc.and_(pc.greater_equal(t.column("pt"), lo), pc.less(t.column("pt"), hi)), False)
        out["topic_entries"] += t.num_rows
        out["topic_bytes"] += pc.sum(stored).as_py() or 0
        out["answer_entries"] += pc.sum(hit.cast(pa.int64())).as_py() or 0
        out["answer_bytes"] += pc.sum(pc.filter(stored, hit)).as_py() or 0
    return out


def in_process(root: Path, filters: list, plan_filters: list | None = None, metadata_pass: str = "auto") -> dict:
    """Plans with ``plan_filters`` (default ``filters``) and reads every task with ``filters``."""
    t = time.perf_counter()
    p = plan([str(root)], filters=filters if plan_filters is None else plan_filters, metadata_pass=metadata_pass)
    plan_s = time.perf_counter() - t
    tasks = ReadStats()
    rows = sum(b.num_rows for task in p.tasks() for b in read_partition(task, filters=filters, stats=tasks))
    return {
        "rows": rows,
        "plan_seconds": round(plan_s, 2),
        "seconds": round(time.perf_counter() - t, 2),
        "metadata_pass": next(iter(p.stats.values()), {}).get("read"),
        "plan": p.read_stats.as_dict(),
        "tasks": tasks.as_dict(),
        "bytes_read": p.read_stats.total_bytes + tasks.total_bytes,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--topics", type=int, default=12)
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--hour", type=int, default=12, help="the hour of publish time the query asks for")
    ap.add_argument("--work", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="pulsarkit-bench-filtered-"))
    work.mkdir(parents=True, exist_ok=True)
    root = work / "data"
    result: dict = {"size_mb": args.size_mb, "topics": args.topics, "hours": args.hours}
    try:
        if not (root / "metadata").exists():
            t = time.perf_counter()
            result["data"] = build(root, args.size_mb, topics=args.topics, hours=args.hours)
            result["build_seconds"] = round(time.perf_counter() - t, 1)
        ml = topic_list(args.topics)[0][0]
        topic = ml_to_topic(ml)
        lo, hi = T0 + args.hour * HOUR, T0 + (args.hour + 1) * HOUR
        result["query"] = f"topic = '{topic}' AND publish_time >= {lo} AND publish_time < {hi}"
        result["entry_log_bytes"] = sum(f.stat().st_size for f in root.rglob("*.log") if "bookie" in str(f))
        result.update(answer_bytes(root, ml, lo, hi))
        filters = [("topic", "=", topic), ("publish_time", ">=", lo), ("publish_time", "<", hi)]
        result["in_process"] = in_process(root, filters)
        result["in_process_topic_only"] = in_process(root, [("topic", "=", topic)])
        # what the engine did before issue 14's pruning: a native pass over every entry log at
        # planning, then every entry of the topic read whole and its publish time checked
        result["in_process_before"] = in_process(root, filters, [("topic", "=", topic)], metadata_pass="scan")

        from pulsarkit.spark import local_session

        spark = local_session(2, "pulsarkit-bench-filtered")
        from pulsarkit.spark.messages_source import read_stats

        runs = []
        for i in range(2):
            stats_dir = work / f"stats-{i}"
            shutil.rmtree(stats_dir, ignore_errors=True)
            t = time.perf_counter()
            df = (
                spark.read.format("pulsarkit")
                .option("pushdown", "true")
                .option("stats_dir", str(stats_dir))
                .load(str(root))
                .where(result["query"])
            )
            rows = df.count()
            secs = time.perf_counter() - t
            st = read_stats(str(stats_dir))
            runs.append(
                {
                    "rows": rows,
                    "seconds": round(secs, 2),
                    "plan": st["plan"].as_dict(),
                    "tasks": st["tasks"].as_dict(),
                    "bytes_read": st["plan"].total_bytes + st["tasks"].total_bytes,
                }
            )
        spark.stop()
        result["spark"] = min(runs, key=lambda r: r["seconds"])
        assert result["spark"]["rows"] == result["in_process"]["rows"], (result["spark"], result["in_process"])
        result["ratio_spark"] = round(result["spark"]["bytes_read"] / result["answer_bytes"], 3)
        result["ratio_in_process"] = round(result["in_process"]["bytes_read"] / result["answer_bytes"], 3)
        result["ratio_topic_only"] = round(result["in_process_topic_only"]["bytes_read"] / result["answer_bytes"], 3)
        result["ratio_before"] = round(result["in_process_before"]["bytes_read"] / result["answer_bytes"], 3)
        result["load_average_1m"] = os.getloadavg()[0]
        json.dump(result, sys.stdout, indent=1)
        print()
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
