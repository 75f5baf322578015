"""Renders the benchmark figures of one run into bench/RESULTS.md.

Inputs: the ratio table that ``pytest bench --bench-summary=...`` writes (see conftest.py) and the
criterion output directory. Only the block between the GENERATED markers is replaced; notes written
around it are kept.

    python bench/report.py --summary target/bench/ratios.json --criterion target/criterion \
        --command "scripts/bench.sh" --out bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
from pathlib import Path

BEGIN = "<!-- BEGIN GENERATED (scripts/bench.sh) -->"
END = "<!-- END GENERATED -->"


def _t(s: float) -> str:
    for unit, f in (("s", 1.0), ("ms", 1e3), ("µs", 1e6)):
        if s * f >= 1:
            return f"{s * f:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def _gbs(nbytes: int, s: float) -> str:
    return f"{nbytes / s / 1e9:.1f} GB/s" if nbytes and s else ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                keep = ["sse4_2", "pclmulqdq", "avx2", "avx512f", "avx512vl", "vpclmulqdq"]
                return " ".join(f for f in keep if f in flags)
    except OSError:
        pass
    return ""


def _version(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine_section(summary: dict, command: str, load: str) -> list[str]:
    import crc32c
    import google.protobuf
    import pyarrow
    from google.protobuf.internal import api_implementation

    m = summary.get("machine", {})
    bi = m.get("build_info", {})
    return [
        "## Machine and command",
        "",
        f"- CPU: {_cpu_model()} ({_cpu_flags()}), nproc = {m.get('nproc', os.cpu_count())}",
        f"- Load average when the run started: {load} (the machine is shared; see the timer note below)",
        f"- pulsarkit {bi.get('version')} ({bi.get('profile')}), CRC32C path `{bi.get('crc32c_implementation')}`, "
        f"{bi.get('target_arch')}",
        f"- Python {m.get('python', platform.python_version())}, pyarrow {pyarrow.__version__}, "
        f"protobuf {google.protobuf.__version__} ({api_implementation.Type()} backend), "
        f"crc32c {getattr(crc32c, '__version__', '?')} (hardware_based={getattr(crc32c, 'hardware_based', '?')}), "
        f"{_version(['rustc', '--version'])}",
        f"- Source: commit {_version(['git', 'rev-parse', '--short', 'HEAD'])}"
        f"{' with uncommitted changes' if _version(['git', 'status', '--porcelain', '--untracked-files=no']) else ''}",
        f"- Command: `{command}`",
        f"- pytest timer: `{summary.get('timer', 'time.perf_counter')}` (CRC32C cases: `time.perf_counter`); every "
        "figure is the best round, baseline and candidate timed in the same pytest session",
        "",
    ]


def ratio_section(summary: dict) -> list[str]:
    rows = summary.get("ratios", [])
    out = [
        "## Python: baseline vs candidate (same run)",
        "",
        "| case | baseline | pulsarkit | baseline time | pulsarkit time | per item (baseline → pulsarkit) "
        "| speed-up | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per = ""
        if r["items"] > 1:
            per = f"{_t(r['baseline_s'] / r['items'])} → {_t(r['candidate_s'] / r['items'])} per {r['unit']}"
        elif r["nbytes"]:
            per = f"{_gbs(r['nbytes'], r['baseline_s'])} → {_gbs(r['nbytes'], r['candidate_s'])}"
        tgt = "" if r["target"] is None else f"≥ {r['target']:g}x: **{'met' if r['met'] else 'missed'}**"
        if r.get("reference"):
            tgt = "reference (floor), not a baseline"
        out.append(
            f"| {r['case']} | {r['baseline_label']} | {r['candidate_label']} | {_t(r['baseline_s'])} | "
            f"{_t(r['candidate_s'])} | {per} | **{r['ratio']:.2f}x** "
            f"{'(medians)' if r.get('stat') == 'median' else '(median ' + format(r['median_ratio'], '.2f') + 'x)'}"
            f" | {tgt} |"
        )
    return out + [""]


def criterion_section(root: Path) -> list[str]:
    found = []
    for bj in sorted(root.glob("**/new/benchmark.json")):
        est = bj.parent / "estimates.json"
        if not est.exists():
            continue
        b = json.loads(bj.read_text())
        e = json.loads(est.read_text())
        ns = e["median"]["point_estimate"]
        lo = e["median"]["confidence_interval"]["lower_bound"]
        hi = e["median"]["confidence_interval"]["upper_bound"]
        thr = b.get("throughput") or {}
        if "Bytes" in thr:
            t = f"{thr['Bytes'] / ns:.2f} GB/s"
        elif "BytesDecimal" in thr:
            t = f"{thr['BytesDecimal'] / ns:.2f} GB/s"
        elif "Elements" in thr:
            per = ns / thr["Elements"]
            t = f"{per:.1f} ns/item ({thr['Elements'] / ns * 1e3:.2f} M items/s)"
        else:
            t = ""
        found.append((b["full_id"], ns, lo, hi, t))
    if not found:
        return ["## Rust kernels (criterion)", "", "No criterion results found.", ""]
    out = [
        "## Rust kernels (criterion, median with 95% CI)",
        "",
        "| benchmark | time | 95% CI | throughput |",
        "|---|---|---|---|",
    ]
    for full_id, ns, lo, hi, t in found:
        out.append(f"| {full_id} | {_t(ns * 1e-9)} | {_t(lo * 1e-9)} – {_t(hi * 1e-9)} | {t} |")
    return out + [""]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--summary", required=True)
    ap.add_argument("--criterion", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--load", default="")
    ap.add_argument("--out", default="bench/RESULTS.md")
    a = ap.parse_args()
    summary = json.loads(Path(a.summary).read_text())
    block = [BEGIN, ""]
    block += machine_section(summary, a.command, a.load)
    block += ratio_section(summary)
    block += criterion_section(Path(a.criterion))
    block += [END]
    text = "\n".join(block)
    out = Path(a.out)
    if out.exists() and BEGIN in out.read_text():
        old = out.read_text()
        new = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: text, old, flags=re.DOTALL)
    else:
        new = "# pulsarkit benchmark results\n\n" + text + "\n"
    out.write_text(new)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
