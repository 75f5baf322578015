"""One pulsarkit command, two (or more) source trees, rounds interleaved: wall, CPU and peak RSS medians
of each fresh process (bench/launcher.py: the child's own rusage), for a before/after figure of one change.

    python bench/cmd_compare.py --rounds 5 before=/tmp/base/python after=python -- \\
        -m pulsarkit messages {data} --topic persistent://public/default/A --format jsonl -o {out}/m.jsonl \\
        --data /tmp/bvs/run/data

``--env after:PULSARKIT_DECODE_THREADS=1`` sets a variable for one build's runs (the same tree, two settings).
``{data}`` and ``{out}`` in the command are replaced (``--data``; ``{out}`` a fresh directory per run).
Not run in CI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import launcher  # noqa: E402


def main() -> None:
    argv = sys.argv[1:]
    cmd = argv[argv.index("--") + 1 :] if "--" in argv else []
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data", required=True)
    ap.add_argument("builds", nargs="+", help="NAME=PYTHONPATH, the first one the baseline")
    ap.add_argument("--env", action="append", default=[], help="NAME:VAR=VALUE, set for build NAME's runs")
    a, rest = ap.parse_known_args(argv[: argv.index("--")] if "--" in argv else argv)
    cmd = rest + cmd
    builds = dict(b.split("=", 1) for b in a.builds)
    envs: dict[str, dict[str, str]] = {b: {} for b in builds}
    for e in a.env:
        name, setting = e.split(":", 1)
        var, value = setting.split("=", 1)
        envs[name][var] = value
    out = Path(tempfile.mkdtemp(prefix="pulsarkit-cmd-"))
    got: dict[str, list[tuple[float, float, float]]] = {b: [] for b in builds}
    for b in builds:  # warm-up: bytecode cached, page cache warm
        launcher.run(os.path.abspath(builds[b]), cmd, Path(a.data), out, envs[b])
    for rnd in range(a.rounds):
        order = list(builds)[rnd % len(builds) :] + list(builds)[: rnd % len(builds)]
        for b in order:
            got[b].append(launcher.run(os.path.abspath(builds[b]), cmd, Path(a.data), out, envs[b]))
    base = next(iter(builds))
    med = {b: [statistics.median(r[k] for r in v) for k in range(3)] for b, v in got.items()}
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| build | wall | cpu | peak RSS | wall / " + base + " |")
    print("|---|---|---|---|---|")
    for b, (w, c, m) in med.items():
        print(f"| {b} | {w:.2f} s | {c:.2f} s | {m:.0f} MiB | {w / med[base][0]:.2f} |")


if __name__ == "__main__":
    main()
