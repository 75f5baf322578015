"""Compares this run's benchmark ratios with the committed ones and warns on a drop.

CI measures a quick subset (``bench/test_bench_codec.py`` and ``bench/test_bench_bulk.py``) and calls::

    python bench/regression.py target/bench/ci-ratios.json --baseline bench/baseline-ratios.json

Each (case, baseline) ratio present in both is compared; a ratio more than ``--drop`` (default 30%)
below the committed one prints a WARNING line. It never fails the build: shared CI machines are
noisy, and a ratio (same run, same machine) is the most stable figure there is, not a stable one.
Refresh the baseline with ``--write`` after a deliberate change.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys


def _key(r: dict) -> tuple[str, str]:
    return r["case"], r["baseline"]


def compare(current: dict, baseline: dict, drop: float) -> tuple[list[dict], list[str]]:
    base = {_key(r): r for r in baseline["ratios"]}
    rows, warnings = [], []
    for r in current["ratios"]:
        b = base.get(_key(r))
        if b is None or r.get("reference"):
            continue
        change = r["ratio"] / b["ratio"] - 1.0
        rows.append(
            {"case": r["case"], "baseline": r["baseline"], "was": b["ratio"], "now": r["ratio"], "change": change}
        )
        if change < -drop - 1e-9:  # exactly the limit is not a drop beyond it
            warnings.append(
                f"WARNING: {r['case']} vs {r['baseline']}: {r['ratio']:.2f}x, was {b['ratio']:.2f}x "
                f"({change:+.0%}, more than -{drop:.0%})"
            )
    return rows, warnings


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("current", help="ratios JSON of this run (pytest bench --bench-summary=...)")
    p.add_argument("--baseline", default="bench/baseline-ratios.json")
    p.add_argument("--drop", type=float, default=0.30, help="warn below this fraction of the committed ratio")
    p.add_argument("--write", action="store_true", help="make this run the committed baseline")
    a = p.parse_args(argv)
    if a.write:
        shutil.copyfile(a.current, a.baseline)
        print(f"baseline written: {a.baseline}")
        return 0
    with open(a.current) as f:
        current = json.load(f)
    try:
        with open(a.baseline) as f:
            baseline = json.load(f)
    except FileNotFoundError:
        print(f"no committed baseline at {a.baseline}; nothing to compare", file=sys.stderr)
        return 0
    rows, warnings = compare(current, baseline, a.drop)
    for r in rows:
        print(f"  {r['case']:<34} vs {r['baseline']:<22} {r['was']:7.2f}x -> {r['now']:7.2f}x ({r['change']:+.0%})")
    for w in warnings:
        print(w)
    print(f"{len(rows)} ratio(s) compared, {len(warnings)} warning(s) (warnings never fail the build)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
