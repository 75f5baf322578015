"""pulsarkit against the Java implementations it replaces, on the same input files, in one run.

    python bench/java_compare.py                 # full sizes (~10-12 min on 2 cores), table on stdout
    python bench/java_compare.py --quick         # tiny inputs, each Java benchmark once (smoke test, < 60 s)
    python bench/java_compare.py --only txn,rebatch --rounds 3   # some comparisons only

Steps: (1) build the JMH harnesses (``mvn -q -o package``, online only if the offline build fails): bench/java
(CRC32C, BookKeeper 4.17.3's scanner and compactors, pulsar-common 4.1.1's parsing) and bench/java/broker (Pulsar
4.0.7's TxnLogBufferedWriter and RawBatchConverter); (2) write the inputs into a temporary directory: the same data
the pytest benchmarks use (bench/test_bench_codec.py's CRC32C buffers and decode_metadata entries,
bench/test_bench_bulk.py's 1 KiB entries, bench/test_bench_storage.py's entry logs, plus the same logs with 16 KiB
entries, bench/test_bench_gc.py's log to compact, bench/test_bench_txn.py's transaction records,
bench/test_bench_compaction.py's keyed batches in each codec); (3) run the JMH harnesses on them (each benchmark
checks its results against the expected values the driver wrote, e.g. pulsarkit's CRC32C, or pulsarkit's batched
transaction entries byte for byte); (4) time the matching pulsarkit calls on the same files; (5) print one row per
comparison: Java, pulsarkit, the speed-up (Java time / pulsarkit time, medians of both) and the physical ceiling
for those bytes.

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JAVA_PROJECT = REPO / "bench" / "java"
BUILD = REPO / "target" / "java" / "bench"
# Pulsar 4.0.7's broker code (a project of its own: its pulsar-common and BookKeeper differ from bench/java's).
BROKER_PROJECT = JAVA_PROJECT / "broker"
BROKER_BUILD = REPO / "target" / "java" / "bench-broker"
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

FULL = {
    "entries1k": 1_000_000,
    "metadata": 100_000,
    "scan-1k": 200_000,
    "scan-16k": 12_800,
    "gc": 16_000,
    "txn": 20_000,
    "rebatch": 2_000,
}
QUICK = {
    "entries1k": 20_000,
    "metadata": 2_000,
    "scan-1k": 2_000,
    "scan-16k": 200,
    "gc": 200,
    "txn": 1_000,
    "rebatch": 20,
}
CRC_SIZES = (1024, 65536, 1 << 20)

# The comparisons (--only), with the JMH benchmarks of each: bench/java's, then bench/java/broker's.
GROUPS = {
    "crc": ("Crc32cBench", "MemoryBench"),
    "entries": ("EntriesCrc32cBench", "MemoryBench"),
    "metadata": ("MetadataBench", "MemoryBench"),
    "scan": ("ScanBench",),
    "gc": ("CompactionBench",),
    "txn": ("TxnSerializeBench", "TxnWriterBench"),
    "rebatch": ("RebatchBench",),
}
BROKER_GROUPS = ("txn", "rebatch")
# MemoryBench's inputs, by the comparison they are the ceiling of.
MEMORY_INPUTS = {
    "crc": ("crc/1024.bin", "crc/65536.bin", "crc/1048576.bin"),
    "entries": ("entries1k/entries.bin",),
    "metadata": ("metadata/entries.bin",),
}
# Transaction-log batching at the broker's defaults (transactionLogBatchedWrite*: 512 records, 4 MiB, 1 ms).
TXN_MAX_RECORDS, TXN_MAX_SIZE, TXN_MAX_DELAY_MS = 512, 4 << 20, 1
REBATCH_CODECS = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")
REBATCH_KEEP = 10  # batch indexes kept per 100-message entry in phase two


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


def _records_file(path: Path, records) -> int:
    """[int32 big-endian length][bytes] records; returns the bytes of the records alone."""
    total = 0
    with open(path, "wb") as f:
        for r in records:
            f.write(len(r).to_bytes(4, "big"))
            f.write(r)
            total += len(r)
    return total


def txn_batches(records: list[bytes]) -> list[list[bytes]]:
    """The records as TxnLogBufferedWriter cuts them at the broker's defaults (no record nears 4 MiB): full batches
    of 512, then the rest, flushed by the max-delay timer."""
    return [records[i : i + TXN_MAX_RECORDS] for i in range(0, len(records), TXN_MAX_RECORDS)]


def gen_txn(root: Path, n: int) -> None:
    """bench/test_bench_txn.py's n transaction-coordinator records (NEW, ADD_PARTITION, ADD_SUBSCRIPTION, UPDATE in
    turn), and the batched entries pulsarkit packs from them, which Pulsar's writer must reproduce byte for byte."""
    from pulsarkit import _native

    recs = _bench_module("test_bench_txn").records(n)
    d = root / "txn"
    d.mkdir()
    _records_file(d / "records.bin", recs)
    entries = [_native.pack_batched_txn_entry(b) for b in txn_batches(recs)]
    nbytes = _records_file(d / "entries.bin", entries)
    _props(
        d / "expected.properties",
        records=n,
        entries=len(entries),
        bytes=nbytes,
        max_records=TXN_MAX_RECORDS,
        max_size=TXN_MAX_SIZE,
        max_delay_ms=TXN_MAX_DELAY_MS,
    )


