"""How much CPU the machine gives two busy processes at once: the same pure-Python loop run alone, then
as two processes side by side, rounds interleaved. ``capacity`` = 2 x (time alone) / (time side by side):
2.0 is two whole cores, 1.0 one core shared. Every overlap this project measures (a read ahead, the
Parquet writer's thread, Spark's local[2]) is bounded by it.

    python bench/parallelism.py --rounds 5

Not run in CI."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

LOOP = "x = 0\nfor i in range(15_000_000):\n    x += i\n"


def _one() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", LOOP])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    alone, pair = [], []
    for _ in range(a.rounds):
        t = time.perf_counter()
        _one().wait()
        alone.append(time.perf_counter() - t)
        t = time.perf_counter()
        ps = [_one(), _one()]
        for p in ps:
            p.wait()
        pair.append(time.perf_counter() - t)
    one, two = statistics.median(alone), statistics.median(pair)
    print(
        f"alone {one:.2f} s, two side by side {two:.2f} s (medians of {a.rounds}): capacity {2 * one / two:.2f} cores"
    )


if __name__ == "__main__":
    main()
