"""A real cluster (issue 14): a Spark standalone master and two workers on this machine, each its own
process (:class:`pulsarkit.testing.spark_cluster.StandaloneCluster`), run the export and an analysis
unchanged, lose a worker in the middle of the export, and give what the local-mode run gives.

The tests' ``local[2]`` session runs an analysis over the ``pulsarkit`` data source (per topic: rows,
producers, keys, payload bytes, publish-time range and a fingerprint of every column of every row) and
the export with ``--engine spark``. Then a driver process (this file run as a script) does the same
against ``spark://127.0.0.1:<port>``: the analysis, then ``pulsarkit export DATA --to parquet OUT
--engine spark --master URL``, the CLI itself, configured only by the ``spark-defaults.conf`` the
cluster helper writes (loopback driver, executor memory, this Python). While the export runs (its
tasks write into ``OUT/_staging/<run>/task-N``: polled), worker 2 gets SIGKILL with its executor and
the executor's Python workers (its whole process group: a lost machine). Spark re-runs the lost task
on the surviving worker; the driver's event log shows it (executor removed, a task ended by
``ExecutorLostFailure``, the same task index succeeding on the other executor), and the export read
back is the local run's row for row, with the same marks and no file left over.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pulsarkit as pk
import pyarrow.dataset as ds
import pytest
from pulsarkit import export as px
from pulsarkit.spark import export as export_mod
from pulsarkit.testing.spark_cluster import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(400)]

TOPICS, ENTRIES, PER_ENTRY = 8, 1000, 20
#: about 11 MB of entries in tasks of 200 kB: 56 tasks, a few seconds on two one-core executors
PARTITION_BYTES = 200_000
#: task directories seen in the staging directory before the worker is killed
KILL_AFTER = 4
T0 = 1_700_000_000_000
KEY = ["topic", "ledger_id", "entry_id", "batch_index"]


def build(root: Path) -> int:
    """Eight topics of batched messages (LZ4, ZSTD, uncompressed; keys, properties), about three
    days of publish times each, in ledgers of 50 entries. Returns the number of messages."""
    store = pk.Store.open(root, sync=False)
    cfg = pk.ManagedLedgerConfig(max_entries_per_ledger=50, minimum_rollover_time_ms=0)
    n = 0
    for t in range(TOPICS):
        ml = store.managed_ledger(f"public/default/persistent/cluster-{t}", cfg)
        for e in range(ENTRIES):
            seq = e * PER_ENTRY
            md = pk.message_metadata(f"producer-{t}", seq, T0 + seq * 13_000, properties=[("entry", str(e))])
            msgs = [{"payload": b"%d-%d|" % (t, seq + i) * 20, "key": f"k{(seq + i) % 7}"} for i in range(PER_ENTRY)]
            ml.add_entry(pk.encode_batch(md, msgs, compression=("LZ4", "ZSTD", "NONE")[e % 3]), num_messages=PER_ENTRY)
            n += PER_ENTRY
        ml.flush()
    store.close()
    return n


def analysis(spark, data_dir: str) -> list[dict]:
    """Per topic: rows, producers, distinct keys, payload bytes, the publish-time range and the sum
    of a hash of every column of every row (any row that differs changes it)."""
    from pyspark.sql import functions as F

    df = spark.read.format("pulsarkit").option("min_partitions", "4").load(data_dir)
    cols = [F.array_sort(F.map_entries(c)) if c == "properties" else F.col(c) for c in df.columns]
    rows = (
        df.groupBy("topic")
        .agg(
            F.count("*").alias("rows"),
            F.countDistinct("producer_name").alias("producers"),
            F.countDistinct("key").alias("keys"),
            F.sum(F.length("payload")).alias("payload_bytes"),
            F.min("publish_time").alias("first_publish"),
            F.max("publish_time").alias("last_publish"),
            F.sum(F.xxhash64(*cols).cast("decimal(38,0)")).cast("string").alias("fingerprint"),
        )
        .orderBy("topic")
        .collect()
    )
    return [r.asDict() for r in rows]


def driver(master: str, data_dir: str, out: str, result: str) -> int:
    """The job on a cluster, as a user runs it: the session from the builder with the pulsarkit data
    sources registered (the README's way), the analysis, then the export CLI."""
    from pulsarkit import spark as pks
    from pulsarkit.cli import main
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master(master).appName("pulsarkit-cluster-test").getOrCreate()
    pks.register(spark)
    doc = {"analysis": analysis(spark, data_dir), "app_id": spark.sparkContext.applicationId}
    Path(result).write_text(json.dumps(doc))
    argv = ["export", data_dir, "--to", "parquet", out, "--engine", "spark", "--master", master]
    return main([*argv, "--json", "--no-progress", "--max-partition-bytes", str(PARTITION_BYTES)])


def _finish(proc, work: Path, timeout: float = 240) -> tuple[dict, dict]:
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = "timeout"
    err = (work / "driver.err").read_text(errors="replace")
    assert code == 0, f"the driver failed ({code}):\n{err[-5000:]}"
    summary = json.loads((work / "driver.out").read_text().strip().splitlines()[-1])
    return json.loads((work / "driver.json").read_text()), summary


def _exported(out: Path):
    table = ds.dataset(str(out), format="parquet", partitioning="hive").to_table()
    return table.sort_by([(k, "ascending") for k in KEY])


def _events(event_dir: Path, app_id: str) -> list[dict]:
    # rolled (Spark 4's default): eventlog_v2_<app>/events_1_<app>, events_2_<app>, ...; else one file <app>
    files = [p for p in event_dir.rglob("*") if p.name.startswith("events_") or p.name.split(".")[0] == app_id]
    files = sorted((p for p in files if app_id in p.name), key=lambda p: (len(p.name), p.name))
    assert files, f"no event log for {app_id} in {event_dir}"
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def test_export_and_analysis_on_a_cluster_that_loses_a_worker(tmp_path, spark):
    from conftest import require_tool  # not at the top: this file also runs as the driver script

    require_tool("java", "the cluster test runs a Spark standalone master and workers (JVMs)")
    t_start = time.monotonic()
    cluster = StandaloneCluster(workers=2, cores=1, memory="1g", directory=tmp_path / "cluster")
    events, out = tmp_path / "events", tmp_path / "out-cluster"
    events.mkdir()
    proc = None
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(cluster.start)  # the daemons boot while the local run goes
        try:
            data = tmp_path / "data"
            messages = build(data)

            # the local-mode run (the tests' local[2] session): what the cluster must give
            local_analysis = analysis(spark, str(data))
            local_summary = export_mod.export(
                str(data), "parquet", str(tmp_path / "out-local"), engine="spark", spark=spark,
                max_partition_bytes=PARTITION_BYTES, log=lambda m: None,
            )  # fmt: skip
            assert local_summary.rows == messages == sum(r["rows"] for r in local_analysis)
            t_local = time.monotonic()

            starting.result()
            t_cluster = time.monotonic()
            conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri()}
            env = cluster.driver_env({**conf, "spark.eventLog.compress": "false"})
            with open(tmp_path / "driver.out", "wb") as stdout, open(tmp_path / "driver.err", "wb") as stderr:
                args = [cluster.master_url, str(data), str(out), str(tmp_path / "driver.json")]
                proc = subprocess.Popen([sys.executable, __file__, *args], stdout=stdout, stderr=stderr, env=env)
            staged: list[Path] = []
            deadline = time.monotonic() + 240
            while proc.poll() is None and time.monotonic() < deadline:
                staged = sorted(out.glob("_staging/*/task-*"))
                if len(staged) >= KILL_AFTER:
                    break
                time.sleep(0.05)
            assert len(staged) >= KILL_AFTER and proc.poll() is None, (
                f"the export did not get going on the cluster:\n{(tmp_path / 'driver.err').read_text()[-5000:]}"
            )
            victim = cluster.kill_worker(2)
            t_kill = time.monotonic()
            doc, summary = _finish(proc, tmp_path)
            state = cluster.state()
            alive = [w["id"] for w in state["workers"] if w["state"] == "ALIVE"]
            assert alive == [cluster.workers[0].worker_id], state["workers"]
            t_done = time.monotonic()
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
            starting.exception()  # start() has returned (a failed start stops what it started)
            cluster.stop()

    # the analysis and the export equal the local run's
    assert doc["analysis"] == local_analysis
    assert summary["rows"] == local_summary.rows == messages
    assert summary["topics"] == local_summary.to_json()["topics"]
    got, want = _exported(out), _exported(tmp_path / "out-local")
    assert got.num_rows == want.num_rows == messages
    assert got.equals(want)
    marks = json.loads((out / px.MARKS_FILE).read_text())
    local_marks = json.loads((tmp_path / "out-local" / px.MARKS_FILE).read_text())
    assert marks["marks"] == local_marks["marks"]
    assert sorted(marks["files"]) == px.data_files(out)  # nothing of the killed attempt left
    assert not (out / "_staging").exists()

    # how Spark got there: the killed worker's executor removed, its running task lost and re-run on
    # the surviving executor, the export job (the last job) succeeded
    ev = _events(events, doc["app_id"])
    added = {e["Executor ID"]: e["Executor Info"] for e in ev if e["Event"] == "SparkListenerExecutorAdded"}
    victim_port = victim.webui.rsplit(":", 1)[1]
    lost_exec = [x for x, info in added.items() if f":{victim_port}/" in json.dumps(info.get("Log Urls", {}))]
    assert len(added) == 2 and len(lost_exec) == 1, added
    removed = [e for e in ev if e["Event"] == "SparkListenerExecutorRemoved"]
    assert [e["Executor ID"] for e in removed][:1] == lost_exec, removed
    jobs = [e for e in ev if e["Event"] == "SparkListenerJobStart"]
    export_stage = jobs[-1]["Stage IDs"][-1]
    ends = [e for e in ev if e["Event"] == "SparkListenerTaskEnd" and e["Stage ID"] == export_stage]
    lost = [e for e in ends if e["Task End Reason"]["Reason"] == "ExecutorLostFailure"]
    reasons = [e["Task End Reason"] for e in ends]
    assert lost and {e["Task Info"]["Executor ID"] for e in lost} == set(lost_exec), reasons
    ok = {e["Task Info"]["Index"]: e["Task Info"] for e in ends if e["Task End Reason"]["Reason"] == "Success"}
    assert sorted(ok) == list(range(jobs[-1]["Stage Infos"][-1]["Number of Tasks"]))
    for e in lost:
        again = ok[e["Task Info"]["Index"]]
        assert again["Executor ID"] not in lost_exec and again["Attempt"] > e["Task Info"]["Attempt"]
    (job_end,) = [e for e in ev if e["Event"] == "SparkListenerJobEnd" and e["Job ID"] == jobs[-1]["Job ID"]]
    assert job_end["Job Result"]["Result"] == "JobSucceeded"
    print(
        f"\n{messages} messages, {len(ends)} export task ends, lost {[e['Task Info']['Index'] for e in lost]} "
        f"with executor {lost_exec[0]}; staged {len(staged)} task dirs before the kill; seconds: "
        f"local run {t_local - t_start:.1f}, cluster up {t_cluster - t_start:.1f} (in parallel), "
        f"cluster run {t_done - t_cluster:.1f} (kill at {t_kill - t_cluster:.1f})"
    )


if __name__ == "__main__":
    sys.exit(driver(*sys.argv[1:5]))
