"""Through the broker vs broker-less (issue 24's first must-have): one workload written into a real Pulsar 4.0.7
standalone by the Java client, read back through a freshly restarted broker by the real Java Reader and the real
Python client (``pulsar-client``), then read from the stopped standalone's data directory by every pulsarkit read
path, each a fresh process, with two floors.

    python bench/broker_vs_storage.py --scale 0.1 --rounds 3 --json target/bench/broker_vs_storage.json

Workload (``--scale`` 1.0 = the issue's): topic A, 2 M messages of 100 B, batched, LZ4; B, 200 k x 1 KiB,
unbatched; C, 100 k x 4 KiB, batched, ZSTD (bench/java/standalone/Produce.java; payloads of a 64-letter
alphabet). The standalone runs the harness's jars (tests/interop/standalone/test_datadir_oracle.py: ``_lib``,
``Standalone``, ``JVM``) with bench/java/standalone/standalone.conf (Pulsar's defaults, one bookie).

Each round, per topic: the broker is restarted before each client read (so the entries come from the bookie, not
the broker's cache; the OS page cache stays warm for both sides), the Java Reader
(bench/java/standalone/ReadTopic.java, compiled once) and the Python client read the topic from the start to its
last message; then the standalone is stopped and each pulsarkit path runs on its directory (bench/launcher.py:
wall, CPU and peak RSS of the child itself), each round starting at another topic and path. Reported: medians over
the rounds; the ratio is the Java Reader's wall time / the path's (above 1 = faster than the broker); the clients'
start-up (process start to first message) and steady-state rate (first to last message). Floors, in this process:
Parquet encoding of the final table alone (``pq.write_table`` of ``messages_table``) and reading the topic's entry-log
bytes (all entry logs read warm with ``readinto``; the topic's share of bytes at that rate).

Not run in CI (a JVM, minutes). The data directory is kept under ``--work`` and reused when it exists
(``--work DIR`` again skips the write).
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
import launcher  # noqa: E402

# the harness's `from conftest import require_tool` is tests/conftest.py's, not bench/'s: tests/ goes first
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "interop" / "standalone"))
import test_datadir_oracle as harness  # noqa: E402

JAVA_DIR = HERE / "java" / "standalone"
# The harness's Standalone takes its configuration from the module's HERE: this benchmark's, not the oracle's.
harness.HERE = JAVA_DIR
VERSION = "4.0.7"
NS = "persistent://public/default/"
#: name -> (messages at scale 1.0, payload bytes, batched, codec)
WORKLOAD = {
    "A": (2_000_000, 100, True, "LZ4"),
    "B": (200_000, 1024, False, "NONE"),
    "C": (100_000, 4096, True, "ZSTD"),
}

PY_READER = """
import sys, time, pulsar
url, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
r = c.create_reader(topic, pulsar.MessageId.earliest)
n = size = 0
first = 0.0
while n < count:
    m = r.read_next(120_000)
    if n == 0:
        first = time.time()
    size += len(m.data())
    n += 1
