"""Disk usage, orphan ledgers and bookie GC plans over many bookies on Spark, with exactly the
single-process results (:mod:`pulsarkit.analysis.orphans`, :mod:`pulsarkit.bookkeeper.gc_cluster`).

What costs is reading the entry logs: each log's ledgers map, or a scan of the whole log when it has
none (a log a bookie never finished, or one written before ledgers maps existed). That work runs in
Spark tasks, one (bookie directory, log) pair per item, through the very functions the single process
calls (:func:`pulsarkit.scan.bookie_dir.read_log`, :func:`pulsarkit.bookkeeper.gc.read_entry_log`).
The driver reads the metadata store, the bookies' indexes and journals (small next to the logs),
opens the data directory on the logs the tasks read, and classifies with the single-process code, so
there is one implementation of each rule. (A bookie whose ``locations`` index is missing has it rebuilt
by a scan of its logs on the driver, as in the single process.) Planning never writes: the data
directory is opened read-only (:func:`pulsarkit.scan.datadir.open_data_dir`) and GC plans open
each bookie read-only, as ``pulsarkit gc`` does without ``--execute``.

The entry logs are read where the tasks run: every executor must see the bookie directories at the
paths the driver names (a shared file system, or one executor per bookie host with the same paths).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from ..analysis import orphans as _orphans
from ..bookkeeper.entrylog import EntryLogReader
from ..bookkeeper.gc import EntryLogFacts, GcConfig, GcRequest, read_entry_log
from ..bookkeeper.gc_cluster import GcPlans, open_bookies, plan_bookies
from ..errors import PulsarkitError
from ..metadata.store import MetadataStore
from ..scan import datadir as _datadir
from ..scan.bookie_dir import (
    BookieMapping,
    LogRead,
    bookie_ledger_dir,
    find_layout,
    mapping_dirs,
    read_log,
)
from ..scan.datadir import DataDir, PathLike
from ..scan.records import DataDirError
from ._schema import spark_fields

T = TypeVar("T")


# ------------------------------------------------------------------------------ the tasks


def _current(d: Path) -> Path:
    return d if d.name == "current" else d / "current"  # as DataDir names a ledger directory's logs


def _work(currents: Iterable[Path]) -> list[tuple[str, str, int]]:
    """(key, current dir, log id) of every entry log: the key is the real path BookieDir looks up."""
    out = []
    for cur in currents:
        try:
            ids = EntryLogReader(str(cur)).log_ids()
        except (PulsarkitError, OSError):
            continue  # opening the directory reports it, as the single process does
        out += [(os.path.realpath(cur), str(cur), log_id) for log_id in ids]
    return out


def _run(spark: Any, work: list[Any], fn: Callable[[Iterable[Any]], Iterator[T]]) -> list[T]:
    """``fn`` over the work items in Spark tasks (a few per core, so one slow scan does not hold
    the others), results collected."""
    if not work:
        return []
    sc = spark.sparkContext
    slices = max(1, min(len(work), 4 * sc.defaultParallelism))
    return sc.parallelize(work, slices).mapPartitions(fn).collect()


def _read_logs(items: Iterable[tuple[str, str, int]]) -> Iterator[tuple[str, LogRead]]:
    readers: dict[str, EntryLogReader] = {}
    for key, current, log_id in items:
        reader = readers.get(current)
        if reader is None:
            reader = readers[current] = EntryLogReader(current)
        yield key, read_log(reader, log_id)


def _read_gc_logs(items: Iterable[tuple[int, str, int]]) -> Iterator[tuple[int, EntryLogFacts | None]]:
    for bookie, current, log_id in items:
        try:
            yield bookie, read_entry_log(current, log_id)
        except (PulsarkitError, OSError):
            # the plan reads this log itself and fails as the single process does
            yield bookie, None


# ------------------------------------------------------------------------------ data directories


def _ledger_dirs(
    path: PathLike | None, ledger_dirs: Sequence[PathLike] | None, bookies: BookieMapping | None
) -> list[Path]:
    """The ledger directories :func:`~pulsarkit.scan.datadir.open_data_dir` reads for these
    arguments, in its order ([] when they name none: opening then says why)."""
    try:
        if ledger_dirs:
            return [Path(d) for d in ledger_dirs]
        if bookies:
            return mapping_dirs(bookies)
        if path is not None and Path(path).is_dir():
            return find_layout(Path(path))[1]
    except DataDirError:
        pass
    return []


def read_entry_logs(spark: Any, ledger_dirs: Iterable[PathLike]) -> dict[str, dict[int, LogRead]]:
    """Every entry log of the ledger directories, read in Spark tasks: ``{real path of current/:
    {log id: LogRead}}``, what :func:`~pulsarkit.scan.datadir.open_data_dir`'s ``log_reads`` takes."""
    out: dict[str, dict[int, LogRead]] = {}
    for key, r in _run(spark, _work(_current(Path(d)) for d in ledger_dirs), _read_logs):
        out.setdefault(key, {})[r.log_id] = r
    return out


