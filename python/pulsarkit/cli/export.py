"""``pulsarkit export``: the messages of a data directory into a Parquet dataset, a Delta table or an
Iceberg table, incrementally::

    pulsarkit export DATA_DIR --to parquet OUT [--engine auto|local|spark|spark-sql] [--master URL] [--topic T]...
                              [--json] [--force] [--skip-unreadable] [--progress | --no-progress]
    pulsarkit export DATA_DIR --to delta OUT ...          (needs the deltalake package: pip install pulsarkit[delta])
    pulsarkit export DATA_DIR --to iceberg OUT ...        (needs pyiceberg: pip install pulsarkit[iceberg])

The rows are those of ``pulsarkit messages`` (read-committed, as consumers received them), in the
flattened columns of the ``pulsarkit`` Spark data source, partitioned by ``topic`` and ``date`` (UTC
day of ``publish_time``): ``OUT/topic=persistent%3A%2F%2Ft%2Fns%2Fx/date=2024-05-01/part-<run>-<n>.parquet``,
the directory names escaped as Spark escapes them, so ``spark.read.parquet(OUT)`` (``date`` read as
a DateType) and ``pyarrow.dataset(OUT, partitioning="hive")`` read it as is (files starting with ``_``,
the marks and the lock, are skipped by both).

Incremental: every topic's high-water mark (the last position considered: ledger and entry) is kept
with the output, in ``OUT/_pulsarkit_export.json`` for Parquet (with the list of the data files it
commits), in the Delta commit's metadata, or in the summary properties of the Iceberg snapshot
(``pulsarkit.export``) that adds the run's data files. A run reads only positions after the marks
(and the earlier chunks of a message that ends after one) up to each topic's current end, or up to
the first message of a transaction still open (read-committed: those messages come out with a later
run once the transaction ends). Parquet commits by writing the data files first, then the marks file by an
atomic rename: a run that dies in between leaves files the marks file does not list, and the next
run deletes them before it starts, so no message is exported twice or lost. Delta commits data and
marks in one transaction, Iceberg in one append (one snapshot); what an Iceberg run that died wrote
before its commit (data files, manifests, a metadata JSON: files no snapshot reaches) is deleted by
the next run. What the export cannot get back is warned about (stderr and ``warnings`` in the JSON
summary): a mark in a ledger that retention removed since the last run (messages after it in
trimmed ledgers were never exported), a topic that is gone.

``--engine auto`` (the default) is ``spark`` when ``--master`` names a cluster or the planned input is
over ``--spark-threshold`` bytes (default 1 GiB: below it one process is faster, see
``bench/RESULTS.md``) and pyspark is installed, else ``local``; the summary says which ran.
``--engine local`` plans and decodes in this process with the native kernels.
``--engine spark`` runs the same decoding and Parquet writing in Spark tasks (``--master``, default
``local[2]``): the driver plans, each task reads its partitions and writes its own files, and no row
passes through the JVM (the staging directory and the data directory must be visible to the
executors, as the data directory must be to any reader). ``--engine spark-sql`` reads through the
``pulsarkit`` data source and writes with Spark's Parquet writer (the rows become Spark rows: slower,
but the DataFrame path any other Spark sink would take). Every engine gives the same rows in the
same layout, committed the same way (Delta and Iceberg: the driver appends the staged files through
deltalake or pyiceberg).

**Iceberg** (``--to iceberg OUT``): ``OUT`` is the table (``OUT/metadata/``, the data files in
``OUT/data/topic=<topic>/date=<day>/``, identity partitions on ``topic`` and ``date``, the same
columns as the other targets, ``date`` a ``YYYY-MM-DD`` string) and holds its catalog: pyiceberg's
``SqlCatalog`` on a SQLite file, ``OUT/_pulsarkit_iceberg_catalog.db``, table ``pulsarkit.messages``,
so no catalog server is needed. Read it with pyiceberg::

    from pyiceberg.catalog.sql import SqlCatalog
    catalog = SqlCatalog("pulsarkit", uri=f"sqlite:///{OUT}/_pulsarkit_iceberg_catalog.db", warehouse=OUT)
    rows = catalog.load_table("pulsarkit.messages").scan().to_arrow()

or with any Iceberg reader given the current metadata JSON (``metadata`` in the ``--json`` summary):
pyiceberg's ``StaticTable.from_metadata(path)``, or Spark with Iceberg's Spark runtime jar,
``spark.read.format("iceberg").load(path)`` (``path + "#snapshots"`` lists the snapshots and their
marks). The Spark read was checked by hand, not by the tests: Spark 4.1.4 with
iceberg-spark-runtime-4.1_2.13 1.11.0 read the same rows; the tests run PySpark 4.3, for which
Iceberg 1.11.0, the newest release then, has no runtime (the 4.1 one fails to load on it).
Iceberg metadata names files by absolute path: a moved ``OUT`` no longer reads through its metadata,
and further runs into it are refused.

An existing ``OUT`` that is not a pulsarkit export (a non-empty directory without the marks file, a
Delta table without pulsarkit marks) is refused without ``--force`` (for Iceberg, one with a ``data/``
or ``metadata/`` folder always: a run deletes the files there that no snapshot reaches); marks from
another data directory are refused without ``--other-source``. An unreadable entry stops the export
(exit 1) unless ``--skip-unreadable``, so that a mark never moves past a message that was not exported.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import secrets
import shutil
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..broker.topic_name import ml_to_topic
from ..scan import MESSAGE_FIELDS, ScanPartition, arrow_schema, plan, read_partition
from ..scan.datadir import open_data_dir
from ..scan.records import DataDirError
from ..spark import local_session, register
from .command import EXIT_OK, Progress, Runner, command, progress_arg

MARKS_FILE = "_pulsarkit_export.json"
LOCK_FILE = "_pulsarkit_export.lock"
STAGING = "_staging"
FORMAT = "pulsarkit-export"
DELTA_MARKS_KEY = "pulsarkit.export"
ICEBERG_MARKS_KEY = "pulsarkit.export"
#: the Iceberg export's SQL catalog (SQLite), inside OUT; its table
ICEBERG_CATALOG = "_pulsarkit_iceberg_catalog.db"
ICEBERG_TABLE = ("pulsarkit", "messages")
#: pyiceberg deletes the metadata JSONs that fall out of the log itself, so that any file no snapshot
#: reaches is the leftover of a run that did not commit
ICEBERG_TABLE_PROPERTIES = {"write.metadata.delete-after-commit.enabled": "true"}
TARGETS = ("parquet", "delta", "iceberg")
PARTITION_COLUMNS = ("topic", "date")
ENGINES = ("auto", "local", "spark", "spark-sql")
#: Above this many planned bytes ``--engine auto`` runs on Spark. On a 2-core machine (bench/RESULTS.md)
#: Spark local[2]'s tasks export 240 MB at 0.9x of one process and 1.2 GB at 1.8x, but the session takes
#: ~8 s to start: with it, Spark catches up with one process near 1 GB, and more cores move that lower.
SPARK_THRESHOLD = 1 << 30


def choose_engine(engine: str, master: str | None, planned_bytes: int, threshold: int = SPARK_THRESHOLD) -> str:
    """``auto`` resolved: ``spark`` for a named master or an input over ``threshold`` (when pyspark
    imports), else ``local``; any other engine as given."""
    if engine != "auto":
        return engine
    if master is None and planned_bytes <= threshold:
        return "local"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        if master is not None:
            raise DataDirError("--master needs pyspark (pip install 'pulsarkit[spark]')") from None
        return "local"
    return "spark"


#: the columns of the data files (the partition columns are in the directory names)
FILE_FIELDS = [(n, t) for n, t in MESSAGE_FIELDS if n != "topic"]
_DAY_MS = 86_400_000

# Spark's ExternalCatalogUtils.escapePathName: these characters become %XX in partition directories.
_ESCAPE = {chr(c) for c in range(1, 0x20)} | set("\"#%'*/:=?\\\x7f{[]^")


def escape_path_name(value: str) -> str:
    """A partition value as Spark writes it in a directory name (``topic=persistent%3A%2F%2F...``)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in value)


