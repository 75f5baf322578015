"""Peak memory of the read paths as the data grows (issue 24: "peak memory under 1 GB at 1 GB and at 10 GB of
entry logs"), and ``export --engine spark`` against ``--engine local`` on the same directory.

    python bench/memory_scale.py --size-mb 1024 --topics 12 --work /tmp/mem-1g --json /tmp/mem-1g/result.json
    python bench/memory_scale.py --size-mb 10240 --topics 12 --work /tmp/mem-10g --spark --cluster

The directory: :func:`spark_export.build` (``--topics`` topics, JSON-like messages of 0.2-2 KiB batched up to
100 messages or 128 KiB, LZ4/ZSTD/SNAPPY/none, PIP-70 interceptors, ledgers of 2000 entries) written until the
bookie holds ``--size-mb`` of entry logs; kept under ``--work`` and reused. Each path is a fresh process forked
by bench/launcher.py's launcher (the child's own peak RSS and CPU), ``--rounds`` times; reported: wall and CPU
medians, the highest peak RSS. A Spark job's JVM and Python workers outlive the driver's ``wait`` (neither its
CPU nor its memory reaches the driver's rusage): Spark runs are sampled instead (bench/spark_memory.py's
``run_sampled``: the process tree's resident memory every 0.2 s, peak of the sum, and its CPU seconds).

Paths, every topic of the directory unless said:

- ``message_batches`` (Python API, streamed): every batch iterated and dropped, as a user reads more than memory;
  the child also reports the largest batch and pyarrow's memory-pool high-water mark.
- ``messages_table`` (Python API, one topic, the first of the directory): one whole table is the data's size
  by definition; it is here to show that it grows, and by how much.
- ``messages --format parquet`` and ``--format jsonl``: written to stdout, which is /dev/null (the encoding and
  the writer run as with ``-o``, without filling the disk with ten gigabytes of output).
- ``export --engine local`` to Parquet (written to ``--work``, removed after each run).
- with ``--spark``: ``export --engine spark --master local[2]``; with ``--cluster`` also through a standalone
  cluster of 1 and then 2 workers of one core each (:class:`pulsarkit.testing.spark_cluster.StandaloneCluster`).

Not run in CI (minutes to an hour, gigabytes of disk).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import launcher  # noqa: E402
import spark_export  # noqa: E402
import spark_memory  # noqa: E402

# (no braces in these scripts: the launcher formats {data} and {out} into every argument)
STREAM = """
import json, sys, pyarrow as pa, pulsarkit as pk
from pulsarkit.analysis import messages
rows = arrow = largest = 0
with pk.open_data_dir(sys.argv[1]) as dd:
    for b in messages.message_batches(dd):
        rows += b.num_rows
        arrow += b.nbytes
        largest = max(largest, b.nbytes)
pool = pa.default_memory_pool()
stats = dict(rows=rows, arrow_bytes=arrow, largest_batch_bytes=largest,
             pool=pool.backend_name, pool_max_bytes=pool.max_memory())
open(sys.argv[2], "w").write(json.dumps(stats))
"""

TABLE = """
import json, sys, pyarrow as pa, pulsarkit as pk
from pulsarkit.analysis import messages
with pk.open_data_dir(sys.argv[1]) as dd:
    topic = messages.message_topics(dd)[0]
    t = messages.messages_table(dd, [topic])
pool = pa.default_memory_pool()
stats = dict(topic=topic, rows=t.num_rows, arrow_bytes=t.nbytes,
             pool=pool.backend_name, pool_max_bytes=pool.max_memory())
open(sys.argv[2], "w").write(json.dumps(stats))
"""


def paths(spark: bool) -> dict[str, list[str]]:
    """In the order run: the two engines of ``export`` back to back (their ratio), then the rest."""
    p = {
        "`export --engine local` (all topics)": [
            "-m", "pulsarkit", "export", "{data}", "--to", "parquet", "{out}/export", "--engine", "local",
            "--no-progress",
        ],
    }  # fmt: skip
    if spark:
        p["`export --engine spark` local[2] (all topics)"] = [
            "-m", "pulsarkit", "export", "{data}", "--to", "parquet", "{out}/export", "--engine", "spark",
            "--master", "local[2]", "--no-progress",
        ]  # fmt: skip
    return p | {
        "`message_batches` (API, streamed, all topics)": ["-c", STREAM, "{data}", "{out}/stats.json"],
        "`messages --format parquet` (all topics)": ["-m", "pulsarkit", "messages", "{data}", "--format", "parquet"],
        "`messages --format jsonl` (all topics)": ["-m", "pulsarkit", "messages", "{data}", "--format", "jsonl"],
        "`messages_table` (API, one topic)": ["-c", TABLE, "{data}", "{out}/stats.json"],
    }


def sampled(argv: list[str], data: Path, out: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """A Spark job's wall seconds, CPU seconds and peak resident MiB of its process tree."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    r = spark_memory.run_sampled([sys.executable, *(a.format(data=data, out=out) for a in argv)], env=env)
    print(f"  {json.dumps(r)}", file=sys.stderr)  # per part: the JVM, the task workers, the driver
    return r["seconds"], r["cpu_seconds"], r["peak_total_mb"]