def open_data_dir(spark: Any, path: PathLike | None = None, **open_args: Any) -> DataDir:
    """:func:`pulsarkit.scan.datadir.open_data_dir` (the same keyword arguments: metadata from RocksDB
    or a ZooKeeper directory, bookie directories...; read-only), its entry logs read by Spark tasks:
    the same :class:`DataDir`, issues included."""
    if "log_reads" in open_args:
        raise TypeError("log_reads are what this function reads in Spark tasks: not an argument here")
    reads = read_entry_logs(spark, _ledger_dirs(path, open_args.get("ledger_dirs"), open_args.get("bookies")))
    return _datadir.open_data_dir(path, **open_args, log_reads=reads)


def _on(spark: Any, source: DataDir | PathLike | None, open_args: dict[str, Any], fn: Callable[[DataDir], T]) -> T:
    if isinstance(source, DataDir):
        return fn(source)
    with open_data_dir(spark, source, **open_args) as dd:
        return fn(dd)


def _dataframe(spark: Any, table: pa.Table) -> Any:
    from pyspark.sql.types import StructType

    return spark.createDataFrame(table, StructType(spark_fields(table.schema)))


def disk_usage(
    spark: Any,
    source: DataDir | PathLike | None = None,
    *,
    minor_threshold: float = _orphans.MINOR_COMPACTION_THRESHOLD,
    major_threshold: float = _orphans.MAJOR_COMPACTION_THRESHOLD,
    **open_args: Any,
) -> Any:
    """:func:`pulsarkit.analysis.orphans.disk_usage_table` as a DataFrame: one row per (entry log,
    ledger), live or dead, its owner, and why dead bytes remain. ``source`` is a data directory
    (with :func:`open_data_dir`'s keyword arguments) or a :class:`DataDir` already opened by it."""
    table = _on(
        spark,
        source,
        open_args,
        lambda dd: _orphans.disk_usage_table(dd, minor_threshold=minor_threshold, major_threshold=major_threshold),
    )
    return _dataframe(spark, table)


def orphans(spark: Any, source: DataDir | PathLike | None = None, **open_args: Any) -> Any:
    """:func:`pulsarkit.analysis.orphans.orphans_table` as a DataFrame: every ledger nothing owns,
    its class, verdict and evidence."""
    return _dataframe(spark, _on(spark, source, open_args, _orphans.orphans_table))


def cleanup_plan(
    spark: Any, source: DataDir | PathLike | None = None, *, include_review: bool = False, **open_args: Any
) -> _orphans.OrphanCleanupPlan:
    """:func:`pulsarkit.analysis.orphans.cleanup_plan` (a plan for review, ``to_json`` writes it; nothing
    deleted)."""
    return _on(spark, source, open_args, lambda dd: _orphans.cleanup_plan(dd, include_review=include_review))


# ------------------------------------------------------------------------------ bookie GC


def gc_plans(
    spark: Any,
    path: PathLike | None = None,
    *,
    metadata_dir: PathLike | None = None,
    ledger_dirs: Sequence[PathLike] | None = None,
    bookies: BookieMapping | None = None,
    config: GcConfig | None = None,
    request: GcRequest = GcRequest(),
    clock_ms: Callable[[], int] | None = None,
) -> GcPlans:
    """The GC plan of every bookie ledger directory, as ``pulsarkit gc --plan`` writes them: exactly
    :func:`pulsarkit.bookkeeper.gc_cluster.plan_bookies` on those directories with the same arguments,
    its entry logs read by Spark tasks. The directories: a standalone's ``path``, or ``ledger_dirs`` / ``bookies``
    with ``metadata_dir``. Each bookie is opened read-only (a dry run: nothing is written)."""
    if path is not None:
        root = Path(path)
        if not root.is_dir():
            raise DataDirError(f"{root}: no such directory", str(root))
        md_dir, found = find_layout(root)
        metadata_dir = metadata_dir or md_dir
        dirs = [bookie_ledger_dir(Path(d)) for d in ledger_dirs] if ledger_dirs else None
        dirs = dirs or (mapping_dirs(bookies) if bookies else found)
    else:
        if metadata_dir is None or not (ledger_dirs or bookies):
            raise DataDirError("gc_plans needs a path, or metadata_dir and ledger_dirs (or bookies)")
        dirs = [bookie_ledger_dir(Path(d)) for d in ledger_dirs] if ledger_dirs else mapping_dirs(bookies or {})
    with MetadataStore(metadata_dir, read_only=True) as metadata, open_bookies(dirs, read_only=True) as storages:
        work = [(i, s.current, log_id) for i, s in enumerate(storages) for log_id in s.entry_log_ids()]
        logs: list[dict[int, EntryLogFacts]] = [{} for _ in storages]
        for i, facts in _run(spark, work, _read_gc_logs):
            if facts is not None:
                logs[i][facts.log_id] = facts
        return plan_bookies(storages, metadata, config, request, entry_logs=logs, clock_ms=clock_ms)


__all__ = [
    "cleanup_plan",
    "disk_usage",
    "gc_plans",
    "open_data_dir",
    "orphans",
    "read_entry_logs",
]
