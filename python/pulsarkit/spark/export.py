"""The export on Spark: :func:`pulsarkit.export.export` with its rows staged by Spark, and the engine
choice of ``pulsarkit export --engine auto|local|spark|spark-sql``.

``auto`` (the default) is ``spark`` when ``master`` names a cluster, a session is given, or the planned
input is over ``spark_threshold`` bytes (default 1 GiB: below it one process is faster, see
``bench/RESULTS.md``) and pyspark is installed, else ``local``; the summary says which ran. ``local``
plans and decodes in this process with the native kernels. ``spark`` runs the same decoding and
Parquet writing in Spark tasks (``master``, default ``local[2]``; the same rows, ``--decode schema``, ``--mode
upsert`` and batch cuts included): the driver plans, each task reads its partitions and writes its own
files, and no row passes through the JVM (the staging directory and the data directory must be visible to
the executors, as the data directory must be to any reader).
``spark-sql`` reads through the ``pulsarkit`` data source and writes with Spark's Parquet writer (the
rows become Spark rows: slower, but the DataFrame path any other Spark sink would take; it runs none of
``--decode schema``, ``--mode upsert`` or a batch cut, which the run refuses). Every engine
gives the same rows in the same layout, committed the same way by the same
:class:`~pulsarkit.export.Target` on the driver (Delta and Iceberg: it appends the staged files
through deltalake or pyiceberg)."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..export import Engine, ExportJob, ExportSummary, LocalEngine, ReadIssues, Reporter, StagingWriter, Target
from ..export import export as export_locally
from ..export.run import RowRules, log_to_stderr
from ..export.staging import DAY_MS, PARTITION_COLUMNS
from ..scan import DataDirSpec, ScanPartition
from ..scan.records import DataDirError
from .messages_source import read_stats, register
from .session import local_session

ENGINES = ("auto", "local", "spark", "spark-sql")
#: Above this many planned bytes ``--engine auto`` runs on Spark, on a machine of at least
#: :data:`SPARK_MIN_CORES` cores. Measured on 2 cores (bench/RESULTS.md, "Peak memory at 1 GB and 10 GB"):
#: Spark local[2] exported 1 GB at 0.65x and 10.8 GB over 12 topics at 0.83-1.01x of the local engine; its
#: tasks spend the local engine's CPU plus ~21-25 s of fixed JVM, driver and planning CPU, so it pays only with
#: more cores than the one process uses.
SPARK_THRESHOLD = 1 << 30
#: Fewer cores than this: ``--engine auto`` stays local without a ``--master`` (see above).
SPARK_MIN_CORES = 4


def choose_engine(
    engine: str, master: str | None, planned_bytes: int, threshold: int = SPARK_THRESHOLD, cores: int | None = None
) -> str:
    """``auto`` resolved: ``spark`` for a named master, or for an input over ``threshold`` on a machine of
    ``cores`` (default: this one's) of at least :data:`SPARK_MIN_CORES` (when pyspark imports), else
    ``local``; any other engine as given."""
    if engine != "auto":
        return engine
    cores = cores if cores is not None else (os.cpu_count() or 1)
    if master is None and (planned_bytes <= threshold or cores < SPARK_MIN_CORES):
        return "local"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        if master is not None:
            raise DataDirError("--master needs pyspark (pip install 'pulsarkit[spark]')") from None
        return "local"
    return "spark"


def _has_pyspark() -> bool:
    try:
        import pyspark.sql  # noqa: F401
    except ImportError:
        return False
    return True


def spark_session(master: str | None) -> Any:
    """A session for the export: ``local[n]`` (default ``local[2]``) through :func:`local_session`, or
    one on the cluster ``master`` names, the pulsarkit data sources registered."""
    if master is None or master.startswith("local"):
        # local[n] as named, else every core of the machine (at least two: a driver and a task)
        cores = master[len("local[") : -1] if master and master.startswith("local[") else max(2, os.cpu_count() or 1)
        return local_session(cores, "pulsarkit-export")
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master(master).appName("pulsarkit-export").getOrCreate()
    register(spark)
    return spark


class _TaskWriter:
    """A Spark task of the ``spark`` engine: the same rows as the local engine's (:class:`RowRules`: decoded with
    their topic's schema, cut at a batch, upsert's), made on an executor and written into the task's own directory
    under the staging directory (which the executors must see)."""

    def __init__(self, staging: str) -> None:
        self.staging = staging

    def __call__(self, items: Iterator[tuple[int, list[ScanPartition], RowRules]]) -> Iterator[ReadIssues]:
        for i, task, rows in items:
            writer = StagingWriter(Path(self.staging) / f"task-{i:05d}")
            found = ReadIssues([])
            try:
                for part in task:
                    for b in rows.batches(part, found):
                        writer.write(b)
            finally:
                writer.close()
            yield found  # to the driver, which reports them as the local engine's


class SparkTasks:
    """The ``spark`` engine: one Spark task per planned task, each writing its own staged files. The
    session is ``session``, or one for ``master`` started when there is work."""

    name = "spark"
    rules = True

    def __init__(self, session: Any, master: str | None = None) -> None:
        self.session, self.master = session, master

    def stage(self, job: ExportJob, target: Target, progress: Reporter) -> ReadIssues:
        # the tasks keep every core busy: no read-ahead thread, each batch decompressed on its task's thread
        rows = dataclasses.replace(job.rows(), prefetch=0, threads=1)
        # each task with the rules of its own topics (the schemas it decodes with, the positions upsert keeps)
        tasks = [(i, t, rows.only({p.topic or "" for p in t})) for i, t in enumerate(job.plan.tasks())]
        found = ReadIssues([])
        if tasks:
            session = self.session or spark_session(self.master)
            rdd = session.sparkContext.parallelize(tasks, len(tasks))
            for task_found in rdd.mapPartitions(_TaskWriter(str(target.staging))).collect():
                found.add(task_found)
        return found


class SparkSql:
    """The ``spark-sql`` engine: the same rows through the ``pulsarkit`` data source, written by Spark's
    Parquet writer into the staging directory."""

    name = "spark-sql"
    #: the data source's rows: no decoding by the export's rules, no batch cut, no upsert (the run refuses them)
    rules = False

    def __init__(self, session: Any, master: str | None = None) -> None:
        self.session, self.master = session, master

    def stage(self, job: ExportJob, target: Target, progress: Reporter) -> ReadIssues | None:
        """The data source's reads run in Spark's own tasks, whose logs name what they could not read
        (``on_error=fail``, the default, stops the run at an unreadable entry). On a local master their
        counts come back through the source's ``stats_dir`` (one line, the count of entries); on a
        cluster, whose executors write elsewhere, None (the run says so)."""
        session = self.session or spark_session(self.master)
        if not str(session.sparkContext.master).startswith("local"):
            self._write(session, job, target, None)
            return None
        with tempfile.TemporaryDirectory(prefix="pulsarkit-export-stats-") as stats_dir:
            self._write(session, job, target, stats_dir)
            stats = read_stats(stats_dir)["tasks"]
        if not stats.issues:
            return ReadIssues([])
        return ReadIssues(
            [f"{stats.issues} issue(s) in the Spark tasks (their logs name each one)"], stats.unreadable_entries
        )

    @staticmethod
    def _write(session: Any, job: ExportJob, target: Target, stats_dir: str | None) -> None:
        from pyspark.sql import functions as F

        source = job.source
        after = {t: list(v) for t, v in job.after.items()}
        until = {t: list(v) for t, v in job.until.items()}
        r = session.read.format("pulsarkit").option("on_error", job.on_error)
        r = r.option("topics", json.dumps(sorted(until)))
        r = r.option("after", json.dumps({source: after})).option("until", json.dumps({source: until}))
        options: dict[str, object] = {"max_partition_bytes": job.max_partition_bytes, "min_partitions": 2}
        options.update(job.spec.options())
        if stats_dir is not None:
            options["stats_dir"] = stats_dir
        for k, v in options.items():
            r = r.option(k, str(v))
        # a directory alone is named by its real path (the marks' key); a cluster's parts by the options
        only_path = job.spec.path is not None and not job.spec.options()
        df = r.load(source) if only_path else (r.load(job.spec.path) if job.spec.path else r.load())
        day = F.floor(F.col("publish_time") / F.lit(DAY_MS)).cast("int")
        df = df.withColumn("date", F.date_from_unix_date(day).cast("string"))
        df.write.mode("overwrite").partitionBy(*PARTITION_COLUMNS).parquet(str(target.staging))


#: the engines that run on Spark, by their ``--engine`` name
SPARK_ENGINES: dict[str, type[SparkTasks] | type[SparkSql]] = {e.name: e for e in (SparkTasks, SparkSql)}


def export(
    data_dir: str | DataDirSpec,
    to: str,
    out: str,
    *,
    engine: str = "auto",
    master: str | None = None,
    spark: Any = None,
    spark_threshold: int = SPARK_THRESHOLD,
    log: Callable[[str], None] | None = None,
    **options: Any,
) -> ExportSummary:
    """:func:`pulsarkit.export.export` (``log`` and ``options`` are its keyword arguments: topics,
    force, progress...) with the engine chosen as the module doc says: ``spark`` and ``spark-sql`` run
    on ``spark`` (a session) or on one started for ``master``."""
    if engine not in ENGINES:
        raise DataDirError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine in ("spark", "spark-sql") and spark is None and not _has_pyspark():
        # before the output is locked or anything planned: nothing to clean up
        raise DataDirError(f"--engine {engine} needs pyspark (pip install 'pulsarkit[spark]'); or --engine local")
    say = log or log_to_stderr

    def choose(job: ExportJob) -> Engine:
        session = spark
        # a session the caller passed is a choice of Spark
        name = "spark" if engine == "auto" and session is not None else engine
        name = choose_engine(name, master, job.planned_bytes, spark_threshold)
        if name == "local":
            return LocalEngine()
        if session is None and engine == "auto" and master is None:
            try:  # chosen by size alone: a Spark that cannot start (no Java) is no reason to fail
                session = spark_session(None)
            except Exception as e:  # noqa: BLE001 - py4j and pyspark raise several unrelated types
                say(f"warning: Spark did not start ({type(e).__name__}: {e}); exporting in this process")
                return LocalEngine()
        return SPARK_ENGINES[name](session, master)

    return export_locally(data_dir, to, out, engine=choose, log=say, **options)
