"""``open_data_dir`` + ``messages_table`` of one topic, split into its two phases, one checkout against
another (issue 24, "only the ledgers and index ranges of the requested topics opened").

    python bench/lazy_index.py build /tmp/many --topics 20 --entries 50000   # a directory of many entries
    python bench/lazy_index.py time --data /tmp/many --topic persistent://public/default/t0 \\
        --rounds 5 before=/tmp/base/python after=python

``build`` writes ``topics`` topics of ``entries`` small unbatched entries each (5,000 entries per
ledger) with pulsarkit's own writer: a location index of ``topics * entries`` keys. ``time`` runs each
build in a fresh process per round (rounds interleaved, one warm-up each) and prints the medians of the
open, the read and both, in seconds of wall time, with the load average. Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import json, sys, time
t0 = time.perf_counter()
from pulsarkit.analysis.messages import messages_table
from pulsarkit.scan.datadir import open_data_dir
t1 = time.perf_counter()
dd = open_data_dir(sys.argv[1])
t2 = time.perf_counter()
t = messages_table(dd, [sys.argv[2]])
t3 = time.perf_counter()
dd.close()
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "read": t3 - t2, "rows": t.num_rows}))
"""


def build(root: Path, topics: int, entries: int) -> None:
    import pulsarkit as pk

    store = pk.Store.open(root, sync=False)
    cfg = pk.ManagedLedgerConfig(max_entries_per_ledger=5000, minimum_rollover_time_ms=0)
    for t in range(topics):
        ml = store.managed_ledger(f"public/default/persistent/t{t}", cfg)
        for start in range(0, entries, 10_000):
            n = min(10_000, entries - start)
            ml.add_entries(
                [
                    pk.encode_entry({"producer_name": "p", "sequence_id": start + i, "publish_time": 1}, b"x" * 16)
                    for i in range(n)
                ]
            )
        ml.flush()
    store.close()
    for p in root.rglob("LOCK"):  # a foreign directory has none of pulsarkit's own locks
        p.unlink()


def run(pythonpath: str, data: str, topic: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(pythonpath)}
    out = subprocess.run([sys.executable, "-c", CHILD, data, topic], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("root", type=Path)
    b.add_argument("--topics", type=int, default=20)
    b.add_argument("--entries", type=int, default=50_000)
    t = sub.add_parser("time")
    t.add_argument("--data", required=True)
    t.add_argument("--topic", required=True)
    t.add_argument("--rounds", type=int, default=5)
    t.add_argument("builds", nargs="+", help="NAME=PYTHONPATH, the first one the baseline")
    a = ap.parse_args()
    if a.cmd == "build":
        t0 = time.perf_counter()
        build(a.root, a.topics, a.entries)
        print(f"built {a.root}: {a.topics} topics x {a.entries} entries in {time.perf_counter() - t0:.1f} s")
        return
    builds = dict(x.split("=", 1) for x in a.builds)
    got: dict[str, list[dict]] = {n: [] for n in builds}
    for n, p in builds.items():  # warm-up
        run(p, a.data, a.topic)
    for rnd in range(a.rounds):
        order = list(builds)[rnd % len(builds) :] + list(builds)[: rnd % len(builds)]
        for n in order:
            got[n].append(run(builds[n], a.data, a.topic))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| build | open_data_dir | messages_table | both | rows |")
    print("|---|---|---|---|---|")
    for n, rs in got.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("open", "read")}
        both = statistics.median(r["open"] + r["read"] for r in rs)
        print(f"| {n} | {med['open']:.3f} s | {med['read']:.3f} s | {both:.3f} s | {rs[0]['rows']} |")


if __name__ == "__main__":
    main()
