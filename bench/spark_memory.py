"""Peak memory of the Spark paths over growing inputs (issue 14: "peak executor memory stays under 1 GB
whatever the input size"): ``pulsarkit export --engine spark`` and the ``pulsarkit`` data source's
``write.parquet``, each in a fresh process on local[2], over 1 GB and 4 GB of entry logs written by
``bench/spark_export.py``'s generator. The resident memory of the job's process tree is sampled
every 0.2 s and reported per part: the JVM (driver and, in local mode, the executor), the Python
workers running the tasks (the decoding; with the JVM, what an executor of a cluster holds), the data
source's planning workers and the driver's Python process. Jobs: ``export-spark``, ``source-parquet``,
``source-parquet-512m`` (a 512 MiB JVM heap), ``export-spark-sql``. Not run in CI.

    python bench/spark_memory.py --sizes 1024 4096 [--work DIR] [--keep] > result.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spark_export import build  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")

DATA_SOURCE_JOB = """
import sys
from pulsarkit.spark import local_session
conf = {"spark.driver.memory": sys.argv[3]} if len(sys.argv) > 3 else None
spark = local_session(2, "pulsarkit-bench-memory", conf=conf)
spark.read.format("pulsarkit").load(sys.argv[1]).write.mode("overwrite").parquet(sys.argv[2])
spark.stop()
"""


def _tree(pid: int) -> dict[str, Any]:
    """Resident bytes of ``pid``'s tree by part: ``driver`` (pid itself: the plan of ``export --engine
    spark``), ``jvm`` (in local mode the driver's and the executor's), ``task_workers`` (the Python
    workers running the tasks, and their daemon: with the JVM, what an executor of a cluster holds),
    ``planning_workers`` (the data source's planning, ``pyspark.sql.worker.*``: on the driver of a
    cluster); ``worker_max``, the largest task worker; ``cpu_ticks``, each process's part and user + system
    clock ticks so far."""
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[int, str, str, int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat.rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(d))
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            info[int(d)] = (int(fields[21]) * PAGE, name, cmd, int(fields[11]) + int(fields[12]))
        except (OSError, IndexError, ValueError):
            continue
    out = {"driver": 0, "jvm": 0, "task_workers": 0, "planning_workers": 0, "worker_max": 0, "task_processes": 0}
    ticks: dict[int, tuple[str, int]] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        rss, name, cmd, t = info.get(p, (0, "", "", 0))
        todo += children.get(p, [])
        if p == pid:
            out["driver"] += rss
            ticks[p] = ("driver", t)
        elif name == "java":
            out["jvm"] = max(out["jvm"], rss)  # a JVM's short-lived fork shares its pages: count one
            ticks[p] = ("jvm", t)
        elif "pyspark.sql.worker" in cmd:
            out["planning_workers"] += rss
            ticks[p] = ("planning_workers", t)
        else:
            ticks[p] = ("task_workers", t)
            out["task_workers"] += rss
            out["task_processes"] += 1
            if "pyspark.worker" in cmd and "daemon" in cmd and rss > out["worker_max"]:
                out["worker_max"] = rss
    return out | {"cpu_ticks": ticks}


def run_sampled(cmd: list[str], interval: float = 0.2, env: dict[str, str] | None = None) -> dict:
    """Runs ``cmd``; peaks of its tree's resident memory (total and per part), its duration and the CPU
    seconds of its tree (the sum of each process's last sample: up to ``interval`` of each one's end is missed)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    keys = ("total", "executor", "driver", "jvm", "task_workers", "planning_workers", "worker_max")
    peaks = dict.fromkeys(keys, 0)
    processes = 0
    cpu: dict[int, tuple[str, int]] = {}
    done = threading.Event()

    def sample() -> None:
        nonlocal processes
        while not done.is_set():
            parts = _tree(proc.pid)
            cpu.update(parts.pop("cpu_ticks"))
            parts["executor"] = parts["jvm"] + parts["task_workers"]
            parts["total"] = parts["driver"] + parts["jvm"] + parts["task_workers"] + parts["planning_workers"]
            if parts["task_workers"] > peaks["task_workers"]:
                processes = parts["task_processes"]
            for k in keys:
                peaks[k] = max(peaks[k], parts[k])
            done.wait(interval)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    done.set()
    th.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed ({proc.returncode}): {err[-3000:]}")
    hz = os.sysconf("SC_CLK_TCK")
    parts = ("driver", "jvm", "task_workers", "planning_workers")
    return {
        "seconds": round(time.perf_counter() - t, 1),
        "cpu_seconds": round(sum(t for _, t in cpu.values()) / hz, 1),
        **{f"cpu_{k}_s": round(sum(t for part, t in cpu.values() if part == k) / hz, 1) for k in parts},
        **{f"peak_{k}_mb": round(v / 2**20) for k, v in peaks.items()},
        "task_processes_at_peak": processes,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096], help="MB of entry logs")
    ap.add_argument("--jobs", nargs="+", default=["export-spark", "source-parquet"])
    ap.add_argument("--work", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the data directories")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="pulsarkit-bench-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    result: dict = {"cpus": os.cpu_count(), "runs": []}
    try:
        for size in args.sizes:
            root = work / f"data-{size}"
            if not (root / "metadata").exists():
                t = time.perf_counter()
                facts = build(root, size, topics=12, hours=24)
                facts["build_seconds"] = round(time.perf_counter() - t, 1)
                result.setdefault("data", {})[size] = facts
            logs = sum(f.stat().st_size for f in (root / "bookie" / "current").glob("*.log"))
            for job in args.jobs:
                out = work / f"out-{size}-{job}"
                shutil.rmtree(out, ignore_errors=True)
                if job == "export-spark":
                    cmd = [sys.executable, "-m", "pulsarkit", "export", str(root), "--to", "parquet", str(out)]
                    cmd += ["--engine", "spark", "--json"]
                elif job == "export-spark-sql":
                    cmd = [sys.executable, "-m", "pulsarkit", "export", str(root), "--to", "parquet", str(out)]
                    cmd += ["--engine", "spark-sql", "--json"]
                elif job == "source-parquet-512m":  # the same with a 512 MiB JVM heap (default 1 GiB)
                    cmd = [sys.executable, "-c", DATA_SOURCE_JOB, str(root), str(out), "512m"]
                else:
                    cmd = [sys.executable, "-c", DATA_SOURCE_JOB, str(root), str(out)]
                r = run_sampled(cmd)
                r.update(size_mb=size, entry_log_bytes=logs, job=job)
                r["output_bytes"] = sum(f.stat().st_size for f in out.rglob("*.parquet"))
                shutil.rmtree(out, ignore_errors=True)
                result["runs"].append(r)
                print(json.dumps(r), file=sys.stderr)
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
        result["load_average_1m"] = os.getloadavg()[0]
        json.dump(result, sys.stdout, indent=1)
        print()
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
