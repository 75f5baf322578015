"""The user's read paths end to end, one checkout against another (issue 22: "bench figures for
``messages`` and ``export`` the same or better"): each path is a fresh ``python`` process, as a user
runs it, timed by wall clock and CPU (the children's rusage), on one data directory written by
:func:`spark_export.build` (six topics, every codec, batched, PIP-70 interceptors).

    python bench/read_paths.py --size-mb 120 --rounds 3 \\
        before=/path/to/old/checkout/python after=python > result.json

Each NAME=DIR puts DIR first on ``PYTHONPATH`` (a checkout's ``python/`` holding its own built
``_native``), so two builds run in one session on the same files, rounds interleaved; the medians
are printed as a Markdown table with each path's ratio ``after / before`` of wall time. Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spark_export  # noqa: E402

TOPIC = "persistent://public/default/orders"

PATHS = {
    # The README's Python API: one topic as an Arrow table.
    "messages_table (API)": [
        "-c",
        "import sys, pulsarkit as pk\n"
        "from pulsarkit.analysis import messages\n"
        "with pk.open_data_dir(sys.argv[1]) as dd:\n"
        f"    t = messages.messages_table(dd, [{TOPIC!r}])\n"
        "print(t.num_rows)\n",
        "{data}",
    ],
    "messages --format parquet": [
        "-m", "pulsarkit", "messages", "{data}", "--topic", TOPIC, "--format", "parquet", "-o", "{out}/m.parquet",
    ],
    "messages --format jsonl": [
        "-m", "pulsarkit", "messages", "{data}", "--topic", TOPIC, "--format", "jsonl", "-o", "{out}/m.jsonl",
    ],
    "export --engine local (all topics)": [
        "-m", "pulsarkit", "export", "{data}", "--to", "parquet", "{out}/export", "--engine", "local",
    ],
}  # fmt: skip


def _run(pythonpath: str, argv: list[str], data: Path, out: Path) -> tuple[float, float, float]:
    """One fresh ``python`` process: its wall seconds, CPU seconds (user + system) and peak resident MiB
    (the child's own rusage, from ``wait4``)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    args = [a.format(data=data, out=out) for a in argv]
    # as a user's installation runs: with its modules' bytecode cached (a PYTHONDONTWRITEBYTECODE=1
    # environment would compile every module of the package again in each process, 0.3-0.7 s here)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPATH": pythonpath}
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)  # the child's own rusage (Popen.wait would reap it without)
        wall = time.perf_counter() - t0
        err.seek(0)
        tail = err.read()[-2000:].decode(errors="replace")
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{argv} failed under {pythonpath}:\n{tail}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default=None)
    ap.add_argument("builds", nargs="+", help="NAME=PYTHONPATH, the first one the baseline")
    a = ap.parse_args()
    builds = dict(b.split("=", 1) for b in a.builds)
    work = Path(a.work or tempfile.mkdtemp(prefix="pulsarkit-read-paths-"))
    data = work / "data"
    if not data.exists():
        spark_export.build(data, a.size_mb)
    logs = sum(p.stat().st_size for p in data.rglob("*.log") if "bookie" in str(p))
    times: dict[str, dict[str, list[tuple[float, float, float]]]] = {p: {b: [] for b in builds} for p in PATHS}
    for rnd in range(a.rounds):
        order = list(builds)[rnd % len(builds) :] + list(builds)[: rnd % len(builds)]
        for path, argv in PATHS.items():
            for b in order:
                times[path][b].append(_run(os.path.abspath(builds[b]), argv, data, work / "out"))
    base = next(iter(builds))
    result = {
        "entry_log_bytes": logs,
        "rounds": a.rounds,
        "paths": {
            p: {b: {"wall_s": statistics.median(r[0] for r in v), "cpu_s": statistics.median(r[1] for r in v)}
                for b, v in per.items()}
            for p, per in times.items()
        },
    }  # fmt: skip
    print(json.dumps(result, indent=2))
    names = list(builds)
    print(f"\n| path | {' | '.join(f'{n} wall (cpu)' for n in names)} | ratio {names[-1]}/{base} |", file=sys.stderr)
    print("|---|" + "---|" * (len(names) + 1), file=sys.stderr)
    for p, per in result["paths"].items():
        cells = " | ".join(f"{per[n]['wall_s']:.2f} s ({per[n]['cpu_s']:.2f})" for n in names)
        print(f"| {p} | {cells} | {per[names[-1]]['wall_s'] / per[base]['wall_s']:.2f} |", file=sys.stderr)


if __name__ == "__main__":
    main()
