"""A run's data files before its commit: message batches written as Parquet, one file per (topic,
date) in Hive-style folders named as Spark names them, under ``OUT/_staging/<run>/``. Every target
commits from here (Parquet by renaming the files into place, Delta and Iceberg by appending them), and
every engine writes here (this process through :meth:`Target.write`, Spark tasks in ``task-<n>/``)."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..codec.columns import scalar
from ..lazy import deferred
from ..scan import MESSAGE_FIELDS, arrow_schema
from ..scan.schema import RowGroups, parquet_options
from .paths import PRIVATE_DIR, short_name
from .protocol import ExportRefused

pc = deferred("pyarrow.compute")

PARTITION_COLUMNS = ("topic", "date")
#: the columns of the data files (the partition columns are in the directory names)
FILE_FIELDS = [(n, t) for n, t in MESSAGE_FIELDS if n != "topic"]
#: the columns of a table target (Delta, Iceberg): every message column and ``date`` (``YYYY-MM-DD``)
TABLE_FIELDS = [*MESSAGE_FIELDS, ("date", pa.string())]
DAY_MS = 86_400_000
# compute arguments made without pa.scalar, which imports pandas when installed (codec.columns says why)
_DAY, _DAY_F = scalar(DAY_MS, pa.int64()), scalar(float(DAY_MS), pa.float64())
#: the footer metadata key naming the topic of a data file in a shortened partition directory
TOPIC_KEY = b"pulsarkit.topic"

# Spark's ExternalCatalogUtils.escapePathName: these characters become %XX in partition directories.
# NUL too, which Spark leaves as it is: no file system takes it in a name, and %00 reads back as NUL.
_ESCAPE = {chr(c) for c in range(0, 0x20)} | set("\"#%'*/:=?\\\x7f{[]^")


def escape_path_name(value: str) -> str:
    """A partition value as Spark writes it in a directory name (``topic=persistent%3A%2F%2F...``)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in value)


def topic_dir(topic: str) -> str:
    """A topic's partition directory name: Spark's, or shortened with a hash when too long for a file name."""
    return short_name("topic=", escape_path_name(topic))


def with_date(b: pa.RecordBatch) -> pa.RecordBatch:
    """``date``: the UTC day of ``publish_time`` as ``YYYY-MM-DD`` (formatted once per distinct day)."""
    days = pc.floor(pc.divide(b.column("publish_time").cast(pa.float64()), _DAY_F)).cast(pa.int64())
    uniq = pc.unique(days)
    labels = pc.strftime(pc.multiply(uniq, _DAY).cast(pa.timestamp("ms")), format="%Y-%m-%d")
    return b.append_column("date", labels.take(pc.index_in(days, value_set=uniq)))


