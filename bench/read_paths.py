"""The user's read paths end to end, one checkout against another (issue 22: "bench figures for
``messages`` and ``export`` the same or better"): each path is a fresh ``python`` process, as a user
runs it, timed by wall clock and CPU, with its peak RSS (bench/launcher.py: the child's own rusage), on
one data directory written by :func:`spark_export.build` (six topics, every codec, batched, PIP-70
interceptors).

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
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import launcher  # noqa: E402
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
                times[path][b].append(launcher.run(os.path.abspath(builds[b]), argv, data, work / "out"))
    base = next(iter(builds))
    result = {
        "entry_log_bytes": logs,
        "rounds": a.rounds,
        "paths": {
            p: {b: {"wall_s": statistics.median(r[0] for r in v), "cpu_s": statistics.median(r[1] for r in v),
                    "max_rss_mib": max(r[2] for r in v)}
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
