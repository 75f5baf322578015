"""Smoke test of the Java comparison (bench/java_compare.py, bench/java, bench/java/broker): builds the JMH harnesses
and runs every Java benchmark once on tiny inputs, one JVM per harness, next to one call of each pulsarkit
counterpart. Each Java benchmark checks its own results against the values the driver expects (pulsarkit's CRC32C,
entry and message counts, relocated entries, batched transaction entries byte for byte, rebatched batches), so a
harness that measures the wrong thing fails here. Skipped without java and mvn, and when benchmarks are enabled
(scripts/bench.sh runs the full comparison as its own step). About 15-20 s once built.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_PATH = Path(__file__).with_name("java_compare.py")


def _driver():
    spec = importlib.util.spec_from_file_location("_pk_java_compare", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_java_harness_smoke(tmp_path, full_size):
    if full_size:
        pytest.skip("measured by scripts/bench.sh's Java step (bench/java_compare.py)")
    jc = _driver()
    missing = jc.java_available()
    if missing:
        pytest.skip(f"{missing}: the Java comparison needs a JDK and Maven")
    out = tmp_path / "out.json"
    assert (
        jc.main(["--quick", "--workdir", str(tmp_path), "--json", str(out), "--markdown", str(tmp_path / "t.md")]) == 0
    )
    doc = json.loads(out.read_text())
    (java,) = doc["java"]
    ran = {key.split("|")[0] for key in java}
    assert ran == {
        "Crc32cBench.jdkHeap",
        "Crc32cBench.jdkDirect",
        "Crc32cBench.circeDirect",
        "EntriesCrc32cBench.pulsarVerify",
        "EntriesCrc32cBench.jdkVerify",
        "EntriesCrc32cBench.circeRaw",
        "EntriesCrc32cBench.jdkRaw",
        "MemoryBench.sumWords",
        "MemoryBench.copyWords",
        "MetadataBench.parseMetadata",
        "MetadataBench.explode",
        "ScanBench.scanNoVerify",
        "ScanBench.scanVerifyCrc32c",
        "ScanBench.plainRead",
        "CompactionBench.compact",
        "TxnSerializeBench.pack",
        "TxnWriterBench.write",
        "RebatchBench.extractKeys",
        "RebatchBench.rebatch",
    }
    cases = {r["case"].split(",")[0] for r in doc["rows"]}
    assert {"CRC32C 1 KiB", "CRC32C 64 KiB", "CRC32C 1 MiB", "CRC32C per entry", "metadata decode"} <= cases
    assert any(c.startswith("explode") for c in cases) and any(c.startswith("compact one entry log") for c in cases)
    scans = {r["case"] for r in doc["rows"] if r["case"].startswith("scan ")}
    assert len(scans) == 4  # 1 KiB and 16 KiB entries, with and without the digest check
    txn = [r for r in doc["rows"] if "transaction records" in r["case"] or "TxnLogBufferedWriter" in r["case"]]
    # packing alone; the writer on the caller's thread and on a writer thread, a record per call and all in one
    assert len(txn) == 5
    assert sum("async_add_many" in r["pulsarkit"] for r in txn) == 2
    rebatch = {r["case"].rsplit(", ", 1)[1] for r in doc["rows"] if r["case"].startswith("compaction phase")}
    assert rebatch == {"NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"}
    assert all(r["java_s"] > 0 and r["pulsarkit_s"] > 0 for r in doc["rows"])


def test_only_rejects_unknown_comparisons():
    with pytest.raises(SystemExit) as e:
        _driver().main(["--only", "txn,nonsense"])
    assert e.value.code == 2
