"""``spark.read.format("pulsarkit")``: the messages of Pulsar data directories, topic-aware, as a
consumer received them; ``format("pulsarkit-entries")``: their managed ledgers' raw entries.

::

    from pulsarkit import spark as pks
    spark = pks.local_session()                       # or pks.register(spark) on a cluster
    msgs = spark.read.format("pulsarkit").load("/pulsar/data")          # path: comma-separated dirs
    msgs.where("topic = 'persistent://public/default/orders' AND publish_time >= 1700000000000")
    raw = spark.read.format("pulsarkit-entries").load("/pulsar/data")   # topic, kind, ids, payload, error

Rows and columns equal :func:`pulsarkit.analysis.messages.read_message_rows` (``pulsarkit messages``),
the one message schema (:data:`~pulsarkit.scan.MESSAGE_FIELDS`): ``topic, partition,
ledger_id, entry_id, batch_index, key, properties, payload (binary), publish_time, event_time,
sequence_id, producer_name, null_value, encrypted, broker_timestamp, broker_index, txn_most_bits,
txn_least_bits, txn_state`` (``marker`` with ``markers=true``). Batches are split and codecs undone
in each task by the native kernels, one call per Arrow batch; the source yields Arrow batches, so
rows cross into the JVM once.

Partitions follow the data: (topic, ledger range) of about ``max_partition_bytes`` (default 64 MiB)
and at least ``min_partitions`` overall, planned on the driver from the metadata, the bookie's
location index and one native pass over the entry logs for transactions and chunked messages (see
:mod:`~pulsarkit.scan`). An empty data directory gives an empty DataFrame.

Options: ``path`` (comma-separated data directories), ``pushdown`` (below), ``txn`` (``committed``,
the default, or ``all``), ``markers``, ``system`` (also system topics), ``include_deleted`` (ledgers
no longer in their managed ledger whose entries the bookie still holds), ``max_partition_bytes``,
``min_partitions``, ``on_error`` (``skip`` an unreadable entry as ``pulsarkit messages`` does, or
``fail``; skipped entries are never silent: the driver logs a warning for entries the metadata claims
and no bookie holds, each task one with its count of unreadable entries and issues, also in
``stats_dir``'s task statistics), ``error_rows`` (``messages``: also one row per issue, with an
``error`` column, null in message rows; a run of missing entries is one row; ``pulsarkit-entries``
always has its ``error`` column), ``topics`` (a JSON list: only these), ``after``/``until`` (JSON ``{data_dir: {topic:
[ledger, entry]}}``: exclusive/inclusive bounds per topic, what ``pulsarkit export`` uses for its
high-water marks), ``batch_bytes`` (entry bytes decoded per native call, default 4 MiB: a task's
memory follows it, and so do the Arrow batches handed to the JVM), ``metadata_pass`` (``auto``,
``heads`` or ``scan``: how the driver reads the entries' metadata), ``ledger_dirs`` (comma-separated
bookie directories of a cluster whose metadata store is the one ``path``: each entry is read once, from
the first copy of its write set whose digest verifies, as ``pulsarkit replicas`` reads it; copies passed
over are counted in the read statistics and listed by ``pulsarkit replicas``), ``metadata_dir``,
``zookeeper_dir``, ``zookeeper_log_dir``, ``configuration_zookeeper_dir``, ``configuration_zookeeper_log_dir``,
``zxid``, ``journal_dirs``, ``index_dirs`` (a cluster's parts as :class:`~pulsarkit.scan.DataDirSpec` names
them, lists comma-separated: a ZooKeeper data directory read offline with the bookies' ``ledger_dirs``, and
no ``path``), ``decode`` (``bytes``, the default, or ``schema``: each payload decoded with its topic's schema into typed
``key``/``value`` columns, with ``schema_version`` and ``decode_error``, as
:mod:`pulsarkit.analysis.decoded` gives them; it needs ``topics`` of one schema and one data directory; Spark
keeps times in microseconds, so nanosecond values are truncated to them), ``stats_dir`` (a directory the
plan and each task write their :class:`~pulsarkit.scan.ReadStats` to as JSON, for
benchmarks and tests; :func:`read_stats` sums them).

Memory: a task holds about one batch of rows (``batch_bytes`` of entries, decompressed) at a time,
whatever the input size; a Python worker reading partitions stayed near 225-260 MB resident with 1 MiB
batches (``bench/spark_memory.py``: the same at 1 GB and 4 GB of entry logs); 4 MiB batches add about
40 MB. The JVM's share follows its heap setting (``spark.driver.memory`` in local mode,
``spark.executor.memory`` on a cluster), which Spark's Parquet writer and row conversion fill between
collections, not the input size.

Pushed down with ``.option("pushdown", "true")`` (Spark 4.1+ ``pushFilters``; :func:`register`
turns on ``spark.sql.python.filterPushdown.enabled``, which Spark requires of a source that can
push): on ``topic`` ``=``,
``IN``, ``LIKE 'prefix%'`` (topics not matching are never planned); on ``ledger_id`` ``= IN < <= >
>=`` (ledgers not matching are not read, except those holding earlier chunks of a message whose id
is in a matching one); on ``publish_time`` and ``broker_timestamp`` ``= IN < <= > >=``: the driver
reads the metadata of every entry of the selected topics (only the heads of the entries, at their
locations, when the topics are a small part of the directory) and the tasks read only the entries
one of whose rows can pass; exact, no assumption about clocks (a chunked message's chunks go
together; ledgers are not pruned by time alone: see :mod:`~pulsarkit.scan`). Each
pushed filter is applied exactly to the rows in the task, so Spark does not re-check it. Everything
else (``OR``, ``NOT``, other columns, nested expressions) stays with Spark. A query for one topic and
one hour of publish time out of a day reads about 1.1x the bytes of the entries holding its answer
(``bench/spark_filtered.py``).

Why opt-in: PySpark 4.3 keeps the plan of the last pushdown on the DataFrame's source
(``PythonDataSourceV2.readInfo``, set by ``PythonScanBuilder.pushFilters``) and reuses it for a later
query on the same DataFrame that has no filter Spark can hand to Python: ``df.where("ledger_id >=
5").count()`` then ``df.count()`` counts only ledgers >= 5. Without the option nothing is pruned, so
every query is right; with it, build a fresh ``spark.read...load()`` for each filtered query.

Column pruning: the Python Data Source API of PySpark 4.3 does not pass the columns a query needs;
give a schema with the columns you want (``.schema("topic string, ledger_id long, publish_time
long")``, any subset of the columns, any order) and only those are built and sent to the JVM (the
kernels still split every batch).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from typing import Any

import pyarrow as pa

from ..analysis.decoded import DECODE_MODES, decode_batch, decoded_fields, history_versions
from ..codec.schema import SchemaInfo, TopicSchema
from ..scan import (
    BATCH_BYTES,
    ENTRY_FIELDS,
    PUSHABLE,
    DataDirSpec,
    Filter,
    ReadStats,
    message_fields,
    plan,
    read_partition,
)
from ..scan.records import Issue
from . import datasource as _entrylog
from ._schema import spark_type

log = logging.getLogger(__name__)

FORMAT_NAME = "pulsarkit"
ENTRIES_FORMAT_NAME = "pulsarkit-entries"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

_SPARK_DDL = {
    pa.string(): "STRING",
    pa.int32(): "INT",
    pa.int64(): "BIGINT",
    pa.binary(): "BINARY",
    pa.bool_(): "BOOLEAN",
    pa.map_(pa.string(), pa.string()): "MAP<STRING, STRING>",
}


def _ddl(fields: list[tuple[str, Any]]) -> str:
    return ", ".join(f"{n} {_SPARK_DDL[t]}" for n, t in fields)


def _bool(v: Any) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def _marks(raw: str | None) -> dict[str, dict[str, tuple[int, int]]] | None:
    if not raw:
        return None
    return {d: {t: (int(p[0]), int(p[1])) for t, p in ts.items()} for d, ts in json.loads(raw).items()}


def _paths(options: Any) -> list[str]:
    raw = options.get("path") or options.get("paths") or ""
    return [p.strip() for p in str(raw).split(",") if p.strip()]


#: (column, Spark filter class name) -> our operator
_OPS = {
    "EqualTo": "=",
    "In": "in",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "StringStartsWith": "startswith",
}
_PUSHABLE = {
    "messages": PUSHABLE,
    "entries": {"topic": ("=", "in", "startswith"), "ledger_id": ("=", "in", ">", ">=", "<", "<=")},
}  # fmt: skip


def convert_filter(f: Any, kind: str, columns: list[str]) -> Filter | None:
    """Our form of a Spark data source filter, or None when it is not pushed."""
    op = _OPS.get(type(f).__name__)
    attr = getattr(f, "attribute", None)
    if op is None or attr is None or len(attr) != 1:
        return None
    col = attr[0]
    if col not in columns or op not in _PUSHABLE[kind].get(col, ()):
        return None
    value = f.value
    if op == "in":
        if any(v is None for v in value):
            return None
        value = frozenset(value)
    elif value is None:
        return None
    return (col, op, value)


def _make_classes(pushdown: bool = True) -> tuple[type, type]:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class ScanInputPartition(InputPartition):
        def __init__(self, scan: Any) -> None:
            super().__init__(None)
            self.scan = scan

    class _Reader(DataSourceReader):
        def __init__(self, kind: str, options: Any, schema: Any) -> None:
            self.kind = kind
            paths = _paths(options)
            # a cluster's parts (ZooKeeper or RocksDB metadata, bookie directories) come as options
            spec = DataDirSpec.from_options(paths[0] if len(paths) == 1 else None, options)
            if spec is not None and len(paths) > 1:
                raise ValueError(f"{FORMAT_NAME}: metadata and bookie directory options go with one path or none")
            self.paths: list[str | DataDirSpec] = [spec] if spec is not None else list(paths)
            if not self.paths:
                raise ValueError(
                    f"{FORMAT_NAME} needs a path: .load(DATA_DIR) or option('path', 'dir1,dir2'), or a cluster's "
                    "option('zookeeper_dir', DIR) (or 'metadata_dir') with option('ledger_dirs', 'dir1,dir2')"
                )
            self.txn = options.get("txn", "committed")
            self.markers = _bool(options.get("markers", "false"))
            self.system = _bool(options.get("system", "false"))
            self.include_deleted = _bool(options.get("include_deleted", "false"))
            self.max_partition_bytes = int(options.get("max_partition_bytes", str(64 << 20)))
            self.min_partitions = int(options.get("min_partitions", "2"))
            self.on_error = options.get("on_error", "skip")
            if self.on_error not in ("skip", "fail"):
                raise ValueError(f"on_error must be skip or fail, not {self.on_error!r}")
            self.batch_entries = int(options.get("batch_entries", "2048"))
            self.batch_bytes = int(options.get("batch_bytes", str(BATCH_BYTES)))
            self.pushdown = _bool(options.get("pushdown", "false"))
            topics = options.get("topics")
            self.topics = frozenset(json.loads(topics)) if topics else None
            self.after = _marks(options.get("after"))
            self.until = _marks(options.get("until"))
            self.stats_dir = options.get("stats_dir") or None
            self.metadata_pass = options.get("metadata_pass", "auto")
            # entries already carry their error; messages get error rows only when asked for
            self.error_rows = kind == "messages" and _bool(options.get("error_rows", "false"))
            # decode=schema: the topic's schema versions, read here on the driver, decode on the executors
            self.versions = _schema_versions(kind, options)
            fields = _fields(kind, self.markers, self.error_rows, self.versions)
            known = [n for n, _ in fields]
            self.columns = [f.name for f in schema.fields]
            unknown = [c for c in self.columns if c not in known]
            if unknown:
                raise ValueError(f"unknown columns {unknown} in the schema; {kind} has {known}")
            self.schema = schema
            self.filters: list[Filter] = []

        def partitions(self) -> list[Any]:
            p = plan(
                self.paths,
                kind=self.kind,
                txn=self.txn,
                include_system=self.system or self.kind == "entries",
                include_deleted=self.include_deleted,
                filters=self.filters + ([("topic", "in", self.topics)] if self.topics is not None else []),
                after=self.after,
                until=self.until,
                max_partition_bytes=self.max_partition_bytes,
                min_partitions=self.min_partitions,
                metadata_pass=self.metadata_pass,
            )
            _write_stats(self.stats_dir, "plan", p.read_stats)
            gaps = [g for q in p.partitions for g in q.gaps]
            if gaps:
                log.warning(
                    "pulsarkit: %d entries in %d run(s) are claimed by ledger metadata but held by no bookie "
                    "(first: ledger %d entries %d..%d); on_error=%s",
                    sum(b - a + 1 for _, a, b in gaps),
                    len(gaps),
                    *gaps[0],
                    self.on_error,
                )
            return [ScanInputPartition(t) for t in p.tasks()]

        def read(self, partition: Any) -> Any:
            from pyspark.sql.pandas.types import to_arrow_schema

            target = to_arrow_schema(self.schema, timezone="UTC")
            stats = ReadStats()
            columns: list[str] | None = [c for c in self.columns if c != "error"] if self.error_rows else self.columns
            ts = TopicSchema(self.versions) if self.versions is not None else None
            if ts is not None:
                columns = None  # the decoding reads the message columns it needs
            issues: list[tuple[Any, ...]] = []
            for part in getattr(partition, "scan", None) or []:

                def on_issue(found: Issue, /, at: Any = part) -> None:
                    if self.error_rows:
                        n, message = found.count, found.message
                        more = f" ({n} entries)" if n > 1 and f"({n} entries)" not in message else ""
                        issues.append(
                            (at.topic, at.partition, found.ledger_id, found.entry_id, f"{found.kind}: {message}{more}")
                        )

                for b in read_partition(
                    part,
                    prefetch=0,  # Spark runs a task on every core: a read-ahead thread would only contend
                    threads=1,  # nor a second decompressing one
                    kind=self.kind,
                    columns=columns,
                    txn=self.txn,
                    markers=self.markers,
                    filters=self.filters,
                    on_error=self.on_error,
                    batch_entries=self.batch_entries,
                    batch_bytes=self.batch_bytes,
                    stats=stats,
                    on_issue=on_issue,
                ):
                    if ts is not None:
                        # Spark's times are microseconds: nanosecond values are truncated to them
                        yield _to_target(decode_batch(b, ts), target, safe=False)
                    else:
                        yield _to_target(b, target)
                    if issues:
                        yield _error_batch(issues, target)
                        issues.clear()
                if issues:
                    yield _error_batch(issues, target)
                    issues.clear()
            if stats.unreadable_entries or stats.issues:
                # the task's summary where Spark keeps a task's output (the executor's log)
                log.warning(
                    "pulsarkit: %d unreadable entries, %d issues in this task (on_error=%s%s)",
                    stats.unreadable_entries,
                    stats.issues,
                    self.on_error,
                    "" if self.error_rows or self.kind == "entries" else "; error_rows=true shows them as rows",
                )
            _write_stats(self.stats_dir, "task", stats)

    class _PushdownReader(_Reader):
        def pushFilters(self, filters: list[Any]) -> Any:
            for f in filters:
                ours = convert_filter(f, self.kind, self.columns) if self.pushdown else None
                if ours is None:
                    yield f
                else:
                    self.filters.append(ours)

    reader_cls = _PushdownReader if pushdown else _Reader

    class PulsarkitMessages(DataSource):
        """Messages of Pulsar data directories (see :mod:`pulsarkit.spark.messages_source`)."""

        @classmethod
        def name(cls) -> str:
            return FORMAT_NAME

        def schema(self) -> Any:
            o = self.options
            markers, error_rows = _bool(o.get("markers", "false")), _bool(o.get("error_rows", "false"))
            versions = _schema_versions("messages", o)
            if versions is None:
                return _ddl(_fields("messages", markers, error_rows))
            from pyspark.sql.types import StructField, StructType

            fields = _fields("messages", markers, error_rows, versions)
            return StructType([StructField(n, spark_type(t)) for n, t in fields])

        def reader(self, schema: Any) -> Any:
            return reader_cls("messages", self.options, schema)

    class PulsarkitEntries(DataSource):
        """Raw entries of the managed ledgers of Pulsar data directories."""

        @classmethod
        def name(cls) -> str:
            return ENTRIES_FORMAT_NAME

        def schema(self) -> str:
            return _ddl(ENTRY_FIELDS)

        def reader(self, schema: Any) -> Any:
            return reader_cls("entries", self.options, schema)

    return PulsarkitMessages, PulsarkitEntries


def _fields(
    kind: str, markers: bool, error_rows: bool, versions: list[tuple[SchemaInfo, bool]] | None = None
) -> list[tuple[str, Any]]:
    """The source's columns: the messages' (with ``error`` when error rows are asked for; decoded with the topic's
    schema when ``versions`` are given), or the entries'."""
    if kind == "entries":
        return list(ENTRY_FIELDS)
    rows = message_fields(markers) if versions is None else decoded_fields(TopicSchema(versions), markers)
    return [*rows, *([("error", pa.string())] if error_rows else [])]