class StagingWriter:
    """Message batches (the scan's columns) into ``directory/topic=.../date=.../part-00000.parquet``,
    one open writer per (topic, date) until :meth:`close`, in row groups of about ``ROW_GROUP_BYTES``
    (:class:`pulsarkit.scan.schema.RowGroups`; only the (topic, date) being written holds rows back, so at
    most one row group's rows are buffered)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.schema = arrow_schema(FILE_FIELDS)
        self._writers: dict[tuple[str, str], pq.ParquetWriter] = {}
        self._groups: dict[tuple[str, str], RowGroups] = {}
        self._current: tuple[str, str] | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        # rows decoded with their topic's schema (``decode="schema"``) keep their own columns
        own = batch.schema.names != [n for n, _ in MESSAGE_FIELDS]
        file_schema = pa.schema([f for f in batch.schema if f.name != "topic"]) if own else self.schema
        t = pa.Table.from_batches([with_date(batch)])
        topics, dates = pc.unique(t.column("topic")), pc.unique(t.column("date"))
        if len(topics) == 1 and len(dates) == 1:  # the usual case: one topic and day per batch
            groups = [{"t": topics[0].as_py(), "d": dates[0].as_py()}]
        else:  # in order of first appearance (not group_by: it imports pandas, codec.columns says why)
            pairs = dict.fromkeys(zip(t.column("topic").to_pylist(), t.column("date").to_pylist(), strict=True))
            groups = [{"t": a, "d": b} for a, b in pairs]
        for g in groups:
            if len(groups) == 1:  # nothing to copy
                rows = t.select(file_schema.names)
            else:
                m = pc.and_(
                    pc.equal(t.column("topic"), scalar(g["t"], pa.string())),
                    pc.equal(t.column("date"), scalar(g["d"], pa.string())),
                )
                rows = t.filter(m).select(file_schema.names)
            w = self._writers.get((g["t"], g["d"]))
            if w is None:
                name = topic_dir(g["t"])
                d = self.directory / name / f"date={escape_path_name(g['d'])}"
                d.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
                schema = file_schema
                if name != "topic=" + escape_path_name(g["t"]):  # shortened: the file names its topic
                    schema = schema.with_metadata({TOPIC_KEY: g["t"].encode("utf-8", "surrogatepass")})
                w = self._writers[(g["t"], g["d"])] = pq.ParquetWriter(
                    d / "part-00000.parquet", schema, **parquet_options(schema, rows)
                )
                self._groups[(g["t"], g["d"])] = RowGroups(w)
            key = (g["t"], g["d"])
            if self._current is not None and self._current != key:
                self._groups[self._current].flush()
            self._current = key
            self._groups[key].add(rows.cast(w.schema))

    def close(self) -> None:
        writers, groups, self._writers, self._groups, self._current = self._writers, self._groups, {}, {}, None
        failed: BaseException | None = None
        for key, w in writers.items():
            try:
                groups[key].flush()  # waits for its writing thread even when it raises
            except BaseException as e:
                failed = failed or e
            finally:
                w.close()
        if failed is not None:
            raise failed


def staged_files(staging: Path) -> list[Path]:
    """The data files of a run: this process's, each Spark task's (``task-*``), Spark's writer's."""
    if not staging.exists():
        return []
    found = [*staging.glob("topic=*/date=*/*.parquet"), *staging.glob("task-*/topic=*/date=*/*.parquet")]
    return sorted(f for f in found if not f.name.startswith((".", "_")))


def partition_dir(f: Path) -> Path:
    """``topic=.../date=...`` of a staged file."""
    return Path(f.parent.parent.name) / f.parent.name


def partition_values(f: Path) -> tuple[str, str]:
    """The topic and date of a data file, from its directory names (or, shortened, the file's metadata)."""
    date = urllib.parse.unquote(f.parent.name[len("date=") :])
    meta = pq.read_schema(f).metadata or {}
    if TOPIC_KEY in meta:
        return meta[TOPIC_KEY].decode("utf-8", "surrogatepass"), date
    return urllib.parse.unquote(f.parent.parent.name[len("topic=") :]), date


def rows_by_topic(files: list[Path]) -> dict[str, int]:
    """Rows per topic of staged files (from their Parquet footers)."""
    rows: dict[str, int] = {}
    for f in files:
        topic = partition_values(f)[0]
        rows[topic] = rows.get(topic, 0) + pq.read_metadata(f).num_rows
    return rows


def staged_table(files: list[Path], decoded: pa.Schema | None = None) -> pa.Table:
    """The staged files as one table: message rows as :data:`TABLE_FIELDS`, decoded rows (``--decode schema``)
    with their own columns, ``topic`` first and ``date`` last (both from the folder names); no files: an empty
    table of the ``decoded`` columns if given. Decoded files of different schemas are refused: a table has one."""
    schema = arrow_schema(TABLE_FIELDS)
    if not files and decoded is not None:
        return decoded.empty_table()
    tables: list[pa.Table] = []
    for f in files:
        t = pq.read_table(f)
        topic, date = partition_values(f)
        t = t.add_column(0, "topic", pa.array([topic] * t.num_rows, pa.string()))
        t = t.append_column("date", pa.array([date] * t.num_rows, pa.string()))
        if "decode_error" not in t.schema.names:
            t = t.select(schema.names).cast(schema)
        elif tables and t.schema.remove_metadata() != tables[0].schema:
            raise ExportRefused(f"topics {tables[0]['topic'][0]} and {topic} decode to different table schemas")
        tables.append(t.replace_schema_metadata(None))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def shortened_topics(staged: list[Path]) -> set[str]:
    """The topics of staged files in shortened partition directories (their names too long in full):
    what the Delta and Iceberg writers, which name the directories themselves, cannot write."""
    return {partition_values(f)[0] for f in staged if TOPIC_KEY in (pq.read_schema(f).metadata or {})}
