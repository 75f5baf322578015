"""``spark.read.format("pulsarkit-entrylog")``: a Python data source over BookKeeper entry logs.

One Spark partition per entry log; each partition yields Arrow record batches built natively by
:func:`pulsarkit.scan_entry_logs` (bookie digests verified in the same pass). Register it once per
session::

    from pulsarkit.spark import register
    register(spark)
    entries = (spark.read.format("pulsarkit-entrylog")
               .option("path", "/data/bookie/current")     # files or directories, comma-separated
               .option("digest_type", "CRC32C")            # or CRC32, MAC, DUMMY, AUTO
               .load())
    messages = pks.explode_messages(entries.where("issue IS NULL"), "payload", keep=["ledger_id", "entry_id"])

Scan issues (torn tails, corrupt regions) are rows with ``issue`` set, never silently skipped.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..bookkeeper.entrylog import entry_log_schema, find_entry_logs, scan_entry_logs
from .transforms import explode_messages

FORMAT_NAME = "pulsarkit-entrylog"


def _paths(options: Any) -> list[str]:
    raw = options.get("path") or options.get("paths") or ""
    return [p.strip() for p in raw.split(",") if p.strip()]


def _make_classes() -> tuple[type, type]:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class EntryLogPartition(InputPartition):
        def __init__(self, path: str, log_id: int) -> None:
            super().__init__((path, log_id))
            self.path, self.log_id = path, log_id

    class EntryLogReader(DataSourceReader):
        def __init__(self, options: Any) -> None:
            self.paths = _paths(options)
            if not self.paths:
                raise ValueError("pulsarkit-entrylog needs option 'path': entry log files or bookie directories")
            self.digest_type = options.get("digest_type", "CRC32C")
            self.password = options.get("password", "").encode()
            self.batch_rows = int(options.get("batch_rows", "8192"))

        def partitions(self) -> list[Any]:
            logs = find_entry_logs(self.paths)
            return [EntryLogPartition(str(p), i) for p, i in logs]

        def read(self, partition: Any) -> Any:
            # Spark matches the declared (nullable) schema exactly, so relax the native non-null fields.
            schema = _nullable(entry_log_schema())
            for batch in scan_entry_logs(
                [(partition.path, partition.log_id)],
                self.digest_type,
                self.password,
                batch_rows=self.batch_rows,
            ):
                yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)

    class EntryLogDataSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return FORMAT_NAME

        def schema(self) -> str:
            return _ddl(entry_log_schema())

        def reader(self, schema: Any) -> Any:
            return EntryLogReader(self.options)

    return EntryLogDataSource, EntryLogReader


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in schema])


def _ddl(schema: pa.Schema) -> str:
    names = {
        pa.int64(): "BIGINT",
        pa.int32(): "INT",
        pa.bool_(): "BOOLEAN",
        pa.string(): "STRING",
        pa.binary(): "BINARY",
    }
    return ", ".join(f"{f.name} {names[f.type]}" for f in schema)


def register(spark: Any) -> None:
    """Registers the ``pulsarkit-entrylog`` format with a Spark session."""
    source, _ = _make_classes()
    spark.dataSource.register(source)


def read_entries(spark: Any, paths: str | list[str], digest_type: str = "CRC32C", **options: str) -> Any:
    """A DataFrame of every entry record in the entry logs under ``paths``."""
    register(spark)
    reader = spark.read.format(FORMAT_NAME).option("path", ",".join([paths] if isinstance(paths, str) else paths))
    reader = reader.option("digest_type", digest_type)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def read_messages(spark: Any, paths: str | list[str], digest_type: str = "CRC32C", **kw: Any) -> Any:
    """Every message stored in the entry logs under ``paths``: entries scanned, digests verified,
    broker entry metadata peeked, batches decompressed and exploded, one row per message with its
    ``log_id``, ``ledger_id`` and ``entry_id``."""
    entries = read_entries(spark, paths, digest_type).where("issue IS NULL AND error IS NULL")
    return explode_messages(
        entries.select("log_id", "ledger_id", "entry_id", "payload"),
        "payload",
        keep=["log_id", "ledger_id", "entry_id"],
        **kw,
    )
