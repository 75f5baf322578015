"""pulsarkit against the Java implementations it replaces, on the same input files, in one run.

    python bench/java_compare.py                 # full sizes (~6-8 min on 2 cores), table on stdout
    python bench/java_compare.py --quick         # tiny inputs, each Java benchmark once (smoke test, < 60 s)

Steps: (1) build bench/java (JMH; ``mvn -q -o package``, online only if the offline build fails); (2) write the
inputs into a temporary directory: the same data the pytest benchmarks use (bench/test_bench_codec.py's CRC32C
buffers and decode_metadata entries, bench/test_bench_bulk.py's 1 KiB entries, bench/test_bench_storage.py's entry
logs, plus the same logs with 16 KiB entries, and bench/test_bench_gc.py's log to compact); (3) run the JMH
harness on them (each benchmark checks its results against the expected values the driver wrote, e.g. pulsarkit's
CRC32C); (4) time the matching pulsarkit calls on the same files; (5) print one row per comparison: Java,
pulsarkit, the speed-up (Java time / pulsarkit time, medians of both) and the physical ceiling for those bytes.

Both sides are timed on the wall clock (JMH: 5 one-second iterations after 3 of warm-up in a forked JVM, or single
shots for compaction; pulsarkit: --reps calls after a warm-up call). Medians are compared; the JSON output
(--json) keeps every repetition.
"""

from __future__ import annotations

import argparse
import array
import functools
import importlib.util
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JAVA_PROJECT = REPO / "bench" / "java"
BUILD = REPO / "target" / "java" / "bench"
OUT = REPO / "target" / "bench"

# How the forked JVMs run: the flags Pulsar's and BookKeeper's launch scripts pass for netty and circe-checksum,
# and room for the 1 GiB entry column in direct memory.
JVM_FLAGS = [
    "-Xmx4g",
    "-XX:MaxDirectMemorySize=4g",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens=java.base/java.util.zip=ALL-UNNAMED",
]

FULL = {"entries1k": 1_000_000, "metadata": 100_000, "scan-1k": 200_000, "scan-16k": 12_800, "gc": 16_000}
QUICK = {"entries1k": 20_000, "metadata": 2_000, "scan-1k": 2_000, "scan-16k": 200, "gc": 200}
CRC_SIZES = (1024, 65536, 1 << 20)


def _bench_module(name: str):
    """A module of bench/ (its input generators), loaded by path: the inputs here are theirs."""
    spec = importlib.util.spec_from_file_location(f"_pk_bench_{name}", REPO / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _props(path: Path, **values) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))


# --- inputs -------------------------------------------------------------------------------------------------


def gen_crc(root: Path) -> None:
    """bench/test_bench_codec.py's CRC32C buffers (one Random(1) stream): 1 KiB and 64 KiB as they are, 1 MiB
    as the first MiB of its 16 MiB buffer."""
    import pulsarkit as pk

    codec = _bench_module("test_bench_codec")
    rng = random.Random(1)
    bufs = {n: rng.randbytes(n) for n in codec.CRC_SIZES.values()}
    by_size = {1024: bufs[1024], 65536: bufs[65536], 1 << 20: bufs[16 << 20][: 1 << 20]}
    d = root / "crc"
    d.mkdir()
    for n, data in by_size.items():
        (d / f"{n}.bin").write_bytes(data)
        _props(d / f"{n}.properties", crc32c=pk.crc32c(data))


def gen_entries1k(root: Path, n: int) -> None:
    """bench/test_bench_bulk.py's column: n stored entries of exactly 1 KiB, one in a thousand corrupt."""
    import pulsarkit as pk

    bulk = _bench_module("test_bench_bulk")
    rng = random.Random(3)
    tmpl = [bulk._template(i, rng) for i in range(bulk.TEMPLATES)]
    values = bytearray(b"".join(tmpl[i % bulk.TEMPLATES] for i in range(n)))
    for i in range(0, n, bulk.CORRUPT_EVERY):
        values[(i + 1) * bulk.ENTRY_SIZE - 1] ^= 0x01
    d = root / "entries1k"
    d.mkdir()
    (d / "entries.bin").write_bytes(values)
    size = bulk.ENTRY_SIZE
    mv = memoryview(values)
    raw = sum(pk.crc32c(mv[i * size : (i + 1) * size]) for i in range(n))
    ok = sum(1 for i in range(n) if i % bulk.CORRUPT_EVERY != 0)
    _props(d / "expected.properties", entries=n, entry_size=size, checksum_ok=ok, raw_crc_sum=raw)