def _schema_versions(kind: str, options: Any) -> list[tuple[SchemaInfo, bool]] | None:
    """``decode=schema``: the schema versions of the ``topics`` read (one schema), from the one data directory."""
    decode = options.get("decode", "bytes")
    if decode not in DECODE_MODES:
        raise ValueError(f"decode must be one of {DECODE_MODES}, not {decode!r}")
    if decode == "bytes" or kind != "messages":
        return None
    topics = json.loads(options.get("topics") or "[]")
    paths = _paths(options)
    spec = DataDirSpec.from_options(paths[0] if len(paths) == 1 else None, options)
    if not topics or (spec is None and len(paths) != 1):
        raise ValueError(f"{FORMAT_NAME}: decode=schema reads one data directory's topics of one schema (topics)")
    with (spec or DataDirSpec.of(paths[0])).open() as dd:
        return history_versions(dd, topics)


def _to_target(b: pa.RecordBatch, target: pa.Schema, safe: bool = True) -> pa.RecordBatch:
    """A batch of the read's columns as the query's schema (an ``error`` column not read: all null)."""
    cols = []
    for f in target:
        i = b.schema.get_field_index(f.name)
        c = b.column(i) if i >= 0 else pa.nulls(b.num_rows, f.type)
        cols.append(c if c.type == f.type else c.cast(f.type, safe=safe))
    return pa.RecordBatch.from_arrays(cols, schema=target)


