"""Throughput of schema decoding vs bytes (issue 23's last must-show): topics written into a real Pulsar 4.0.7
standalone by the real Java client with AVRO, JSON, INT64 and STRING schemas, then each pulsarkit command path
run on the stopped standalone's data directory as a fresh process, with and without ``--decode schema``.

    python bench/decode_schema.py --scale 0.1 --rounds 3 --work target/bench/decode-schema \
        --json target/bench/decode_schema.json

Workload (``--scale`` 1.0): ``avro``, 200 k records of seven fields (long, int, double, boolean, a string, a
nullable string, a nested record of a string and an int); ``json``, 100 k of the same record with the JSON
schema; ``int64``, 1 M longs; ``string``, 500 k short strings. All batched, uncompressed
(bench/java/schema/SchemaProduce.java, compiled against the harness's jars; the standalone is the one of
bench/broker_vs_storage.py, bench/java/standalone/standalone.conf).

Each round, per topic, interleaved: ``pulsarkit export --engine local`` to Parquet and ``pulsarkit messages
--format parquet``, each with ``--decode bytes`` (the default) and ``--decode schema``, each a fresh process:
wall, CPU and peak RSS of the child, forked by the small launcher of bench/launcher.py (Linux's peak RSS of a
child counts the memory of the process it was forked from). Row counts and checks run in child processes for the
same reason. Reported: medians over the rounds, messages/s
and MB/s (the topic's payload bytes over the wall time), the decoded/bytes ratio of wall time. Checked on the
last round's outputs: the decoded output has as many rows as the bytes output, and no row has a decode_error.

Not run in CI (a JVM, minutes). The data directory is kept under ``--work`` and reused when it exists.
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

# the harness's `from conftest import require_tool` is tests/conftest.py's, not bench/'s: tests/ goes first
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "interop" / "standalone"))
import test_datadir_oracle as harness  # noqa: E402
from launcher import Launcher  # noqa: E402

JAVA_SRC = HERE / "java" / "schema" / "SchemaProduce.java"
# The harness's Standalone takes its configuration from the module's HERE: the broker-vs-storage benchmark's
harness.HERE = HERE / "java" / "standalone"
VERSION = "4.0.7"
NS = "persistent://public/default/"
#: topic name (= the producer's schema kind) -> messages at scale 1.0
WORKLOAD = {"avro": 200_000, "json": 100_000, "int64": 1_000_000, "string": 500_000}


def paths(topic: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for decode in ("bytes", "schema"):
        out[f"export|{decode}"] = [
            "-m", "pulsarkit", "export", "{data}", "--topic", topic, "--to", "parquet", "{out}/export",
            "--engine", "local", "--no-progress", "--decode", decode,
        ]  # fmt: skip
        out[f"messages|{decode}"] = [
            "-m", "pulsarkit", "messages", "{data}", "--topic", topic, "--format", "parquet",
            "-o", "{out}/m.parquet", "--decode", decode,
        ]  # fmt: skip
    return out


def compile_java(lib: Path, classes: Path) -> None:
    if (classes / "SchemaProduce.class").exists():
        return
    classes.mkdir(parents=True, exist_ok=True)
    javac = shutil.which("javac") or "javac"
    subprocess.run([javac, "-nowarn", "-cp", f"{lib}/*", "-d", str(classes), str(JAVA_SRC)], check=True)


def write_workload(lib: Path, classes: Path, run: Path, counts: dict[str, int]) -> None:
    """The workload into a fresh standalone under ``run``; ``run/written.json`` marks it done."""
    if (run / "written.json").exists():
        if json.loads((run / "written.json").read_text()) != counts:
            raise SystemExit(f"{run} holds another scale's workload: use another --work")
        return
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    s = harness.Standalone(lib, run, VERSION)
    try:
        for kind, n in counts.items():
            t0 = time.perf_counter()
            cmd = [shutil.which("java") or "java", "-cp", f"{classes}:{lib}/*", "SchemaProduce", s.url, NS + kind]
            r = subprocess.run([*cmd, kind, str(n)], capture_output=True, text=True, timeout=3600)
            if r.returncode != 0:
                raise RuntimeError(f"SchemaProduce {kind} failed: {r.stderr[-3000:]}")
            print(f"wrote {kind}: {n} messages in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    finally:
        s.stop()
    (run / "written.json").write_text(json.dumps(counts))


SIZES = """
import json, sys, pulsarkit as pk, pyarrow.compute as pc
from pulsarkit.analysis import messages
out = {}
with pk.open_data_dir(sys.argv[1]) as dd:
    for topic in sys.argv[2:]:
        t = messages.messages_table(dd, [topic])
        out[topic] = {"rows": t.num_rows, "payload_bytes": int(pc.sum(pc.binary_length(t["payload"])).as_py())}