last = time.time()
print("READ", n, size, 0, int(first * 1000), int(last * 1000))
r.close()
c.close()
"""

MESSAGES_TABLE = (
    "import sys, pulsarkit as pk\n"
    "from pulsarkit.analysis import messages\n"
    "with pk.open_data_dir(sys.argv[1]) as dd:\n"
    "    t = messages.messages_table(dd, [sys.argv[2]])\n"
    "print(t.num_rows)\n"
)


def pulsarkit_paths(topic: str, spark: bool) -> dict[str, list[str]]:
    paths = {
        "`messages.messages_table` (Python API)": ["-c", MESSAGES_TABLE, "{data}", topic],
        "`pulsarkit messages --format parquet`": [
            "-m", "pulsarkit", "messages", "{data}", "--topic", topic, "--format", "parquet", "-o", "{out}/m.parquet",
        ],
        "`pulsarkit messages --format jsonl`": [
            "-m", "pulsarkit", "messages", "{data}", "--topic", topic, "--format", "jsonl", "-o", "{out}/m.jsonl",
        ],
        "`pulsarkit export --engine local`": [
            "-m", "pulsarkit", "export", "{data}", "--topic", topic, "--to", "parquet", "{out}/export",
            "--engine", "local", "--no-progress",
        ],
    }  # fmt: skip
    if spark:
        paths["`pulsarkit export --engine spark` (local[2])"] = [
            "-m", "pulsarkit", "export", "{data}", "--topic", topic, "--to", "parquet", "{out}/export",
            "--engine", "spark", "--master", "local[2]", "--no-progress",
        ]  # fmt: skip
    return paths


def compile_java(lib: Path, classes: Path) -> None:
    if (classes / "ReadTopic.class").exists():
        return
    classes.mkdir(parents=True, exist_ok=True)
    javac = shutil.which("javac") or "javac"
    srcs = [str(JAVA_DIR / "Produce.java"), str(JAVA_DIR / "ReadTopic.java")]
    subprocess.run([javac, "-nowarn", "-cp", f"{lib}/*", "-d", str(classes), *srcs], check=True)


def java(lib: Path, classes: Path, main: str, *args: str) -> str:
    cmd = [shutil.which("java") or "java", "-cp", f"{classes}:{lib}/*", main, *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"{main} failed: {r.stderr[-3000:]}")
    return r.stdout


def write_workload(lib: Path, classes: Path, run: Path, counts: dict[str, int]) -> None:
    """The workload into a fresh standalone under ``run``; ``run/written.json`` marks it done."""
    if (run / "written.json").exists():
        return
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    s = harness.Standalone(lib, run, VERSION)
    try:
        for name, (_, size, batched, codec) in WORKLOAD.items():
            t0 = time.perf_counter()
            java(lib, classes, "Produce", s.url, NS + name, str(counts[name]), str(size), str(batched).lower(), codec)
            print(f"wrote {name}: {counts[name]} x {size} B in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    finally:
        s.stop()
    (run / "written.json").write_text(json.dumps(counts))


def client_read(lib: Path, classes: Path, run: Path, client: str, topic: str, count: int) -> dict[str, float]:
    """One read of ``topic`` through a broker restarted for it: wall (process start to exit), start-up (process
    start to first message) and steady-state rate (first to last message)."""
    s = harness.Standalone(lib, run, VERSION)
    try:
        if client == "java":
            cmd = [shutil.which("java") or "java", "-cp", f"{classes}:{lib}/*", "ReadTopic", s.url, topic, str(count)]
        else:
            cmd = [sys.executable, "-c", PY_READER, s.url, topic, str(count)]
        start = time.time()
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        out, _ = p.communicate(timeout=3600)
        wall = time.perf_counter() - t0
    finally:
        s.stop()
    line = next((x for x in out.splitlines() if x.startswith("READ ")), None)
    if p.returncode != 0 or line is None:
        raise RuntimeError(f"{client} reader of {topic} failed ({p.returncode}): {out[-2000:]}")
    n, size, _, first, last = map(int, line.split()[1:])
    if n != count:
        raise RuntimeError(f"{client} read {n} of {count} messages of {topic}")
    span = max(last - first, 1) / 1000
    return {"wall_s": wall, "startup_s": first / 1000 - start, "steady_msgs_s": (n - 1) / span, "bytes": size}


def floors(data: Path, topics: dict[str, str], rounds: int) -> dict[str, dict[str, float]]:
    """Parquet encoding of the final table alone, and the topic's entry-log bytes at the rate all entry logs
    read warm."""
    import pulsarkit as pk
    import pyarrow.parquet as pq
    from pulsarkit.analysis import messages

    out: dict[str, dict[str, float]] = {}
    with pk.open_data_dir(data) as dd:
        logs = [Path(p) for p, _, _ in dd.entry_logs()]
        total = sum(p.stat().st_size for p in logs)
        buf = bytearray(16 << 20)
        rates = []
        for _ in range(rounds + 1):  # the first read warms the page cache
            t0 = time.perf_counter()
            for p in logs:
                with open(p, "rb", buffering=0) as f:
                    while f.readinto(buf):
                        pass
            rates.append(total / (time.perf_counter() - t0))
        rate = statistics.median(rates[1:])
        for name, topic in topics.items():
            ml = dd.resolve(topic)
            tbytes = sum(dd.ledgers[lid].bytes_on_bookie for lid in dd.ml_ledgers(ml) if lid in dd.ledgers)
            t = messages.messages_table(dd, [topic])
            walls = []
            with tempfile.TemporaryDirectory() as tmp:
                for _ in range(rounds):
                    t0 = time.perf_counter()
                    pq.write_table(t, f"{tmp}/t.parquet")
                    walls.append(time.perf_counter() - t0)
            out[name] = {
                "rows": t.num_rows,
                "arrow_bytes": t.nbytes,
                "entry_log_bytes": tbytes,
                "parquet_write_s": statistics.median(walls),
                "entry_log_read_s": tbytes / rate,
                "entry_log_read_bytes_s": rate,
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="1.0 = 2 M / 200 k / 100 k messages")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default=None, help="keeps the data directory; reused when written")
    ap.add_argument("--spark", action=argparse.BooleanOptionalAction, default=None, help="default: if pyspark")
    ap.add_argument("--python-client", action=argparse.BooleanOptionalAction, default=None, help="default: if any")
    ap.add_argument("--json", default=None, help="also write the results here")
    a = ap.parse_args()
    try:
        import pulsar  # noqa: F401

        have_client = True
    except ImportError:
        have_client = False
    py_client = have_client if a.python_client is None else a.python_client
    try:
        import pyspark  # noqa: F401

        have_spark = True
    except ImportError:
        have_spark = False
    spark = have_spark if a.spark is None else a.spark
    load_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    counts = {n: max(1, round(c * a.scale)) for n, (c, *_) in WORKLOAD.items()}
    work = Path(a.work or tempfile.mkdtemp(prefix="pulsarkit-broker-vs-storage-")).resolve()
    lib = harness._lib(VERSION)
    classes = work / "classes"
    compile_java(lib, classes)
    run = work / "run"
    write_workload(lib, classes, run, counts)
    data = run / "data"
    topics = {n: NS + n for n in WORKLOAD}
    pythonpath = os.environ.get("PYTHONPATH", str(REPO / "python"))
    clients = ["java"] + (["python"] if py_client else [])
    reads: dict[str, dict[str, list[dict[str, float]]]] = {c: {n: [] for n in topics} for c in clients}
    paths: dict[str, dict[str, list[tuple[float, float, float]]]] = {}
    for argv in pulsarkit_paths(topics["C"], spark=False).values():  # warm-up: bytecode cached, page cache warm
        launcher.run(pythonpath, argv, data, work / "out")
    for rnd in range(a.rounds):
        for n, topic in topics.items():
            for c in clients:
                r = client_read(lib, classes, run, c, topic, counts[n])
                reads[c][n].append(r)
                print(f"round {rnd} {c} {n}: {r['wall_s']:.2f} s", file=sys.stderr)
        # each round starts at another (topic, path): the first command after the JVMs exit touches memory the
        # VM has just handed back to its host, at a fraction of the usual rate (RESULTS.md, "Fresh memory is
        # time"), and that cost is the order's, not the path's
        jobs = [(n, p, argv) for n, topic in topics.items() for p, argv in pulsarkit_paths(topic, spark).items()]
        k = rnd * (len(jobs) // a.rounds + 1) % len(jobs)
        for n, p, argv in jobs[k:] + jobs[:k]:
            r = launcher.run(pythonpath, argv, data, work / "out")
            paths.setdefault(p, {m: [] for m in topics})[n].append(r)
            print(f"round {rnd} {p} {n}: {r[0]:.2f} s", file=sys.stderr)
    fl = floors(data, topics, a.rounds)
    for n, f in fl.items():  # pulsarkit's table holds what each client read, no more, no less
        if f["rows"] != counts[n]:
            raise SystemExit(f"topic {n}: pulsarkit read {f['rows']} messages, the clients {counts[n]}")
    med = statistics.median
    result = {
        "scale": a.scale,
        "counts": counts,
        "rounds": a.rounds,
        "uptime_before": load_before,
        "uptime_after": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "clients": {
            c: {n: {k: med(r[k] for r in rs) for k in rs[0]} for n, rs in per.items()} for c, per in reads.items()
        },
        "paths": {
            p: {
                n: {
                    "wall_s": med(r[0] for r in rs),
                    "cpu_s": med(r[1] for r in rs),
                    "max_rss_mib": max(r[2] for r in rs),
                }
                for n, rs in per.items()
            }
            for p, per in paths.items()
        },
        "floors": fl,
        "work": str(work),
    }
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    print(table(result))


def table(res: dict) -> str:
    java = res["clients"]["java"]
    names = list(java)
    lines = [
        "| path | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
        "| real Java Reader through the broker | "
        + " | ".join(f"{java[n]['wall_s']:.2f} s = 1.00" for n in names)
        + " |",
    ]
    if "python" in res["clients"]:
        py = res["clients"]["python"]
        lines.append(
            "| real Python client Reader through the broker | "
            + " | ".join(f"{java[n]['wall_s'] / py[n]['wall_s']:.2f} ({py[n]['wall_s']:.2f} s)" for n in names)
            + " |"
        )
    for p, per in res["paths"].items():
        cells = (
            f"**{java[n]['wall_s'] / per[n]['wall_s']:.2f}** ({per[n]['wall_s']:.2f} s, cpu {per[n]['cpu_s']:.2f} s, "
            f"{per[n]['max_rss_mib']:.0f} MiB)"
            for n in names
        )
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    fl = res["floors"]
    for label, key in (
        ("floor: Parquet encoding of the final table alone", "parquet_write_s"),
        ("floor: reading the topic's entry-log bytes", "entry_log_read_s"),
    ):
        cells = (f"{java[n]['wall_s'] / fl[n][key]:.1f} ({fl[n][key]:.3f} s)" for n in names)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| client | " + " | ".join(f"{n} start-up / steady msgs/s" for n in names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for c, per in res["clients"].items():
        cells = (f"{per[n]['startup_s']:.2f} s / {per[n]['steady_msgs_s']:,.0f}" for n in names)
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| topic | messages | entry-log bytes | Arrow bytes | entry-log read rate |")
    lines.append("|---|---|---|---|---|")
    for n in names:
        f = fl[n]
        lines.append(
            f"| {n} | {f['rows']:,} | {f['entry_log_bytes'] / 1e6:.1f} MB | {f['arrow_bytes'] / 1e6:.1f} MB | "
            f"{f['entry_log_read_bytes_s'] / 1e9:.2f} GB/s |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