def _java_string_hash(s: str) -> int:
    """java.lang.String.hashCode of a BMP string (an int32)."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def rebatch_batches(n: int) -> list[list[dict]]:
    """bench/test_bench_compaction.py's batches (its build(): 100 messages each, keys over n*100/20, 5% empty
    payloads), n of them: the same random stream, so its LZ4 entries are build()'s entries."""
    comp = _bench_module("test_bench_compaction")
    rng = random.Random(1)
    keys = n * comp.PER_BATCH // 20
    return [
        [
            {
                "payload": b"" if rng.random() < 0.05 else b"value-%08d" % rng.randrange(10**8),
                "key": f"key-{rng.randrange(keys)}",
            }
            for _ in range(comp.PER_BATCH)
        ]
        for _ in range(n)
    ]


def gen_rebatch(root: Path, n: int) -> None:
    """n keyed batches in each codec (rebatch/CODEC/entries.bin) and, for phase two, the batch indexes to keep of
    each entry (rebatch/kept.txt: 10 of its 100, seeded). Expected: phase one's message count and sums (payload
    sizes, batch indexes, Java hashCodes of the keys), and pulsarkit's rebatched entries decompressed
    (rebatched.bin), which Pulsar's must decompress to byte for byte."""
    import pulsarkit as pk
    from pulsarkit import _native

    comp = _bench_module("test_bench_compaction")
    batches = rebatch_batches(n)
    krng = random.Random(2)
    kept = [sorted(krng.sample(range(comp.PER_BATCH), REBATCH_KEEP)) for _ in range(n)]
    d = root / "rebatch"
    d.mkdir()
    (d / "kept.txt").write_text("".join(",".join(map(str, k)) + "\n" for k in kept))
    msgs = [m for b in batches for m in b]
    sums = {
        "messages": len(msgs),
        "payload_size_sum": sum(len(m["payload"]) for m in msgs),
        "batch_index_sum": n * sum(range(comp.PER_BATCH)),
        "key_hash_sum": sum(_java_string_hash(m["key"]) for m in msgs),
    }
    for codec in REBATCH_CODECS:
        cd = d / codec
        cd.mkdir()
        entries = [
            pk.encode_batch(pk.message_metadata("p", e, comp.T0 + e), items, compression=codec)
            for e, items in enumerate(batches)
        ]
        _records_file(cd / "entries.bin", entries)
        outputs = kept_messages = 0
        with open(cd / "rebatched.bin", "wb") as f:
            for e, (entry, keep) in enumerate(zip(entries, kept)):
                out = _native.rebatch_entry(entry, keep)
                # rebatchMessage's rule: a keyed message stays when kept and not empty.
                model = [(i, batches[e][i]["key"]) for i in keep if batches[e][i]["payload"]]
                if out is None:
                    assert not model, (codec, e, model)
                    f.write((-1).to_bytes(4, "big", signed=True))
                    continue
                parsed = pk.Entry.parse(out)
                assert [(m.batch_index, m.key) for m in parsed.messages()] == model, (codec, e)
                size = parsed.metadata.uncompressed_size
                batch = parsed.payload if codec == "NONE" else pk.decompress(codec, parsed.payload, size)
                f.write(len(model).to_bytes(4, "big"))
                f.write(len(batch).to_bytes(4, "big"))
                f.write(batch)
                outputs += 1
                kept_messages += len(model)
        _props(cd / "expected.properties", entries=n, outputs=outputs, kept_messages=kept_messages, **sums)


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