def _error_batch(issues: list[tuple[Any, ...]], target: pa.Schema) -> pa.RecordBatch:
    """One row per issue (``error_rows=true``): topic, partition, ledger, entry and the error; the rest null."""
    known = dict(zip(("topic", "partition", "ledger_id", "entry_id", "error"), zip(*issues, strict=True)))
    cols = [pa.array(list(known[f.name]), f.type) if f.name in known else pa.nulls(len(issues), f.type) for f in target]
    return pa.RecordBatch.from_arrays(cols, schema=target)


def _write_stats(directory: str | None, what: str, stats: ReadStats) -> None:
    """One JSON file of read statistics in ``directory`` (the ``stats_dir`` option), if given."""
    if not directory:
        return
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{what}-{uuid.uuid4().hex}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(stats.as_dict(), f)
    os.replace(path + ".tmp", path)


def read_stats(directory: str) -> dict[str, ReadStats]:
    """The statistics the reads with ``stats_dir=directory`` wrote, summed: ``plan`` (the driver's
    metadata pass) and ``tasks`` (the partitions' reads)."""
    out = {"plan": ReadStats(), "tasks": ReadStats()}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                out["plan" if name.startswith("plan-") else "tasks"].add(ReadStats(**json.load(f)))
    return out


def register(spark: Any, pushdown: bool = True) -> None:
    """Registers ``pulsarkit``, ``pulsarkit-entries`` and ``pulsarkit-entrylog`` with a session.

    With ``pushdown`` (the default) it also sets ``spark.sql.python.filterPushdown.enabled`` for the
    session, without which Spark refuses a Python source that pushes filters; ``pushdown=False``
    registers the sources without filter pushdown and leaves the setting alone."""
    _entrylog.register(spark)
    if pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")
    for source in _make_classes(pushdown):
        spark.dataSource.register(source)


def read_data_dirs(spark: Any, paths: str | list[str], **options: Any) -> Any:
    """``spark.read.format("pulsarkit")`` over ``paths`` with ``options`` (values turned to strings;
    dicts to JSON); ``min_partitions`` defaults to the session's default parallelism."""
    register(spark)
    options.setdefault("min_partitions", spark.sparkContext.defaultParallelism)
    r = spark.read.format(FORMAT_NAME)
    for k, v in options.items():
        r = r.option(k, json.dumps(v) if isinstance(v, dict) else str(v).lower() if isinstance(v, bool) else str(v))
    return r.load(",".join([paths] if isinstance(paths, str) else [str(p) for p in paths]))


__all__ = [
    "ENTRIES_FORMAT_NAME",
    "FORMAT_NAME",
    "PUSHDOWN_CONF",
    "convert_filter",
    "read_data_dirs",
    "read_stats",
    "register",
]