class ExportRefused(DataDirError):
    """The output is not a pulsarkit export of this data directory (or is in use)."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json_atomically(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _data_files(out: Path) -> list[str]:
    """Relative paths of the data files under the partition directories."""
    found = []
    for t in out.glob("topic=*"):
        for f in t.glob("date=*/part-*.parquet"):
            found.append(str(f.relative_to(out)))
    return sorted(found)


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    with open(out / LOCK_FILE, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ExportRefused(f"{out}: another pulsarkit export is writing it") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# ----------------------------------------------------------------------------------- the state


class ParquetState:
    """The marks file of a Parquet export: marks per topic, the committed files, the runs."""

    def __init__(self, out: Path, source: str, *, force: bool, other_source: bool) -> None:
        self.out = out
        self.path = out / MARKS_FILE
        self.removed_leftovers: list[str] = []
        if self.path.exists():
            doc = json.loads(self.path.read_text())
            if doc.get("format") != FORMAT:
                raise ExportRefused(f"{self.path} is not a pulsarkit export marks file")
            if doc.get("to") != "parquet":
                raise ExportRefused(f"{out} is a pulsarkit export to {doc.get('to')}, not parquet")
            if doc.get("source") != source and not other_source:
                raise ExportRefused(
                    f"{out} holds an export of {doc.get('source')}, not {source}; "
                    "pass --other-source if this is the same data moved (ledger ids must be the same)"
                )
            self.doc = doc
        else:
            if (out / ICEBERG_CATALOG).exists():
                raise ExportRefused(f"{out} is a pulsarkit export to iceberg, not parquet")
            if out.exists() and any(p.name not in (LOCK_FILE,) for p in out.iterdir()) and not force:
                raise ExportRefused(f"{out} exists and is not a pulsarkit export; pass --force to write into it")
            self.doc = {"format": FORMAT, "version": 1, "to": "parquet", "source": source, "marks": {}, "files": []}
            self.doc["runs"] = []

    def marks(self) -> dict[str, tuple[int, int]]:
        return {t: (p[0], p[1]) for t, p in self.doc["marks"].items()}

    def close(self) -> None:
        pass

    def clean(self) -> None:
        """Removes what a run that did not commit left: staging, data files the marks file does not list."""
        shutil.rmtree(self.out / STAGING, ignore_errors=True)
        committed = set(self.doc["files"])
        for rel in _data_files(self.out):
            if rel not in committed:
                (self.out / rel).unlink()
                self.removed_leftovers.append(rel)

    def commit(self, run: dict[str, Any], files: list[str], marks: dict[str, tuple[int, int]]) -> None:
        self.doc["files"] = sorted(set(self.doc["files"]) | set(files))
        self.doc["marks"].update({t: list(p) for t, p in marks.items()})
        self.doc["runs"].append(run)
        _write_json_atomically(self.path, self.doc)


class DeltaState:
    """Marks of a Delta export: the custom metadata of the table's last pulsarkit commit."""

    def __init__(self, out: Path, source: str, *, force: bool, other_source: bool) -> None:
        try:  # optional, and imported only here: the other commands start without it
            import deltalake
        except ImportError as e:
            raise ExportRefused("--to delta needs the deltalake package (pip install 'pulsarkit[delta]')") from e
        self.deltalake = deltalake
        self.out = out
        self.removed_leftovers: list[str] = []
        self.doc: dict[str, Any] = {"marks": {}, "source": source}
        if (out / "_delta_log").is_dir():
            table = deltalake.DeltaTable(str(out))
            found = None
            for h in table.history():
                if DELTA_MARKS_KEY in h:
                    found = json.loads(h[DELTA_MARKS_KEY])
                    break
            if found is None and not force:
                raise ExportRefused(f"{out} is a Delta table pulsarkit did not write; pass --force to append to it")
            if found is not None:
                if found.get("source") != source and not other_source:
                    raise ExportRefused(f"{out} holds an export of {found.get('source')}, not {source}")
                self.doc = found
        elif (out / ICEBERG_CATALOG).exists():
            raise ExportRefused(f"{out} is a pulsarkit export to iceberg, not delta")
        elif out.exists() and any(p.name != LOCK_FILE for p in out.iterdir()) and not force:
            raise ExportRefused(f"{out} exists and is not a pulsarkit export; pass --force to write into it")

    def marks(self) -> dict[str, tuple[int, int]]:
        return {t: (p[0], p[1]) for t, p in self.doc["marks"].items()}

    def close(self) -> None:
        pass

    def clean(self) -> None:
        shutil.rmtree(self.out / STAGING, ignore_errors=True)

    def commit_table(self, data: Any, marks: dict[str, tuple[int, int]], run: dict[str, Any]) -> None:
        doc = {
            "format": FORMAT,
            "version": 1,
            "source": self.doc["source"],
            "marks": {**self.doc["marks"], **{t: list(p) for t, p in marks.items()}},
            "run": run,
        }
        self.deltalake.write_deltalake(
            str(self.out),
            data,
            partition_by=list(PARTITION_COLUMNS),
            mode="append",
            commit_properties=self.deltalake.CommitProperties(custom_metadata={DELTA_MARKS_KEY: json.dumps(doc)}),
        )