def gen_metadata(root: Path, n: int) -> None:
    """bench/test_bench_codec.py's decode_metadata entries (its fixture's loop over its 64 batch templates)."""
    from pulsarkit import _native
    from pulsarkit.proto import MessageMetadata

    codec = _bench_module("test_bench_codec")
    templates = codec._templates(64)
    md = MessageMetadata()
    d = root / "metadata"
    d.mkdir()
    msum = messages = 0
    with open(d / "entries.bin", "wb") as f:
        for i in range(n):
            t_md, payload = templates[i % len(templates)]
            md.ParseFromString(t_md)
            md.sequence_id = 10_000 + i * 20
            md.highest_sequence_id = md.sequence_id + md.num_messages_in_batch - 1
            md.publish_time = 1_700_000_000_000 + i
            raw_md = md.SerializeToString()
            e = _native.encode_metadata_and_payload(raw_md, payload, True)
            e = _native.add_broker_entry_metadata(e, 1_700_000_000_000 + i, 50_000 + i * 20)
            f.write(len(e).to_bytes(4, "big"))
            f.write(e)
            num = md.num_messages_in_batch if md.HasField("num_messages_in_batch") else 1
            msum += md.sequence_id + md.publish_time + num
            messages += num
    _props(d / "expected.properties", entries=n, metadata_sum=msum, messages=messages)


def gen_scan(root: Path, name: str, n: int, payload_size: int) -> None:
    """bench/test_bench_storage.py's entry logs (1 KiB Pulsar entries, 50 000 per ledger, 64 MiB logs), or the
    same with another entry size."""
    import pulsarkit as pk
    from pulsarkit.bookkeeper import EntryLogWriter, pack_entry

    d = root / name
    (d / "current").mkdir(parents=True)  # BookKeeper's layout: the ledger directory's current/
    md = pk.message_metadata("p", 0, 1_700_000_000_000)
    pulsar_entry = pk.encode_entry(md, b"x" * (payload_size - 40))
    with EntryLogWriter(d / "current", log_size_limit=64 << 20) as w:
        length = 0
        for i in range(n):
            lid, eid = 10 + i // 50_000, i % 50_000
            length = length + len(pulsar_entry) if eid else len(pulsar_entry)
            w.append(lid, pack_entry(lid, eid, pulsar_entry, last_add_confirmed=eid - 1, length=length))
        w.flush()
    nbytes = sum(p.stat().st_size for p in (d / "current").glob("*.log"))
    _props(d / "expected.properties", entries=n, bytes=nbytes, payload_size=payload_size)


def gen_gc(root: Path, n: int) -> None:
    """bench/test_bench_gc.py's log: 8 ledgers of 16 KiB entries, ledgers 1-4 live. The Java side compacts it in
    gc/current/, pulsarkit in gc-pk/ (a hard link of the same file: one copy in the page cache)."""
    from pulsarkit.bookkeeper import EntryLogWriter, pack_entry

    d = root / "gc"
    (d / "current").mkdir(parents=True)
    payload = b"x" * (16 << 10)
    with EntryLogWriter(d / "current", log_size_limit=1 << 30) as w:
        for i in range(n):
            lid, eid = 1 + i % 8, i // 8
            w.append(lid, pack_entry(lid, eid, payload, last_add_confirmed=eid - 1, length=(eid + 1) * len(payload)))
        w.flush()
    (log,) = (d / "current").glob("*.log")
    live = (1, 2, 3, 4)
    live_entries = sum(1 for i in range(n) if 1 + i % 8 in live)
    _props(
        d / "expected.properties",
        src_log_id=int(log.stem, 16),
        live_ledgers=",".join(map(str, live)),
        live_entries=live_entries,
    )
    (root / "gc-pk").mkdir()
    os.link(log, root / "gc-pk" / log.name)


