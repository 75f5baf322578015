"""Spark compactor scaling (issue 12): both phases on local[2] over 1 M to 10 M keyed messages, with
wall time, throughput and the peak resident memory of the whole Spark process tree (JVM and Python
workers), against the single-process compactor on the same entries.

    python bench/spark_compaction.py 1000000 4000000 10000000 > result.json
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from test_bench_compaction import build, native_compact  # noqa: E402


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(stat[1]), []).append(int(d))
            rss[int(d)] = int(stat[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return total


def main(sizes: list[int]) -> None:
    from pulsarkit.spark import local_session
    from pulsarkit.spark.compaction import compact

    spark = local_session(2, "pulsarkit-bench-compaction", conf={"spark.driver.memory": "2g"})
    out = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            rows = build(n, keys=n // 20)
            path = os.path.join(d, "entries.parquet")
            pq.write_table(
                pa.table(
                    {
                        "ledger_id": pa.array([r[0] for r in rows], pa.int64()),
                        "entry_id": pa.array([r[1] for r in rows], pa.int64()),
                        "entry": pa.array([r[2] for r in rows], pa.binary()),
                    }
                ),
                path,
                row_group_size=2000,
            )
            cols = (
                pa.array([r[2] for r in rows], pa.binary()),
                pa.array([r[0] for r in rows], pa.int64()),
                pa.array([r[1] for r in rows], pa.int64()),
            )
            t = time.perf_counter()
            single = native_compact(cols)
            single_s = time.perf_counter() - t
            del rows, cols
            peak = [0]
            done = threading.Event()

            def sample() -> None:
                while not done.is_set():
                    peak[0] = max(peak[0], tree_rss(os.getpid()))
                    time.sleep(0.2)

            th = threading.Thread(target=sample)
            th.start()
            t = time.perf_counter()
            df = spark.read.parquet(path)
            written = compact(df).count()
            spark_s = time.perf_counter() - t
            done.set()
            th.join()
            assert written == single, (written, single)
            out.append(
                {
                    "messages": n,
                    "entries_written": written,
                    "single_process_s": round(single_s, 2),
                    "single_process_msgs_per_s": round(n / single_s),
                    "spark_local2_s": round(spark_s, 2),
                    "spark_msgs_per_s": round(n / spark_s),
                    "peak_rss_bytes_process_tree": peak[0],
                }
            )
            print(json.dumps(out[-1]), file=sys.stderr)
    spark.stop()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [1_000_000])
