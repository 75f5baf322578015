"""Benchmark plumbing: every case measures a baseline and a candidate in the same run, and a
session-wide collector turns the two into a ratio (reported, never asserted).

``pytest bench`` alone (pyproject sets ``--benchmark-disable``) runs each benchmarked call once on
small inputs as a correctness smoke test. ``pytest bench --benchmark-enable`` measures at full size;
``--bench-summary=PATH`` also writes the ratio table as JSON for ``bench/report.py``.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass, field

import pytest

# Targets the project committed to: (case, baseline) -> minimum speed-up of the candidate.
TARGETS: dict[tuple[str, str], float] = {
    ("crc32c 16 MiB", "crc32c-pypi"): 1.5,
    ("decode_metadata", "upb"): 10.0,
    ("strip 1M x 1 KiB", "loop-pk-strip"): 5.0,
    ("verify 1M x 1 KiB", "loop-entry-parse"): 5.0,
    ("verify 1M x 1 KiB", "loop-layout"): 5.0,
    ("verify 1M x 1 KiB", "loop-crc32c-pypi"): 5.0,
    ("decode 256000 transaction records", "python-protobuf-upb"): 10.0,
    ("compact 1000000 keyed messages", "python-dict-compactor"): 10.0,
}


@dataclass
class Measurement:
    case: str
    side: str  # "candidate" or the baseline's name
    label: str  # what exactly was timed
    seconds: float  # best round, one call
    median: float
    rounds: int
    items: int  # entries / calls / bytes the call covers, for per-item figures
    unit: str  # "entry", "call", ...
    nbytes: int = 0


@dataclass
class Collector:
    enabled: bool
    rows: list[Measurement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(
        self, benchmark, case: str, side: str, label: str, items: int = 1, unit: str = "call", nbytes: int = 0
    ) -> None:
        benchmark.extra_info.update(case=case, side=side, items=items, unit=unit, nbytes=nbytes)
        st = getattr(benchmark, "stats", None)
        if not self.enabled or st is None:
            return
        s = st.stats
        self.rows.append(Measurement(case, side, label, s.min, s.median, s.rounds, items, unit, nbytes))

    def ratios(self) -> list[dict]:
        """One row per (case, baseline): baseline time / candidate time, best rounds of each."""
        out = []
        by_case: dict[str, dict[str, Measurement]] = {}
        for m in self.rows:
            by_case.setdefault(m.case, {})[m.side] = m
        for case, sides in by_case.items():
            cand = sides.get("candidate")
            if cand is None:
                continue
            for side, base in sides.items():
                if side == "candidate":
                    continue
                # A clock can return a zero-length round for sub-microsecond calls; fall back to medians.
                stat = "min" if base.seconds > 0 and cand.seconds > 0 else "median"
                b_s, c_s = (base.seconds, cand.seconds) if stat == "min" else (base.median, cand.median)
                ratio = b_s / c_s
                target = TARGETS.get((case, side))
                out.append(
                    {
                        "case": case,
                        "baseline": side,
                        "baseline_label": base.label,
                        "candidate_label": cand.label,
                        "items": cand.items,
                        "unit": cand.unit,
                        "nbytes": cand.nbytes,
                        "stat": stat,
                        "baseline_s": b_s,
                        "candidate_s": c_s,
                        "baseline_median_s": base.median,
                        "candidate_median_s": cand.median,
                        "baseline_rounds": base.rounds,
                        "candidate_rounds": cand.rounds,
                        "ratio": ratio,
                        "median_ratio": base.median / cand.median,
                        # "ref-*" sides are floors to compare against, not alternatives a user would run.
                        "reference": side.startswith("ref-"),
                        "target": target,
                        "met": None if target is None else ratio >= target,
                    }
                )
        return out


def pytest_addoption(parser):
    parser.addoption("--bench-summary", default=None, help="write the baseline/candidate ratio table to this JSON file")


def _benchmarks_enabled(config) -> bool:
    try:
        return not config.getoption("benchmark_disable") or bool(config.getoption("benchmark_enable"))
    except ValueError:  # pytest-benchmark not installed: nothing is measured
        return False


_KEY = pytest.StashKey[Collector]()


def pytest_configure(config):
    config.stash[_KEY] = Collector(enabled=_benchmarks_enabled(config))


@pytest.fixture(scope="session")
def full_size(pytestconfig) -> bool:
    """True when benchmarks are measured; smoke runs use small inputs."""
    return pytestconfig.stash[_KEY].enabled


@pytest.fixture(scope="session")
def ratios(pytestconfig) -> Collector:
    return pytestconfig.stash[_KEY]


def _fmt_time(s: float) -> str:
    for unit, f in (("s", 1.0), ("ms", 1e3), ("µs", 1e6), ("ns", 1e9)):
        if s * f >= 1:
            return f"{s * f:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    col = config.stash.get(_KEY, None)
    if col is None:
        return
    tr = terminalreporter
    if not col.enabled:
        tr.write_sep("-", "pulsarkit bench: smoke run (benchmarks disabled), no figures; use --benchmark-enable")
        return
    rows = col.ratios()
    tr.write_sep("-", "pulsarkit bench: baseline / candidate (best round each)")
    for r in rows:
        per = (
            ""
            if r["items"] <= 1
            else f"  per {r['unit']}: {_fmt_time(r['baseline_s'] / r['items'])} vs "
            f"{_fmt_time(r['candidate_s'] / r['items'])}"
        )
        tgt = "" if r["target"] is None else f"  target >= {r['target']:g}x: {'met' if r['met'] else 'MISSED'}"
        if r["reference"]:
            tgt = "  (reference, not a baseline)"
        tr.write_line(
            f"{r['case']:<28} {r['baseline']:<26} {_fmt_time(r['baseline_s']):>10} vs {_fmt_time(r['candidate_s']):>10}"
            f"  = {r['ratio']:6.2f}x{per}{tgt}"
        )
    path = config.getoption("bench_summary")
    if path:
        import pulsarkit

        doc = {
            "machine": {
                "nproc": os.cpu_count(),
                "python": platform.python_version(),
                "build_info": dict(pulsarkit.build_info),
            },
            "timer": str(config.getoption("benchmark_timer")),
            "ratios": rows,
            "measurements": [asdict(m) for m in col.rows],
        }
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        tr.write_line(f"ratio table written to {path}")