print(json.dumps(out))
"""

CHECK = """
import json, sys, pyarrow.dataset as ds
d = ds.dataset(sys.argv[1], format="parquet")
errors = d.count_rows(filter=ds.field("decode_error").is_valid()) if "decode_error" in d.schema.names else 0
print(json.dumps({"rows": d.count_rows(), "decode_errors": errors, "typed": "value" in d.schema.names}))
"""


def child(pythonpath: str, code: str, *args: str) -> dict:
    env = os.environ | {"PYTHONPATH": pythonpath}
    r = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def topic_sizes(pythonpath: str, data: Path, topics: dict[str, str]) -> dict[str, dict[str, int]]:
    """Each topic's messages and payload bytes (what every path reads), from the bytes table."""
    got = child(pythonpath, SIZES, str(data), *topics.values())
    return {name: got[topic] for name, topic in topics.items()}


def check_outputs(pythonpath: str, out: Path, path: str) -> dict:
    """Rows and decode_error rows of one path's output (and whether it has the typed ``value``)."""
    target = out / "export" if path.startswith("export") else out / "m.parquet"
    return child(pythonpath, CHECK, str(target))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="1.0 = 200 k AVRO / 100 k JSON / 1 M INT64 / 500 k STRING")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default=None, help="keeps the data directory; reused when written")
    ap.add_argument("--topics", default=",".join(WORKLOAD), help="a subset of " + ",".join(WORKLOAD))
    ap.add_argument("--json", default=None, help="also write the results here")
    a = ap.parse_args()
    launcher = Launcher()  # first, while this process is small
    load_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    counts = {n: max(1, round(c * a.scale)) for n, c in WORKLOAD.items()}
    work = Path(a.work or tempfile.mkdtemp(prefix="pulsarkit-decode-schema-")).resolve()
    lib = harness._lib(VERSION)
    classes = work / "classes"
    compile_java(lib, classes)
    run = work / "run"
    write_workload(lib, classes, run, counts)
    data = run / "data"
    topics = {n: NS + n for n in a.topics.split(",")}
    pythonpath = os.environ.get("PYTHONPATH", str(REPO / "python"))
    sizes = topic_sizes(pythonpath, data, topics)
    for argv in paths(topics[next(iter(topics))]).values():  # warm-up: bytecode cached, page cache warm
        launcher.run(pythonpath, argv, data, work / "out")
    runs: dict[str, dict[str, list[tuple[float, float, float]]]] = {n: {} for n in topics}
    checks: dict[str, dict[str, dict]] = {n: {} for n in topics}
    for rnd in range(a.rounds):
        for n, topic in topics.items():
            for p, argv in paths(topic).items():
                out = work / "out"
                r = launcher.run(pythonpath, argv, data, out)
                runs[n].setdefault(p, []).append(r)
                if rnd == a.rounds - 1:
                    checks[n][p] = check_outputs(pythonpath, out, p)
                print(f"round {rnd} {n} {p}: {r[0]:.2f} s, {r[2]:.0f} MiB", file=sys.stderr)
    launcher.close()
    for n in topics:
        for p, c in checks[n].items():
            typed = p.endswith("schema") == c["typed"]
            if c["rows"] != sizes[n]["rows"] or c["decode_errors"] or not typed:
                raise SystemExit(f"topic {n}, {p}: {c} (expected {sizes[n]['rows']} rows, no decode_error)")
    med = statistics.median
    result = {
        "scale": a.scale,
        "counts": counts,
        "rounds": a.rounds,
        "uptime_before": load_before,
        "uptime_after": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "sizes": sizes,
        "checks": checks,
        "paths": {
            n: {
                p: {
                    "wall_s": med(r[0] for r in rs),
                    "cpu_s": med(r[1] for r in rs),
                    "max_rss_mib": max(r[2] for r in rs),
                }
                for p, rs in per.items()
            }
            for n, per in runs.items()
        },
        "work": str(work),
    }
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    print(table(result))


def table(res: dict) -> str:
    lines = [
        "| topic (messages, payload) | command | decode | wall | messages/s | MB/s | decoded/bytes wall "
        "| extra per message | CPU | peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, per in res["paths"].items():
        rows, size = res["sizes"][n]["rows"], res["sizes"][n]["payload_bytes"]
        for cmd in ("export", "messages"):
            base = per[f"{cmd}|bytes"]["wall_s"]
            for decode in ("bytes", "schema"):
                r = per[f"{cmd}|{decode}"]
                ratio = f"**{r['wall_s'] / base:.2f}**" if decode == "schema" else "1.00"
                extra = f"{(r['wall_s'] - base) / rows * 1e6:.1f} µs" if decode == "schema" else ""
                lines.append(
                    f"| {n} ({rows:,}, {size / 1e6:.1f} MB) | {cmd} | {decode} | {r['wall_s']:.2f} s | "
                    f"{rows / r['wall_s']:,.0f} | {size / 1e6 / r['wall_s']:.1f} | {ratio} | {extra} | "
                    f"{r['cpu_s']:.2f} s | "
                    f"{r['max_rss_mib']:.0f} MiB |"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