def cluster_runs(pythonpath: str, data: Path, work: Path, rounds: int) -> dict[str, list[tuple[float, float, float]]]:
    """``export --engine spark`` through a standalone cluster of 1, then 2 one-core workers (the driver a fresh
    process; its peak RSS is the driver's, the executors being the workers' children)."""
    from pulsarkit.testing.spark_cluster import StandaloneCluster

    out: dict[str, list[tuple[float, float, float]]] = {}
    for n in (1, 2):
        with StandaloneCluster(workers=n, cores=1, memory="1g", executor_memory="768m") as cluster:
            argv = [
                "-m", "pulsarkit", "export", "{data}", "--to", "parquet", "{out}/export", "--engine", "spark",
                "--master", cluster.master_url, "--no-progress",
            ]  # fmt: skip
            env = cluster.driver_env() | {"PYTHONPATH": pythonpath}
            for _ in range(rounds):
                r = sampled(argv, data, work / "out", env)
                out.setdefault(f"`export --engine spark` standalone, {n} worker(s) x 1 core", []).append(r)
                print(f"cluster {n}: {r[0]:.1f} s", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--topics", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--work", required=True, help="the data directory is WORK/data (written unless there)")
    ap.add_argument("--spark", action="store_true", help="also export --engine spark, local[2]")
    ap.add_argument("--cluster", action="store_true", help="also a standalone cluster of 1 and 2 workers")
    ap.add_argument("--only", default=None, help="only the paths whose name contains this")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    work = Path(a.work).resolve()
    data = work / "data"
    result: dict = {"uptime_before": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()}
    if not (data / "metadata").exists():
        t0 = time.perf_counter()
        result["build"] = spark_export.build(data, a.size_mb, topics=a.topics)
        result["build"]["seconds"] = time.perf_counter() - t0
    result["entry_log_bytes"] = sum(p.stat().st_size for p in (data / "bookie" / "current").glob("*.log"))
    pythonpath = os.environ.get("PYTHONPATH", str(HERE.parent / "python"))
    runs: dict[str, list[tuple[float, float, float]]] = {}
    stats: dict[str, dict] = {}
    for _ in range(a.rounds):
        for name, argv in paths(a.spark).items():
            if a.only and a.only not in name:
                continue
            if "spark" in name:
                r = sampled(argv, data, work / "out", os.environ | {"PYTHONPATH": pythonpath})
            else:
                r = launcher.run(pythonpath, argv, data, work / "out")
            runs.setdefault(name, []).append(r)
            if (work / "out" / "stats.json").exists():
                stats[name] = json.loads((work / "out" / "stats.json").read_text())
            print(f"{name}: {r[0]:.1f} s wall, {r[1]:.1f} s cpu, {r[2]:.0f} MiB", file=sys.stderr)
    if a.cluster:
        runs |= cluster_runs(pythonpath, data, work, a.rounds)
    shutil.rmtree(work / "out", ignore_errors=True)
    med = statistics.median
    result |= {
        "rounds": a.rounds,
        "uptime_after": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "paths": {
            n: {"wall_s": med(r[0] for r in rs), "cpu_s": med(r[1] for r in rs), "max_rss_mib": max(r[2] for r in rs)}
            for n, rs in runs.items()
        },
        "stats": stats,
    }
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    gb = result["entry_log_bytes"] / 1e9
    print(f"\n| path ({gb:.2f} GB of entry logs) | wall | CPU | MB/s of entry logs | peak RSS |")
    print("|---|---|---|---|---|")
    for n, r in result["paths"].items():
        mbps = result["entry_log_bytes"] / 1e6 / r["wall_s"]
        print(f"| {n} | {r['wall_s']:.1f} s | {r['cpu_s']:.1f} s | {mbps:.0f} | {r['max_rss_mib']:.0f} MiB |")


if __name__ == "__main__":
    main()