def build_java(project: Path = JAVA_PROJECT, build: Path = BUILD, force: bool = False) -> None:
    """`mvn package` of one harness, unless its build is newer than its sources."""
    # bench/java's sources are its src/ (the broker project below it is built on its own).
    sources = [project / "pom.xml", *(project / "src").rglob("*.java")]
    stamp = build / "classpath.txt"
    if not force and stamp.exists() and (build / "classes" / "META-INF" / "BenchmarkList").exists():
        if stamp.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
            return
    base = ["mvn", "-q", "-f", str(project / "pom.xml"), "package"]
    offline = subprocess.run([*base[:2], "-o", *base[2:]], capture_output=True, text=True)
    if offline.returncode != 0:
        print(
            "offline Maven build failed, building online:",
            offline.stdout[-400:],
            offline.stderr[-400:],
            file=sys.stderr,
        )
        subprocess.run(base, check=True)
    # Maven rewrites classpath.txt only when the classpath changes: mark the build as done for the check above.
    stamp.touch()


def _java_cp(build: Path = BUILD) -> str:
    return f"{build / 'classes'}:{(build / 'classpath.txt').read_text().strip()}"


def _java_json(build: Path, main_class: str) -> dict:
    out = subprocess.run(
        ["java", *JVM_FLAGS, "-cp", _java_cp(build), main_class], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def java_info(main: bool = True, broker: bool = False) -> dict:
    info = _java_json(BROKER_BUILD, "io.pulsarkit.bench.broker.BrokerInfo") if broker else {}
    if main:
        info.update(_java_json(BUILD, "io.pulsarkit.bench.Info"))
    return info


_UNITS = {"ns/op": 1e-9, "us/op": 1e-6, "ms/op": 1e-3, "s/op": 1.0}


def run_jmh(
    data: Path,
    out_json: Path,
    quick: bool,
    forks: int,
    include: str,
    build: Path = BUILD,
    params: dict[str, str] | None = None,
) -> dict[tuple, list[float]]:
    """Runs the JMH benchmarks of one harness matching `include` (with `params` overriding @Param lists); returns
    {(benchmark, params...): [seconds per op, ...]}."""
    cmd = [
        "java",
        *JVM_FLAGS,
        "-cp",
        _java_cp(build),
        "org.openjdk.jmh.Main",
        include,
        "-p",
        f"data={data}",
        *(a for k, v in (params or {}).items() for a in ("-p", f"{k}={v}")),
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
    shown = [c if not c.startswith(str(build)) else f"<{build.relative_to(REPO)} classpath>" for c in cmd]
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


def _read_records(path: Path) -> list[bytes]:
    """The records of a file of [int32 big-endian length][bytes] records."""
    raw = path.read_bytes()
    out, pos = [], 0
    while pos < len(raw):
        ln = int.from_bytes(raw[pos : pos + 4], "big")
        out.append(raw[pos + 4 : pos + 4 + ln])
        pos += 4 + ln
    return out


def read_chunks(files: list[Path]) -> int:
    """The ceiling for file scans: the same files read in 1 MiB chunks into one buffer."""
    buf = bytearray(1 << 20)
    total = 0
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
    return total


class _DirectExecutor:
    """Runs each task at once on the caller's thread: Java's side gets `Runnable::run`."""

    def submit(self, fn, /, *args):
        fn(*args)


class _StubTimer:
    """The writer's timer: keeps the last callback scheduled; `fire()` runs it as the timer would after 1 ms."""

    fn = None

    def new_timeout(self, fn, delay_ms: int):
        self.fn = fn
        return self

    def cancel(self) -> bool:
        return True

    def fire(self) -> None:
        self.fn()


class _StubLedger:
    """A managed ledger that only counts (and, for the check, keeps) what it is given, as Java's stand-in does."""

    def __init__(self, keep: bool = False) -> None:
        self.entries: list[bytes] | None = [] if keep else None
        self.bytes = 0
        self._next = 0

    def add_entry(self, data: bytes, num_messages: int = 1):
        from pulsarkit.managed_ledger.position import Position

        self.bytes += len(data)
        if self.entries is not None:
            self.entries.append(data)
        self._next += 1
        return Position(1, self._next - 1)


def txn_write(records: list[bytes], executor, ledger: _StubLedger) -> int:
    """pulsarkit's TxnLogBufferedWriter as TxnWriterBench drives Pulsar's: a new writer, every record added, the
    max-delay timer fired once (it flushes the last, partial batch), every record's future awaited, closed."""
    from pulsarkit.broker.transaction import TxnLogBufferedWriter, TxnLogBufferedWriterConfig

    cfg = TxnLogBufferedWriterConfig(
        batch_enabled=True, max_records=TXN_MAX_RECORDS, max_size=TXN_MAX_SIZE, max_delay_ms=TXN_MAX_DELAY_MS
    )
    timer = _StubTimer()
    w = TxnLogBufferedWriter(ledger, cfg, executor=executor, timer=timer)
    futures = [w.async_add_data(r) for r in records]
    timer.fire()
    for f in futures:
        f.result()
    w.close().result()
    return ledger.bytes


def txn_write_many(records: list[bytes], executor, ledger: _StubLedger) -> int:
    """The same writes as txn_write, the records handed over in one ``async_add_many`` call (one future)."""
    from pulsarkit.broker.transaction import TxnLogBufferedWriter, TxnLogBufferedWriterConfig

    cfg = TxnLogBufferedWriterConfig(
        batch_enabled=True, max_records=TXN_MAX_RECORDS, max_size=TXN_MAX_SIZE, max_delay_ms=TXN_MAX_DELAY_MS
    )
    timer = _StubTimer()
    w = TxnLogBufferedWriter(ledger, cfg, executor=executor, timer=timer)
    f = w.async_add_many(records)
    timer.fire()
    assert len(f.result()) == len(records)
    w.close().result()
    return ledger.bytes


def run_pulsarkit(root: Path, reps: int, quick: bool, groups: set[str]) -> dict[str, list[float]]:
    import pulsarkit as pk
    import pyarrow as pa
    import pyarrow.compute as pc
    from pulsarkit import _native

    res: dict[str, list[float]] = {}
    small = 0.0 if quick else 0.05

    if "crc" in groups:
        for n in CRC_SIZES:
            data = (root / "crc" / f"{n}.bin").read_bytes()
            assert pk.crc32c(data) == int(_props_of(root / "crc" / f"{n}.properties")["crc32c"])
            res[f"crc:{n}"] = timed(lambda: pk.crc32c(data), reps, min_time=small)

    if "entries" in groups:
        e = _props_of(root / "entries1k" / "expected.properties")
        n, size = int(e["entries"]), int(e["entry_size"])
        values = (root / "entries1k" / "entries.bin").read_bytes()
        arr = _fixed_binary(values, n, size)
        got = pk.bulk.verify_checksums(arr).column("checksum_ok").true_count
        assert got == int(e["checksum_ok"]), (got, e)
        res["entries:verify"] = timed(functools.partial(pk.bulk.verify_checksums, arr), reps)
        del arr, values

    if "metadata" in groups:
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

    if "scan" in groups:
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
                    want_ok = rows if digest == "CRC32C" else 0
                    assert rows == int(s["entries"]) and ok == want_ok, (name, digest, rows, ok)
                    res[f"{name}:{digest}:{mode}"] = timed(scan, reps)

    if "gc" in groups:
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

    if "txn" in groups:
        t = _props_of(root / "txn" / "expected.properties")
        records = _read_records(root / "txn" / "records.bin")
        expected = _read_records(root / "txn" / "entries.bin")
        assert len(records) == int(t["records"]) and len(expected) == int(t["entries"])
        batches = txn_batches(records)
        assert [_native.pack_batched_txn_entry(b) for b in batches] == expected
        res["txn:pack"] = timed(lambda: [_native.pack_batched_txn_entry(b) for b in batches], reps, min_time=small)
        thread = ThreadPoolExecutor(1, thread_name_prefix="bench-txn-writer")  # long-lived, as Java's
        try:
            for name, ex in (("direct", _DirectExecutor()), ("thread", thread)):
                check = _StubLedger(keep=True)
                assert txn_write(records, ex, check) == int(t["bytes"]) and check.entries == expected, name
                res[f"txn:writer:{name}"] = timed(
                    lambda ex=ex: txn_write(records, ex, _StubLedger()), reps, min_time=small
                )
                check = _StubLedger(keep=True)
                assert txn_write_many(records, ex, check) == int(t["bytes"]) and check.entries == expected, name
                res[f"txn:writer-many:{name}"] = timed(
                    lambda ex=ex: txn_write_many(records, ex, _StubLedger()), reps, min_time=small
                )
        finally:
            thread.shutdown()
        # The ceiling: one copy of the batched entries' bytes into a buffer made beforehand.
        flat = b"".join(expected)
        dst = bytearray(len(flat))
        res["txn:copy"] = timed(lambda: dst.__setitem__(slice(None), flat), reps, min_time=small)

    if "rebatch" in groups:
        d = root / "rebatch"
        kept = [[int(x) for x in line.split(",") if x] for line in (d / "kept.txt").read_text().splitlines()]
        kept_arr = pa.array(kept, pa.list_(pa.int32()))
        for codec in REBATCH_CODECS:
            x = _props_of(d / codec / "expected.properties")
            entries = _read_records(d / codec / "entries.bin")
            n = len(entries)
            assert n == int(x["entries"]), codec
            col = pa.array(entries, pa.binary())
            lids = pa.array([10] * n, pa.int64())
            eids = pa.array(range(n), pa.int64())
            keys = _native.bulk_compaction_keys(col)
            assert keys.column("error").null_count == keys.num_rows == int(x["messages"]), codec
            assert pc.sum(keys.column("payload_size")).as_py() == int(x["payload_size_sum"]), codec
            res[f"rebatch:{codec}:keys"] = timed(lambda col=col: _native.bulk_compaction_keys(col), reps)

            def loop(entries=entries):
                return [_native.rebatch_entry(e, k) for e, k in zip(entries, kept)]

            outs = loop()
            assert sum(o is not None for o in outs) == int(x["outputs"]), codec
            res[f"rebatch:{codec}:entry"] = timed(loop, reps)

            def bulk(col=col, lids=lids, eids=eids):
                return _native.bulk_compact_by_indexes(col, lids, eids, kept_arr)

            out = bulk()
            assert out.column("raw_message").null_count == n - int(x["outputs"]), codec
            assert out.column("error").null_count == n, codec
            res[f"rebatch:{codec}:bulk"] = timed(bulk, reps)
            # The ceiling: one copy of the entries' bytes (every byte has to be read at least once).
            flat = b"".join(entries)
            dst = bytearray(len(flat))
            res[f"rebatch:{codec}:copy"] = timed(lambda flat=flat, dst=dst: dst.__setitem__(slice(None), flat), reps)
            res[f"rebatch:{codec}:bytes"] = [float(len(flat))]
    return res


# --- the table ----------------------------------------------------------------------------------------------


def _t(s: float) -> str:
    for unit, f in (("s", 1.0), ("ms", 1e3), ("µs", 1e6)):
        if s * f >= 1:
            return f"{s * f:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def _rate(nbytes: float, items: int, s: float, unit: str = "entry") -> str:
    if items > 1:
        return f"{_t(s / items)}/{unit}"
    return f"{nbytes / s / 1e9:.1f} GB/s"


def build_rows(java: list[dict], pk: list[dict], root: Path, groups: set[str] | None = None) -> list[dict]:
    """`java` and `pk` hold one dict per round: {key: [seconds per repetition]}. A figure is the median over
    rounds of each round's median; the speed-up's range is over rounds (Java and pulsarkit of the same round).
    `groups`: the comparisons that ran (default all)."""
    groups = set(GROUPS) if groups is None else groups
    med = statistics.median

    def fig(rounds, key):
        per_round = [med(r[key]) for r in rounds if key in r]
        return (med(per_round), per_round) if per_round else (None, [])

    rows = []

    def row(case, java_label, jkey, pk_label, pkey, nbytes, items=1, ceiling=None, ceiling_label="", unit="entry"):
        j, j_rounds = fig(java, jkey)
        p, p_rounds = fig(pk, pkey)
        if j is None or p is None:
            return
        ratios = [a / b for a, b in zip(j_rounds, p_rounds)]
        # Each side's fastest repetition over all rounds: on a shared machine, the one least disturbed by others.
        j_best = min(x for r in java for x in r.get(jkey, ()))
        p_best = min(x for r in pk for x in r.get(pkey, ()))
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
                "java_best_s": j_best,
                "pulsarkit_best_s": p_best,
                "speedup_best": j_best / p_best,
                "nbytes": nbytes,
                "items": items,
                "unit": unit,
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

    if "entries" in groups:
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

    if "metadata" in groups:
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

    if "scan" in groups:
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

    if "gc" in groups:
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

    if "txn" in groups:
        t = _props_of(root / "txn" / "expected.properties")
        tn, tbytes, tentries = int(t["records"]), int(t["bytes"]), int(t["entries"])
        copy = fig(pk, "txn:copy")[0]
        copy_label = f"one copy of the {tentries} batched entries' bytes (Python, into a buffer made beforehand)"
        row(
            f"pack {tn} transaction records into {tentries} batched entries (512 per entry)",
            "TxnLogBufferedWriter.doFlush's packing: the coordinator's DataSerializer.serialize(ArrayList) "
            "(BatchedTransactionMetadataEntry of the TransactionMetadataEntry objects) + 4-byte prefix",
            ("TxnSerializeBench.pack",),
            "_native.pack_batched_txn_entry(list of serialized records), one call per entry",
            "txn:pack",
            tbytes,
            tn,
            ceiling=copy,
            ceiling_label=copy_label,
            unit="record",
        )
        for ex, jl, pl in (
            ("direct", "caller's thread (Runnable::run)", "caller's thread (a direct executor)"),
            ("thread", "one writer thread (single-thread executor)", "one writer thread (ThreadPoolExecutor(1))"),
        ):
            row(
                f"TxnLogBufferedWriter, {tn} records, batched 512 / 4 MiB / 1 ms, stand-in ledger, {ex} executor",
                f"Pulsar 4.0.7 TxnLogBufferedWriter, tasks on the {jl}; asyncAddData per record, timer flush, "
                "callbacks awaited",
                ("TxnWriterBench.write", ex),
                f"pulsarkit TxnLogBufferedWriter, tasks on the {pl}; async_add_data per record, timer flush, "
                "futures awaited",
                f"txn:writer:{ex}",
                tbytes,
                tn,
                ceiling=copy,
                ceiling_label=copy_label,
                unit="record",
            )
            row(
                f"TxnLogBufferedWriter, {tn} records in one call, batched 512 / 4 MiB / 1 ms, stand-in ledger, "
                f"{ex} executor",
                f"Pulsar 4.0.7 TxnLogBufferedWriter, tasks on the {jl}; asyncAddData per record, timer flush, "
                "callbacks awaited",
                ("TxnWriterBench.write", ex),
                f"pulsarkit TxnLogBufferedWriter, tasks on the {pl}; async_add_many of all records (one future), "
                "timer flush, future awaited",
                f"txn:writer-many:{ex}",
                tbytes,
                tn,
                ceiling=copy,
                ceiling_label=copy_label,
                unit="record",
            )

    if "rebatch" in groups:
        d = root / "rebatch"
        for codec in REBATCH_CODECS:
            x = _props_of(d / codec / "expected.properties")
            rn, msgs = int(x["entries"]), int(x["messages"])
            rbytes = int(pk[0][f"rebatch:{codec}:bytes"][0])
            copy = fig(pk, f"rebatch:{codec}:copy")[0]
            copy_label = f"one copy of the {rbytes >> 10} KiB of entries (Python)"
            row(
                f"compaction phase one, {rn} batch entries ({msgs} keyed messages), {codec}",
                "parseMessageMetadata + RawBatchConverter.extractIdsAndKeysAndSize(raw, metadata) per entry",
                ("RebatchBench.extractKeys", codec),
                "_native.bulk_compaction_keys(arr), one call",
                f"rebatch:{codec}:keys",
                rbytes,
                rn,
                ceiling=copy,
                ceiling_label=copy_label,
            )
            kept = f"{int(x['kept_messages'])} messages kept of {msgs}"
            for kind, pl in (
                ("entry", "_native.rebatch_entry(entry, keep) per entry (a Python loop)"),
                (
                    "bulk",
                    "_native.bulk_compact_by_indexes(arr, ledger_ids, entry_ids, kept), one call "
                    "(also frames each output as RawMessageImpl.serialize does)",
                ),
            ):
                row(
                    f"compaction phase two (rebatch), {rn} batch entries, {kept}, {codec}",
                    "parseMessageMetadata + RawBatchConverter.rebatchMessage(raw, metadata, filter, false) per entry",
                    ("RebatchBench.rebatch", codec),
                    pl,
                    f"rebatch:{codec}:{kind}",
                    rbytes,
                    rn,
                    ceiling=copy,
                    ceiling_label=copy_label,
                )
    return rows


def render(rows: list[dict], info: dict, command: str, rounds: int) -> str:
    java = [f"Java: {info.get('vm')} {info.get('java')}"]
    if "bookkeeper" in info:
        java.append(
            f"BookKeeper {info.get('bookkeeper')}, pulsar-common {info.get('pulsar_common')}, circe-checksum CRC32C "
            f"via {info.get('circe_crc32c')}"
        )
    if "pulsar_broker" in info:
        java.append(
            f"pulsar-broker {info.get('pulsar_broker')} and pulsar-transaction-coordinator "
            f"{info.get('txn_coordinator')} (codecs: {info.get('codecs')})"
        )
    lines = [
        ", ".join(java) + f", JMH {info.get('jmh')}. "
        f"pulsarkit {info.get('pulsarkit')}, Python {platform.python_version()}, nproc {os.cpu_count()}, "
        f"load average at start {info.get('load')}.",
        f"Command: `{command}`. Each figure: median over {rounds} round(s) of each round's median; "
        "speed-up = Java time / pulsarkit time"
        + (" (range: the rounds' own ratios)" if rounds > 1 else "")
        + "; best vs best: each side's fastest repetition of all rounds (the least disturbed on a shared machine).",
    ]
    if info.get("issue_26290"):
        lines.append(
            "apache/pulsar#26290 (RawBatchConverter.rebatchMessage on a RawMessageImpl, as 4.0.7's compactor hands "
            "entries over, can fail when the rebatched batch outgrows the compressed entry; RebatchBench then runs "
            "every entry of that codec with room in its buffer), entries it failed on: "
            + "; ".join(f"{codec}: {v}" for codec, v in info["issue_26290"].items())
            + "."
        )
    lines += [
        "",
        "| case | Java | Java (median) | pulsarkit | pulsarkit (median) | speed-up | ceiling (same bytes) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r["ceiling_s"]
        unit = r.get("unit", "entry")
        ceil = f"{_t(c)} ({_rate(r['nbytes'], r['items'], c, unit)}): {r['ceiling']}" if c else r["ceiling"]
        lo, hi = r["speedup_range"]
        spread = f" ({lo:.2f}-{hi:.2f})" if rounds > 1 else ""
        if "speedup_best" in r:
            spread += f"; best vs best {r['speedup_best']:.2f}x ({_t(r['java_best_s'])} / {_t(r['pulsarkit_best_s'])})"
        lines.append(
            f"| {r['case']} | {r['java']} | {_t(r['java_s'])} ({_rate(r['nbytes'], r['items'], r['java_s'], unit)}) "
            f"| {r['pulsarkit']} | {_t(r['pulsarkit_s'])} "
            f"({_rate(r['nbytes'], r['items'], r['pulsarkit_s'], unit)}) "
            f"| **{r['speedup']:.2f}x**{spread} | {ceil} |"
        )
    return "\n".join(lines)


def _issue_26290(root: Path) -> dict[str, str]:
    """What RebatchBench's setup found of apache/pulsar#26290, per codec (failures of the RawMessageImpl path)."""
    out = {}
    for codec in REBATCH_CODECS:
        notes = root / "rebatch" / codec / "java-notes.properties"
        if notes.exists():
            n = _props_of(notes)
            fails = {k.split(".", 1)[1]: int(v) for k, v in n.items() if k.startswith("plain_failures.")}
            out[codec] = (
                ", ".join(f"{v} of {n['entries']} entries ({k})" for k, v in fails.items()) if fails else "none"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny inputs, each Java benchmark run once (smoke test)")
    ap.add_argument(
        "--rounds", type=int, default=1, help="Java then pulsarkit, this many times on the same inputs (default 1)"
    )
    ap.add_argument("--reps", type=int, default=None, help="pulsarkit repetitions per case and round (default 7)")
    ap.add_argument("--forks", type=int, default=1, help="JMH forks per benchmark (default 1)")
    ap.add_argument(
        "--only",
        default=None,
        help=f"comma-separated comparisons to run, of {','.join(GROUPS)} (default: all)",
    )
    ap.add_argument("--include", default=None, help="JMH benchmark regex, instead of the one --only implies")
    ap.add_argument("--workdir", default=None, help="where to write the inputs (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the inputs")
    ap.add_argument("--json", default=None, help=f"write every figure here (default {OUT}/java_compare.json)")
    ap.add_argument("--markdown", default=None, help=f"write the table here (default {OUT}/java_compare.md)")
    args = ap.parse_args(argv)

    groups = set(GROUPS) if args.only is None else {g.strip() for g in args.only.split(",") if g.strip()}
    unknown = groups - set(GROUPS)
    if unknown or not groups:
        ap.error(f"--only takes some of {','.join(GROUPS)}, not {args.only!r}")
    missing = java_available()
    if missing:
        print(f"java_compare: SKIPPED ({missing}): install a JDK 17+ and Maven to compare with the Java code")
        return 0
    reps = args.reps or (1 if args.quick else 7)
    sizes = QUICK if args.quick else FULL
    OUT.mkdir(parents=True, exist_ok=True)
    json_path = Path(args.json or OUT / ("java_compare_quick.json" if args.quick else "java_compare.json"))
    md_path = Path(args.markdown or OUT / ("java_compare_quick.md" if args.quick else "java_compare.md"))
    # The JMH runs: each harness with the benchmarks of the comparisons asked for.
    harnesses = []
    for build, wanted in ((BUILD, groups - set(BROKER_GROUPS)), (BROKER_BUILD, groups & set(BROKER_GROUPS))):
        if not wanted:
            continue
        classes = sorted({c for g in wanted for c in GROUPS[g]})
        params = {}
        if "MemoryBench" in classes:
            params["input"] = ",".join(i for g in sorted(wanted) for i in MEMORY_INPUTS.get(g, ()))
        include = args.include or rf"\.({'|'.join(classes)})\."
        harnesses.append((build, include, params))

    t0 = time.perf_counter()
    main_harness = bool(groups - set(BROKER_GROUPS))
    broker_harness = bool(groups & set(BROKER_GROUPS))
    if main_harness:
        build_java()
    if broker_harness:
        build_java(BROKER_PROJECT, BROKER_BUILD)
    import pulsarkit

    info = java_info(main=main_harness, broker=broker_harness)
    info["pulsarkit"] = f"{pulsarkit.__version__} ({dict(pulsarkit.build_info).get('profile', '?')})"
    info["load"] = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"
    info["groups"] = sorted(groups)
    root = Path(tempfile.mkdtemp(prefix="pk-java-compare-", dir=args.workdir))
    java_rounds, pk_rounds = [], []
    try:
        print(f"java_compare: writing inputs to {root}", file=sys.stderr, flush=True)
        if "crc" in groups:
            gen_crc(root)
        if "entries" in groups:
            gen_entries1k(root, sizes["entries1k"])
        if "metadata" in groups:
            gen_metadata(root, sizes["metadata"])
        if "scan" in groups:
            gen_scan(root, "scan-1k", sizes["scan-1k"], 1024)
            gen_scan(root, "scan-16k", sizes["scan-16k"], 16 << 10)
        if "gc" in groups:
            gen_gc(root, sizes["gc"])
        if "txn" in groups:
            gen_txn(root, sizes["txn"])
        if "rebatch" in groups:
            gen_rebatch(root, sizes["rebatch"])
        print(f"java_compare: inputs ready ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        for k in range(args.rounds):
            warm(root)
            java: dict[tuple, list[float]] = {}
            for build, include, params in harnesses:
                name = "jmh" if build == BUILD else "jmh-broker"
                jmh_json = json_path.with_name(f"{json_path.stem}-{name}-{k}.json")
                java.update(run_jmh(root, jmh_json, args.quick, args.forks, include, build, params))
            java_rounds.append(java)
            print(
                f"java_compare: round {k + 1}/{args.rounds}: pulsarkit ({time.perf_counter() - t0:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
            warm(root)
            pk_rounds.append(run_pulsarkit(root, reps, args.quick, groups))
        if "rebatch" in groups:
            info["issue_26290"] = _issue_26290(root)
        rows = build_rows(java_rounds, pk_rounds, root, groups)
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