def _iceberg_type(t: pa.DataType, ids: Iterator[int]) -> Any:
    """The Iceberg type of one of the export's Arrow column types (the only ones it has)."""
    from pyiceberg import types as it

    if pa.types.is_map(t):
        kid, vid = next(ids), next(ids)
        return it.MapType(kid, _iceberg_type(t.key_type, ids), vid, _iceberg_type(t.item_type, ids), False)
    simple = {
        pa.string(): it.StringType(),
        pa.binary(): it.BinaryType(),
        pa.int32(): it.IntegerType(),
        pa.int64(): it.LongType(),
        pa.bool_(): it.BooleanType(),
    }
    if t not in simple:
        raise DataDirError(f"no Iceberg type for the export column type {t}")
    return simple[t]


def iceberg_schema() -> Any:
    """The Iceberg schema of an export: the columns of the other targets, ``date`` a string as theirs."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    fields = [*MESSAGE_FIELDS, ("date", pa.string())]
    ids = iter(range(len(fields) + 1, 10_000))  # nested ids (the map's key and value) after the columns
    return Schema(
        *(NestedField(i, n, _iceberg_type(t, ids), required=False) for i, (n, t) in enumerate(fields, start=1))
    )


class IcebergState:
    """Marks of an Iceberg export: the summary properties of the table's last pulsarkit snapshot.

    The table lives in ``OUT`` (``metadata/``, ``data/topic=.../date=...``) and so does its catalog, a
    SQLite file (:data:`ICEBERG_CATALOG`, pyiceberg's ``SqlCatalog``, warehouse ``OUT``): no server. The
    catalog's row pointing at the current metadata JSON is the commit point; what an append writes
    before it (data files, manifests, a metadata JSON) is invisible until then, and what a run that
    died left of it is removed by the next run (:meth:`clean`)."""

    def __init__(self, out: Path, source: str, *, force: bool, other_source: bool) -> None:
        try:  # optional, and imported only here: the other commands start without it
            import pyiceberg.catalog.sql  # noqa: F401  (needs sqlalchemy: the extra sql-sqlite)
        except ImportError as e:
            raise ExportRefused("--to iceberg needs the pyiceberg package (pip install 'pulsarkit[iceberg]')") from e
        self.out = out
        self.removed_leftovers: list[str] = []
        self.doc: dict[str, Any] = {"marks": {}, "source": source}
        self.metadata_location: str | None = None
        self._catalog: Any = None
        try:
            self._check(force, other_source)
        except BaseException:
            self.close()
            raise

    def _check(self, force: bool, other_source: bool) -> None:
        out, source = self.out, self.doc["source"]
        if (out / ICEBERG_CATALOG).is_file():
            try:
                table = self._table()
            except FileNotFoundError as e:
                raise ExportRefused(
                    f"{out}: the metadata its Iceberg catalog points at is not there ({e}); an export moved from "
                    "elsewhere? Iceberg metadata names its files by absolute path, so a moved export cannot be "
                    "continued: export anew"
                ) from None
            found = None
            if table is not None:
                if os.path.realpath(_local_path(table.location())) != os.path.realpath(out):
                    raise ExportRefused(
                        f"{out} holds an Iceberg export made at {table.location()}; Iceberg metadata names its "
                        "files by absolute path, so a moved export cannot be continued: export anew"
                    )
                found = self._last_marks(table)
                if found is None and table.current_snapshot() is not None and not force:
                    raise ExportRefused(
                        f"{out} is an Iceberg table whose snapshots pulsarkit did not write; pass --force to append"
                    )
            if found is not None:
                if found.get("source") != source and not other_source:
                    raise ExportRefused(
                        f"{out} holds an export of {found.get('source')}, not {source}; "
                        "pass --other-source if this is the same data moved (ledger ids must be the same)"
                    )
                self.doc = found
        elif (out / MARKS_FILE).exists() or (out / "_delta_log").exists():
            raise ExportRefused(f"{out} is a Parquet or Delta export (or table), not an Iceberg export")
        elif out.exists():
            # clean() deletes what no snapshot lists under data/ and metadata/: never in folders of others
            if (out / "metadata").exists() or (out / "data").exists():
                raise ExportRefused(
                    f"{out} is not a pulsarkit export and has a data/ or metadata/ folder (an Iceberg table?); "
                    "pulsarkit writes Iceberg exports only into its own: export elsewhere"
                )
            if any(p.name != LOCK_FILE for p in out.iterdir()) and not force:
                raise ExportRefused(f"{out} exists and is not a pulsarkit export; pass --force to write into it")

    def catalog(self) -> Any:
        """The export's own catalog (creates its SQLite file: call only under the lock, or on one that exists)."""
        if self._catalog is None:
            from pyiceberg.catalog.sql import SqlCatalog

            # locations are plain absolute paths: pyiceberg takes them as they are (a file URI would
            # have to be percent-encoded, and pyiceberg does not decode one)
            self._catalog = SqlCatalog(
                "pulsarkit", uri=f"sqlite:///{self.out / ICEBERG_CATALOG}", warehouse=str(self.out)
            )
        return self._catalog

    def _table(self) -> Any:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.catalog().load_table(ICEBERG_TABLE)
        except NoSuchTableError:  # the first run died before its commit: the export is empty
            return None

    @staticmethod
    def _last_marks(table: Any) -> dict[str, Any] | None:
        from pyiceberg.table.snapshots import ancestors_of

        for snap in ancestors_of(table.current_snapshot(), table.metadata):
            if snap.summary is not None and ICEBERG_MARKS_KEY in snap.summary:
                doc: dict[str, Any] = json.loads(str(snap.summary[ICEBERG_MARKS_KEY]))
                return doc
        return None

    def marks(self) -> dict[str, tuple[int, int]]:
        return {t: (p[0], p[1]) for t, p in self.doc["marks"].items()}

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.engine.dispose()  # closes the SQLite file

    def _referenced(self, table: Any) -> set[str]:
        """Every file the table's metadata reaches: metadata JSONs (current and logged), manifest lists,
        manifests, data and delete files of every snapshot, statistics files."""
        md = table.metadata
        refs = {table.metadata_location, *(e.metadata_file for e in md.metadata_log)}
        refs |= {s.statistics_path for s in md.statistics} | {s.statistics_path for s in md.partition_statistics}
        seen: set[str] = set()
        for snap in md.snapshots:
            refs.add(snap.manifest_list)
            for m in snap.manifests(table.io):
                if m.manifest_path in seen:  # an append keeps the manifests of the snapshot before it
                    continue
                seen.add(m.manifest_path)
                refs.add(m.manifest_path)
                for e in m.fetch_manifest_entry(table.io, discard_deleted=False):
                    refs.add(e.data_file.file_path)
        return {os.path.realpath(_local_path(r)) for r in refs}

    def clean(self) -> None:
        """Removes what a run that did not commit left: staging, and the files of an append that no
        snapshot reaches (data files, manifests, a metadata JSON the catalog does not point at)."""
        shutil.rmtree(self.out / STAGING, ignore_errors=True)
        if not (self.out / ICEBERG_CATALOG).is_file():
            return
        table = self._table()
        refs = self._referenced(table) if table is not None else set()
        for folder, suffixes in (("data", (".parquet",)), ("metadata", (".avro", ".metadata.json"))):
            for f in sorted((self.out / folder).rglob("*")) if (self.out / folder).is_dir() else []:
                if f.is_file() and f.name.endswith(suffixes) and os.path.realpath(f) not in refs:
                    f.unlink()
                    self.removed_leftovers.append(str(f.relative_to(self.out)))
                    for d in f.parents:  # the partition folders only it was in
                        if d == self.out / folder or any(d.iterdir()):
                            break
                        d.rmdir()

    def commit_table(self, data: pa.Table, marks: dict[str, tuple[int, int]], run: dict[str, Any]) -> None:
        """One append, one snapshot: the data files and the marks (its summary properties) commit together."""
        doc = {
            "format": FORMAT,
            "version": 1,
            "source": self.doc["source"],
            "marks": {**self.doc["marks"], **{t: list(p) for t, p in marks.items()}},
            "run": run,
        }
        props = {ICEBERG_MARKS_KEY: json.dumps(doc, sort_keys=True)}
        table = self._table()
        if table is None:
            from pyiceberg.partitioning import PartitionField, PartitionSpec
            from pyiceberg.transforms import IdentityTransform

            schema = iceberg_schema()
            spec = PartitionSpec(
                *(
                    PartitionField(schema.find_field(n).field_id, 1000 + i, IdentityTransform(), n)
                    for i, n in enumerate(PARTITION_COLUMNS)
                )
            )
            catalog = self.catalog()
            catalog.create_namespace_if_not_exists(ICEBERG_TABLE[0])
            # the table and its first snapshot in one catalog commit
            tx = catalog.create_table_transaction(
                ICEBERG_TABLE,
                schema,
                location=str(self.out),
                partition_spec=spec,
                properties=ICEBERG_TABLE_PROPERTIES,
            )
            tx.append(data, snapshot_properties=props)
            table = tx.commit_transaction()
        else:
            table.append(data, snapshot_properties=props)
        self.metadata_location = table.metadata_location


def _local_path(location: str) -> str:
    """The local path of an Iceberg location (``/x`` as pulsarkit writes them, or ``file:///x``). Iceberg
    locations are not percent-decoded: a ``%3A`` in one is in the file's name (partition directories)."""
    if location.startswith("file:"):
        return "/" + location[len("file:") :].lstrip("/")
    if "://" in location:
        raise ExportRefused(f"{location}: an Iceberg export lives on the local file system")
    return location


# ----------------------------------------------------------------------------------- engines


def _with_date(b: pa.RecordBatch) -> pa.RecordBatch:
    """``date``: the UTC day of ``publish_time`` as ``YYYY-MM-DD`` (formatted once per distinct day)."""
    days = pc.floor(pc.divide(b.column("publish_time").cast(pa.float64()), float(_DAY_MS))).cast(pa.int64())
    uniq = pc.unique(days)
    labels = pc.strftime(pc.multiply(uniq, _DAY_MS).cast(pa.timestamp("ms")), format="%Y-%m-%d")
    return b.append_column("date", labels.take(pc.index_in(days, value_set=uniq)))


def _stage_tasks(
    tasks: list[list[ScanPartition]], staging: Path, on_error: str, progress: Progress | None = None
) -> None:
    """Decodes the tasks' partitions in this process, one Parquet file per (topic, date) under ``staging``."""
    writers: dict[tuple[str, str], pq.ParquetWriter] = {}
    schema = arrow_schema(FILE_FIELDS)
    done = 0
    try:
        for task in tasks:
            for part in task:
                for b in read_partition(part, on_error=on_error):
                    t = pa.Table.from_batches([_with_date(b)])
                    keys = pa.Table.from_arrays([t.column("topic"), t.column("date")], names=["t", "d"])
                    groups = keys.group_by(["t", "d"]).aggregate([]).to_pylist()
                    for g in groups:
                        if len(groups) == 1:  # the usual case: one topic and day per batch, nothing to copy
                            rows = t.select(schema.names)
                        else:
                            m = pc.and_(pc.equal(t.column("topic"), g["t"]), pc.equal(t.column("date"), g["d"]))
                            rows = t.filter(m).select(schema.names)
                        w = writers.get((g["t"], g["d"]))
                        if w is None:
                            d = staging / f"topic={escape_path_name(g['t'])}" / f"date={escape_path_name(g['d'])}"
                            d.mkdir(parents=True, exist_ok=True)
                            w = writers[(g["t"], g["d"])] = pq.ParquetWriter(d / "part-00000.parquet", schema)
                        w.write_table(rows.cast(schema))
                done += part.bytes
                if progress is not None:
                    progress.update(done, part.topic or "")
    finally:
        for w in writers.values():
            w.close()


class _TaskWriter:
    """A Spark task of ``--engine spark``: the same decoding and writing as the local engine, on an
    executor, into its own directory under the staging directory (which the executors must see)."""

    def __init__(self, staging: str, on_error: str) -> None:
        self.staging, self.on_error = staging, on_error

    def __call__(self, items: Iterator[tuple[int, list[ScanPartition]]]) -> Iterator[int]:
        for i, task in items:
            _stage_tasks([task], Path(self.staging) / f"task-{i:05d}", self.on_error)
            yield i


def spark_session(master: str | None) -> Any:
    if master is None or master.startswith("local"):
        cores = master[len("local[") : -1] if master and master.startswith("local[") else 2
        return local_session(cores, "pulsarkit-export")
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master(master).appName("pulsarkit-export").getOrCreate()
    register(spark)
    return spark


def _stage_spark(
    spark: Any, source: str, after: dict[str, Any], until: dict[str, Any], staging: Path, on_error: str, kw: Any
) -> None:
    """The same rows through the ``pulsarkit`` data source, written by Spark under ``staging``."""
    from pyspark.sql import functions as F

    r = spark.read.format("pulsarkit").option("on_error", on_error).option("topics", json.dumps(sorted(until)))
    r = r.option("after", json.dumps({source: after})).option("until", json.dumps({source: until}))
    for k, v in kw.items():
        r = r.option(k, str(v))
    df = r.load(source)
    day = F.floor(F.col("publish_time") / F.lit(_DAY_MS)).cast("int")
    df = df.withColumn("date", F.date_from_unix_date(day).cast("string"))
    df.write.mode("overwrite").partitionBy(*PARTITION_COLUMNS).parquet(str(staging))


def _staged_files(staging: Path) -> list[Path]:
    found = [*staging.glob("topic=*/date=*/*.parquet"), *staging.glob("task-*/topic=*/date=*/*.parquet")]
    return sorted(f for f in found if not f.name.startswith((".", "_")))


def _partition_dir(f: Path) -> Path:
    """``topic=.../date=...`` of a staged file."""
    return Path(f.parent.parent.name) / f.parent.name


def _unescape(s: str) -> str:
    return urllib.parse.unquote(s)


def _summary_rows(files: list[Path]) -> dict[str, int]:
    rows: dict[str, int] = {}
    for f in files:
        topic = _unescape(f.parent.parent.name[len("topic=") :])
        rows[topic] = rows.get(topic, 0) + pq.read_metadata(f).num_rows
    return rows


# ----------------------------------------------------------------------------------- command


def _gaps(before: dict[str, tuple[int, int]], ledgers: dict[str, list[int]]) -> list[str]:
    """Topics whose mark is in a ledger the topic no longer has: retention (or a deletion) removed
    entries since the last run, and those after the mark were never exported."""
    out = []
    for t, (lid, eid) in sorted(before.items()):
        have = ledgers.get(t)
        if have is None:
            out.append(f"{t} is gone since the last run (mark {lid}:{eid}); nothing more of it to export")
        elif lid not in have and (not have or have[0] > lid):
            out.append(
                f"{t}: ledger {lid} of the last mark ({lid}:{eid}) was trimmed since the last run; messages "
                f"after the mark in it, or in ledgers trimmed before {have[0] if have else 'now'}, were not exported"
            )
    return out


def _resolve(source: str, topics: list[str]) -> list[str]:
    """Full topic names (``orders`` -> ``persistent://public/default/orders``, a partitioned topic -> its
    partitions); an unknown topic is an error before anything is written."""
    with open_data_dir(source) as dd:
        return sorted({ml_to_topic(ml) for t in topics for ml in dd.expand(t)})


def export(
    data_dir: str,
    to: str,
    out: str,
    *,
    engine: str = "auto",
    master: str | None = None,
    topics: list[str] | None = None,
    force: bool = False,
    other_source: bool = False,
    skip_unreadable: bool = False,
    progress: bool | None = None,
    max_partition_bytes: int = 64 << 20,
    ledger_dirs: list[str] | None = None,
    spark_threshold: int = SPARK_THRESHOLD,
    spark: Any = None,
    log: Any = None,
) -> dict[str, Any]:
    """Exports the messages added since the last run (see the module doc); returns the summary.
    ``ledger_dirs``: the bookie directories of a cluster whose metadata store is ``data_dir``'s (each
    entry read once, from the first copy of its write set that verifies)."""
    if to not in TARGETS:
        raise DataDirError(f"--to must be one of {', '.join(TARGETS)}, not {to!r}")
    if engine not in ENGINES:
        raise DataDirError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    t0 = time.perf_counter()
    log = log or (lambda msg: print(f"pulsarkit export: {msg}", file=sys.stderr))
    source = os.path.realpath(data_dir)
    root = Path(out).absolute()
    if not Path(source).is_dir():
        raise DataDirError(f"{data_dir}: no such directory", data_dir)
    real_out = os.path.realpath(root)
    if real_out == source or os.path.commonpath([real_out, source]) == source:
        raise ExportRefused(f"{out} is inside the data directory {data_dir}; export elsewhere")
    if root.is_symlink():
        raise ExportRefused(f"{out} is a symbolic link; pulsarkit never writes through one")
    if root.exists() and not root.is_dir():
        raise ExportRefused(f"{out} exists and is not a directory")
    state: ParquetState | DeltaState | IcebergState
    if to == "parquet":
        state = ParquetState(root, source, force=force, other_source=other_source)
    elif to == "delta":
        state = DeltaState(root, source, force=force, other_source=other_source)
    else:
        state = IcebergState(root, source, force=force, other_source=other_source)
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root), contextlib.closing(state):
        state.clean()
        if state.removed_leftovers:
            log(f"removed {len(state.removed_leftovers)} file(s) of a run that did not commit")
        before = state.marks()
        filters = [("topic", "in", frozenset(_resolve(source, topics)))] if topics else []
        p = plan(
            [source],
            after={source: before},
            filters=filters,
            max_partition_bytes=max_partition_bytes,
            ledger_dirs=ledger_dirs,
        )
        for issue in p.issues:
            log(f"warning: {issue}")
        marks = p.marks.get(source, {})
        warnings = _gaps(before, p.topic_ledgers.get(source, {}))
        for w in warnings:
            log(f"warning: {w}")
        new_marks = {t: m for t, m in marks.items() if before.get(t) != m}
        total = sum(x.bytes for x in p.partitions)
        auto = engine == "auto"
        # a session the caller passed is a choice of Spark
        engine = "spark" if auto and spark is not None else choose_engine(engine, master, total, spark_threshold)
        if auto and engine == "spark" and spark is None and master is None:
            try:  # chosen by size alone: a Spark that cannot start (no Java) is no reason to fail
                spark = spark_session(None)
            except Exception as e:  # noqa: BLE001 - py4j and pyspark raise several unrelated types
                log(f"warning: Spark did not start ({type(e).__name__}: {e}); exporting in this process")
                engine = "local"
        log(
            f"{len(p.partitions)} partition(s), about {total} bytes, {len(new_marks)} topic(s) with new entries; "
            f"engine {engine}"
        )
        run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
        staging = root / STAGING / run_id
        on_error = "skip" if skip_unreadable else "fail"
        prog = Progress(total, "exporting", enabled=progress)
        try:
            if engine == "local":
                _stage_tasks(p.tasks(), staging, on_error, prog)
            elif engine == "spark":
                tasks = list(enumerate(p.tasks()))
                if tasks:
                    session = spark or spark_session(master)
                    rdd = session.sparkContext.parallelize(tasks, len(tasks))
                    rdd.mapPartitions(_TaskWriter(str(staging), on_error)).collect()
            else:
                session = spark or spark_session(master)
                _stage_spark(
                    session,
                    source,
                    {t: list(v) for t, v in before.items()},
                    {t: list(v) for t, v in marks.items()},
                    staging,
                    on_error,
                    {
                        "max_partition_bytes": max_partition_bytes,
                        "min_partitions": 2,
                        **({"ledger_dirs": ",".join(ledger_dirs)} if ledger_dirs else {}),
                    },
                )
        finally:
            prog.close()
        staged = _staged_files(staging) if staging.exists() else []
        rows = _summary_rows(staged)
        run: dict[str, Any] = {
            "run": run_id,
            "time": _now_ms(),
            "engine": engine,
            "rows": sum(rows.values()),
            "files": len(staged),
        }
        files: list[str] = []
        if isinstance(state, ParquetState):
            for i, f in enumerate(staged):
                dest = root / _partition_dir(f) / f"part-{run_id}-{i:05d}.parquet"
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(f, dest)
                files.append(str(dest.relative_to(root)))
            state.commit(run, files, marks)  # the commit point: the marks file, renamed into place
        else:
            schema = arrow_schema([*MESSAGE_FIELDS, ("date", pa.string())])
            if staged:
                tables = []
                for f in staged:
                    t = pq.read_table(f)
                    topic = _unescape(f.parent.parent.name[len("topic=") :])
                    date = _unescape(f.parent.name[len("date=") :])
                    t = t.add_column(0, "topic", pa.array([topic] * t.num_rows, pa.string()))
                    t = t.append_column("date", pa.array([date] * t.num_rows, pa.string()))
                    tables.append(t.select(schema.names).cast(schema))
                data = pa.concat_tables(tables)
            else:
                data = schema.empty_table()
            state.commit_table(data, marks, run)
        shutil.rmtree(root / STAGING, ignore_errors=True)
    return {
        "data_dir": source,
        "output": str(root),
        "to": to,
        "engine": engine,
        "run": run_id,
        "rows": run["rows"],
        "files": files if to == "parquet" else len(staged),
        "topics": {
            t: {"rows": rows.get(t, 0), "after": list(before[t]) if t in before else None, "until": list(m)}
            for t, m in sorted(marks.items())
            if t in new_marks or rows.get(t)
        },
        "removed_leftovers": state.removed_leftovers,
        "warnings": warnings,
        "issues": p.issues,
        **({"metadata": state.metadata_location} if isinstance(state, IcebergState) else {}),
        "seconds": round(time.perf_counter() - t0, 3),
    }