def warm(root: Path) -> None:
    """Every input into the page cache."""
    buf = bytearray(1 << 20)
    for p in sorted(root.rglob("*")):
        if p.is_file():
            with open(p, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass


# --- Java ---------------------------------------------------------------------------------------------------


def java_available() -> str | None:
    """None when java and mvn are there, else what is missing."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    return ", ".join(missing) + " not found" if missing else None


def build_java(force: bool = False) -> None:
    sources = [JAVA_PROJECT / "pom.xml", *JAVA_PROJECT.rglob("*.java")]
    stamp = BUILD / "classpath.txt"
    if not force and stamp.exists() and (BUILD / "classes" / "META-INF" / "BenchmarkList").exists():
        if stamp.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
            return
    base = ["mvn", "-q", "-f", str(JAVA_PROJECT / "pom.xml"), "package"]
    offline = subprocess.run([*base[:2], "-o", *base[2:]], capture_output=True, text=True)
    if offline.returncode != 0:
        print(
            "offline Maven build failed, building online:",
            offline.stdout[-400:],
            offline.stderr[-400:],
            file=sys.stderr,
        )
        subprocess.run(base, check=True)


def _java_cp() -> str:
    return f"{BUILD / 'classes'}:{(BUILD / 'classpath.txt').read_text().strip()}"


def java_info() -> dict:
    out = subprocess.run(
        ["java", *JVM_FLAGS, "-cp", _java_cp(), "io.pulsarkit.bench.Info"], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


_UNITS = {"ns/op": 1e-9, "us/op": 1e-6, "ms/op": 1e-3, "s/op": 1.0}


def run_jmh(data: Path, out_json: Path, quick: bool, forks: int, include: str) -> dict[tuple, list[float]]:
    """Runs the JMH benchmarks matching `include`; returns {(benchmark, params...): [seconds per op, ...]}."""
    cmd = [
        "java",
        *JVM_FLAGS,
        "-cp",
        _java_cp(),
        "org.openjdk.jmh.Main",
        include,
        "-p",
        f"data={data}",
        "-rf",
        "json",
        "-rff",
        str(out_json),
        "-foe",
        "true",
    ]
    if quick:
        # One iteration of each benchmark in this JVM: checks that everything runs and agrees, measures nothing.
        cmd += ["-f", "0", "-wi", "0", "-i", "1", "-r", "100ms", "-bm", "ss"]
    else:
        cmd += ["-f", str(forks), "-jvmArgsAppend", " ".join(JVM_FLAGS)]
    shown = [c if not c.startswith(str(BUILD)) else "<target/java/bench classpath>" for c in cmd]
    print("+", " ".join(shown), file=sys.stderr, flush=True)
    log = out_json.with_suffix(".log")
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        sys.stderr.write(log.read_text()[-4000:])
        raise SystemExit(f"JMH failed (exit {rc}); log: {log}")
    results = {}
    for r in json.loads(out_json.read_text()):
        name = r["benchmark"].rsplit(".", 2)
        key = (f"{name[-2]}.{name[-1]}", *(v for k, v in sorted(r.get("params", {}).items()) if k != "data"))
        scale = _UNITS[r["primaryMetric"]["scoreUnit"]]
        results[key] = [x * scale for fork in r["primaryMetric"]["rawData"] for x in fork]
    return results


# --- pulsarkit ----------------------------------------------------------------------------------------------


def timed(fn, reps: int, warmup: int = 1, min_time: float = 0.0) -> list[float]:
    """Seconds per call, `reps` times (calls repeated within a repetition until it lasts `min_time`)."""
    for _ in range(warmup):
        fn()
    inner = 1
    if min_time:
        t = time.perf_counter()
        fn()
        one = max(time.perf_counter() - t, 1e-9)
        inner = max(1, int(min_time / one))
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        out.append((time.perf_counter() - t) / inner)
    return out


def _fixed_binary(values, n: int, size: int):
    import pyarrow as pa

    offsets = array.array("i", range(0, (n + 1) * size, size))
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(values)])


def _props_of(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def read_chunks(files: list[Path]) -> int:
    """The ceiling for file scans: the same files read in 1 MiB chunks into one buffer."""
    buf = bytearray(1 << 20)
    total = 0
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
    return total


def run_pulsarkit(root: Path, reps: int, quick: bool) -> dict[str, list[float]]:
    import pulsarkit as pk
    import pyarrow as pa
    import pyarrow.compute as pc
    from pulsarkit import _native

    res: dict[str, list[float]] = {}
    small = 0.0 if quick else 0.05

    for n in CRC_SIZES:
        data = (root / "crc" / f"{n}.bin").read_bytes()
        assert pk.crc32c(data) == int(_props_of(root / "crc" / f"{n}.properties")["crc32c"])
        res[f"crc:{n}"] = timed(lambda: pk.crc32c(data), reps, min_time=small)

    e = _props_of(root / "entries1k" / "expected.properties")
    n, size = int(e["entries"]), int(e["entry_size"])
    values = (root / "entries1k" / "entries.bin").read_bytes()
    arr = _fixed_binary(values, n, size)
    got = pk.bulk.verify_checksums(arr).column("checksum_ok").true_count
    assert got == int(e["checksum_ok"]), (got, e)
    res["entries:verify"] = timed(functools.partial(pk.bulk.verify_checksums, arr), reps)
    del arr, values

    m = _props_of(root / "metadata" / "expected.properties")
    raw = (root / "metadata" / "entries.bin").read_bytes()
    entries, pos = [], 0
    while pos < len(raw):
        ln = int.from_bytes(raw[pos : pos + 4], "big")
        entries.append(raw[pos + 4 : pos + 4 + ln])
        pos += 4 + ln
    marr = pa.array(entries, pa.binary())  # as bench/test_bench_codec.py builds it
    del raw, entries
    dec = pk.bulk.decode_metadata(marr)
    assert dec.column("error").null_count == len(marr)
    msum = sum(pc.sum(dec.column(c)).as_py() for c in ("sequence_id", "publish_time", "num_messages"))
    assert msum == int(m["metadata_sum"]), (msum, m)
    res["metadata:decode"] = timed(functools.partial(pk.bulk.decode_metadata, marr), reps)
    ex = pk.bulk.explode_messages(marr)
    assert ex.num_rows == int(m["messages"]) and ex.column("error").null_count == ex.num_rows
    del ex
    res["metadata:explode"] = timed(functools.partial(pk.bulk.explode_messages, marr), reps)
    del marr

    for name in ("scan-1k", "scan-16k"):
        d = root / name
        s = _props_of(d / "expected.properties")
        files = sorted((d / "current").glob("*.log"))
        assert read_chunks(files) == int(s["bytes"])
        res[f"{name}:read"] = timed(lambda: read_chunks(files), reps)
        for digest in ("DUMMY", "CRC32C"):
            for mode in ("binary_view", "binary"):

                def scan(digest=digest, mode=mode):
                    rows = ok = 0
                    for b in pk.bookkeeper.scan_entry_logs([d / "current"], digest, payload_type=mode):
                        rows += b.num_rows
                        ok += b.column("digest_ok").true_count
                    return rows, ok

                rows, ok = scan()
                assert rows == int(s["entries"]) and ok == (rows if digest == "CRC32C" else 0), (name, digest, rows, ok)
                res[f"{name}:{digest}:{mode}"] = timed(scan, reps)

    g = _props_of(root / "gc" / "expected.properties")
    src = int(g["src_log_id"])
    live = {int(x): ("CRC32C", b"") for x in g["live_ledgers"].split(",")}
    gdir = root / "gc-pk"
    counter = iter(range(1000, 10**6))

    def compact():
        out = _native.compact_entry_log(str(gdir), src, next(counter), live, True)
        os.remove(out["compacted_path"])
        return out

    out = compact()
    live_bytes = out["bytes"]
    res["gc:compact"] = timed(compact, reps)
    gc_bench = _bench_module("test_bench_gc")  # its ceiling: read, write and fsync the live bytes
    res["gc:copy"] = timed(lambda: gc_bench.plain_copy(gdir, src, live_bytes, 0), reps)
    res["gc:live_bytes"] = [float(live_bytes)]
    return res


# --- the table ----------------------------------------------------------------------------------------------


def _t(s: float) -> str:
    for unit, f in (("s", 1.0), ("ms", 1e3), ("µs", 1e6)):
        if s * f >= 1:
            return f"{s * f:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def _rate(nbytes: float, items: int, s: float) -> str:
    if items > 1:
        return f"{_t(s / items)}/entry"
    return f"{nbytes / s / 1e9:.1f} GB/s"


def build_rows(java: list[dict], pk: list[dict], root: Path) -> list[dict]:
    """`java` and `pk` hold one dict per round: {key: [seconds per repetition]}. A figure is the median over
    rounds of each round's median; the speed-up's range is over rounds (Java and pulsarkit of the same round)."""
    med = statistics.median

    def fig(rounds, key):
        per_round = [med(r[key]) for r in rounds if key in r]
        return (med(per_round), per_round) if per_round else (None, [])

    rows = []

    def row(case, java_label, jkey, pk_label, pkey, nbytes, items=1, ceiling=None, ceiling_label=""):
        j, j_rounds = fig(java, jkey)
        p, p_rounds = fig(pk, pkey)
        if j is None or p is None:
            return
        ratios = [a / b for a, b in zip(j_rounds, p_rounds)]
        rows.append(
            {
                "case": case,
                "java": java_label,
                "pulsarkit": pk_label,
                "java_s": j,
                "pulsarkit_s": p,
                "java_round_medians": j_rounds,
                "pulsarkit_round_medians": p_rounds,
                "speedup": j / p,
                "speedup_range": [min(ratios), max(ratios)],
                "nbytes": nbytes,
                "items": items,
                "ceiling_s": ceiling,
                "ceiling": ceiling_label,
            }
        )

    def plain_pass(inp):
        """The fastest plain pass over the same bytes the JVM measured: a sum of 64-bit words or an arraycopy."""
        got = [fig(java, (f"MemoryBench.{m}", inp))[0] for m in ("sumWords", "copyWords")]
        got = [g for g in got if g]
        return min(got) if got else None

    mem_label = "fastest plain pass over the same bytes (Java: sum of 64-bit words or System.arraycopy)"
    for n in CRC_SIZES:
        label = {1024: "1 KiB", 65536: "64 KiB", 1 << 20: "1 MiB"}[n]
        for jm, jl in (
            ("jdkHeap", "java.util.zip.CRC32C, byte[]"),
            ("jdkDirect", "java.util.zip.CRC32C, direct ByteBuffer"),
            ("circeDirect", "circe-checksum Crc32cIntChecksum, direct ByteBuf"),
        ):
            row(
                f"CRC32C {label}",
                jl,
                (f"Crc32cBench.{jm}", str(n)),
                "pulsarkit.crc32c(bytes), one Python call",
                f"crc:{n}",
                n,
                ceiling=plain_pass(f"crc/{n}.bin"),
                ceiling_label=mem_label,
            )

    e = _props_of(root / "entries1k" / "expected.properties")
    n, size = int(e["entries"]), int(e["entry_size"])
    for jm, jl in (
        ("pulsarVerify", "Pulsar's check: skipBrokerEntryMetadataIfExist, readChecksum, Crc32cIntChecksum"),
        ("jdkVerify", "the same check with java.util.zip.CRC32C"),
        ("circeRaw", "bare Crc32cIntChecksum of each 1 KiB, no parsing"),
        ("jdkRaw", "bare java.util.zip.CRC32C of each 1 KiB, no parsing"),
    ):
        row(
            f"CRC32C per entry, {n} x 1 KiB stored entries",
            jl,
            (f"EntriesCrc32cBench.{jm}",),
            "pulsarkit.bulk.verify_checksums(arr)",
            "entries:verify",
            n * size,
            n,
            ceiling=plain_pass("entries1k/entries.bin"),
            ceiling_label=mem_label,
        )

    m = _props_of(root / "metadata" / "expected.properties")
    mn = int(m["entries"])
    mbytes = (root / "metadata" / "entries.bin").stat().st_size - 4 * mn
    row(
        f"metadata decode, {mn} batch entries",
        "Commands.parseBrokerEntryMetadataIfExist + parseMessageMetadata (LightProto), 8 fields read",
        ("MetadataBench.parseMetadata",),
        "pulsarkit.bulk.decode_metadata(arr)",
        "metadata:decode",
        mbytes,
        mn,
        ceiling=None,
        ceiling_label="n/a: only each entry's head is read",
    )
    row(
        f"explode {int(m['messages'])} messages of {mn} batch entries",
        "checksum, parseMessageMetadata, codec.decode, deSerializeSingleMessageInBatch per message",
        ("MetadataBench.explode",),
        "pulsarkit.bulk.explode_messages(arr)",
        "metadata:explode",
        mbytes,
        mn,
        ceiling=plain_pass("metadata/entries.bin"),
        ceiling_label=mem_label + " (compressed bytes)",
    )

    for name in ("scan-1k", "scan-16k"):
        s = _props_of(root / name / "expected.properties")
        sn, nbytes = int(s["entries"]), int(s["bytes"])
        reads = [fig(pk, f"{name}:read")[0]] + [
            fig(java, ("ScanBench.plainRead", name, rb))[0] for rb in ("512", "1048576")
        ]
        ceiling = min(r for r in reads if r)
        size_label = f"{int(s['payload_size']) >> 10} KiB"
        for digest, jm, jl in (
            ("DUMMY", "scanNoVerify", "DefaultEntryLogger.scanEntryLog, entry id read"),
            ("CRC32C", "scanVerifyCrc32c", "scanEntryLog + DigestManager.verifyDigestAndReturnData (CRC32C)"),
        ):
            what = "verified" if digest == "CRC32C" else "no digest check"
            for rb, rl in (("512", "readBufferSizeBytes=512 (default)"), ("1048576", "readBufferSizeBytes=1 MiB")):
                for mode in ("binary_view", "binary"):
                    row(
                        f"scan {nbytes >> 20} MiB of entry logs, {sn} x {size_label} entries, {what}",
                        f"{jl}, {rl}",
                        (f"ScanBench.{jm}", name, rb),
                        f"scan_entry_logs(digest_type={digest!r}, payload_type={mode!r})",
                        f"{name}:{digest}:{mode}",
                        nbytes,
                        sn,
                        ceiling=ceiling,
                        ceiling_label="plain read of the files in 1 MiB chunks (faster of Python, Java)",
                    )

    g = _props_of(root / "gc" / "expected.properties")
    live_bytes = int(pk[0]["gc:live_bytes"][0])
    for jm, jl in (
        ("entrylog", "EntryLogCompactor (BookKeeper's default)"),
        ("transactional", "TransactionalEntryLogCompactor"),
    ):
        for rb, rl in (("512", "readBufferSizeBytes=512 (default)"), ("1048576", "readBufferSizeBytes=1 MiB")):
            row(
                f"compact one entry log, {int(g['live_entries'])} live 16 KiB entries ({live_bytes >> 20} MiB)",
                f"{jl}, {rl}",
                ("CompactionBench.compact", jm, rb),
                "compact_entry_log (CRC32C verified per entry, sealed, fsynced)",
                "gc:compact",
                live_bytes,
                1,
                ceiling=fig(pk, "gc:copy")[0],
                ceiling_label="read + write + fsync of the live bytes (Python)",
            )
    return rows


def render(rows: list[dict], info: dict, command: str, rounds: int) -> str:
    lines = [
        f"Java: {info.get('vm')} {info.get('java')}, BookKeeper {info.get('bookkeeper')}, pulsar-common "
        f"{info.get('pulsar_common')}, circe-checksum CRC32C via {info.get('circe_crc32c')}, JMH {info.get('jmh')}. "
        f"pulsarkit {info.get('pulsarkit')}, Python {platform.python_version()}, nproc {os.cpu_count()}, "
        f"load average at start {info.get('load')}.",
        f"Command: `{command}`. Each figure: median over {rounds} round(s) of each round's median; "
        "speed-up = Java time / pulsarkit time" + (" (range: the rounds' own ratios)." if rounds > 1 else "."),
        "",
        "| case | Java | Java (median) | pulsarkit | pulsarkit (median) | speed-up | ceiling (same bytes) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r["ceiling_s"]
        ceil = f"{_t(c)} ({_rate(r['nbytes'], r['items'], c)}): {r['ceiling']}" if c else r["ceiling"]
        lo, hi = r["speedup_range"]
        spread = f" ({lo:.2f}-{hi:.2f})" if rounds > 1 else ""
        lines.append(
            f"| {r['case']} | {r['java']} | {_t(r['java_s'])} ({_rate(r['nbytes'], r['items'], r['java_s'])}) "
            f"| {r['pulsarkit']} | {_t(r['pulsarkit_s'])} ({_rate(r['nbytes'], r['items'], r['pulsarkit_s'])}) "
            f"| **{r['speedup']:.2f}x**{spread} | {ceil} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny inputs, each Java benchmark run once (smoke test)")
    ap.add_argument(
        "--rounds", type=int, default=1, help="Java then pulsarkit, this many times on the same inputs (default 1)"
    )
    ap.add_argument("--reps", type=int, default=None, help="pulsarkit repetitions per case and round (default 7)")
    ap.add_argument("--forks", type=int, default=1, help="JMH forks per benchmark (default 1)")
    ap.add_argument("--include", default=".*", help="JMH benchmark regex (default: all)")
    ap.add_argument("--workdir", default=None, help="where to write the inputs (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the inputs")
    ap.add_argument("--json", default=None, help=f"write every figure here (default {OUT}/java_compare.json)")
    ap.add_argument("--markdown", default=None, help=f"write the table here (default {OUT}/java_compare.md)")
    args = ap.parse_args(argv)

    missing = java_available()
    if missing:
        print(f"java_compare: SKIPPED ({missing}): install a JDK 17+ and Maven to compare with the Java code")
        return 0
    reps = args.reps or (1 if args.quick else 7)
    sizes = QUICK if args.quick else FULL
    OUT.mkdir(parents=True, exist_ok=True)
    json_path = Path(args.json or OUT / ("java_compare_quick.json" if args.quick else "java_compare.json"))
    md_path = Path(args.markdown or OUT / ("java_compare_quick.md" if args.quick else "java_compare.md"))

    t0 = time.perf_counter()
    build_java()
    import pulsarkit

    info = java_info()
    info["pulsarkit"] = f"{pulsarkit.__version__} ({dict(pulsarkit.build_info).get('profile', '?')})"
    info["load"] = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"
    root = Path(tempfile.mkdtemp(prefix="pk-java-compare-", dir=args.workdir))
    java_rounds, pk_rounds = [], []
    try:
        print(f"java_compare: writing inputs to {root}", file=sys.stderr, flush=True)
        gen_crc(root)
        gen_entries1k(root, sizes["entries1k"])
        gen_metadata(root, sizes["metadata"])
        gen_scan(root, "scan-1k", sizes["scan-1k"], 1024)
        gen_scan(root, "scan-16k", sizes["scan-16k"], 16 << 10)
        gen_gc(root, sizes["gc"])
        print(f"java_compare: inputs ready ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        for k in range(args.rounds):
            warm(root)
            jmh_json = json_path.with_name(f"{json_path.stem}-jmh-{k}.json")
            java_rounds.append(run_jmh(root, jmh_json, args.quick, args.forks, args.include))
            print(
                f"java_compare: round {k + 1}/{args.rounds}: pulsarkit ({time.perf_counter() - t0:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
            warm(root)
            pk_rounds.append(run_pulsarkit(root, reps, args.quick))
        rows = build_rows(java_rounds, pk_rounds, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    command = "python bench/java_compare.py" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    table = render(rows, info, command, args.rounds)
    print(table)
    if args.quick:
        print("(--quick: tiny inputs, one un-warmed iteration each: the figures are not measurements)")
    md_path.write_text(table + "\n")
    json_path.write_text(
        json.dumps(
            {
                "info": info,
                "command": command,
                "rows": rows,
                "java": [{"|".join(k): v for k, v in r.items()} for r in java_rounds],
                "pulsarkit": pk_rounds,
            },
            indent=1,
        )
    )
    print(
        f"java_compare: {len(rows)} rows in {time.perf_counter() - t0:.0f} s; {md_path}, {json_path}", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