@command(
    "export",
    help="export the messages of a data directory to a Parquet dataset, a Delta table or an Iceberg table, "
    "partitioned by topic and date, incrementally (a rerun exports only what was added since)",
)
def _export(p: argparse.ArgumentParser) -> Runner:
    p.add_argument("data_dir", metavar="DATA_DIR", help="a standalone's data directory (metadata/ + bookkeeper/)")
    p.add_argument(
        "--to",
        nargs=2,
        metavar=("FORMAT", "PATH"),
        required=True,
        help="parquet PATH, delta PATH (deltalake) or iceberg PATH (pyiceberg)",
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="decode here (local); on Spark tasks writing Parquet themselves (spark); through the pulsarkit data "
        "source and Spark's writer (spark-sql); auto (default): spark with --master or above --spark-threshold",
    )
    p.add_argument("--master", help="Spark master URL for the Spark engines (default local[2])")
    p.add_argument(
        "--spark-threshold",
        type=int,
        default=SPARK_THRESHOLD,
        metavar="BYTES",
        help=f"--engine auto runs on Spark above this many planned bytes (default {SPARK_THRESHOLD})",
    )
    p.add_argument("--topic", action="append", help="only this topic (repeatable; its own marks are kept)")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.add_argument("--force", action="store_true", help="write into an existing directory that is not an export")
    p.add_argument("--other-source", action="store_true", help="continue an export made from another path")
    p.add_argument("--skip-unreadable", action="store_true", help="skip unreadable entries instead of stopping")
    p.add_argument("--max-partition-bytes", type=int, default=64 << 20, help="size of a read task (bytes)")
    p.add_argument(
        "--ledger-dir",
        action="append",
        dest="ledger_dirs",
        metavar="DIR",
        help="a bookie directory of a cluster whose metadata store is DATA_DIR's (repeat for each bookie): "
        "each entry is read once, from the first copy of its write set that verifies",
    )
    progress_arg(p)

    def run(args: argparse.Namespace) -> int:
        fmt, path = args.to
        summary = export(
            args.data_dir,
            fmt,
            path,
            engine=args.engine,
            master=args.master,
            topics=args.topic,
            force=args.force,
            other_source=args.other_source,
            skip_unreadable=args.skip_unreadable,
            progress=args.progress,
            max_partition_bytes=args.max_partition_bytes,
            ledger_dirs=args.ledger_dirs,
            spark_threshold=args.spark_threshold,
        )
        if args.json:
            print(json.dumps(summary))
        else:
            print(
                f"exported {summary['rows']} message(s) of {len(summary['topics'])} topic(s) to {summary['output']} "
                f"({fmt}, run {summary['run']}, {summary['seconds']} s)"
            )
        return EXIT_OK

    return run


__all__ = [
    "FILE_FIELDS",
    "MARKS_FILE",
    "SPARK_THRESHOLD",
    "ExportRefused",
    "choose_engine",
    "escape_path_name",
    "export",
    "spark_session",
]
