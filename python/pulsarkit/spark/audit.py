"""Topic audits on Spark: the dedup audit per producer (``applyInArrow``, the same Arrow code as
:func:`pulsarkit.audit.dedup_audit`) and the time index per ledger, over a DataFrame of entries
with ``ledger_id``, ``entry_id`` and a binary entry column (e.g. from the entry-log data source)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..analysis import audit as _audit
from ._schema import spark_fields
from .transforms import decode_metadata

_AUDIT_INPUT = [
    "producer_name",
    "ledger_id",
    "entry_id",
    "sequence_id",
    "highest_sequence_id",
    "num_messages",
]


def _struct(schema: pa.Schema) -> Any:
    from pyspark.sql.types import StructType

    return StructType(spark_fields(schema))


def _decoded(df: Any, entry_col: str) -> Any:
    if "producer_name" in df.columns:
        return df
    return decode_metadata(df, entry_col)


def dedup_audit(df: Any, entry_col: str = "entry") -> tuple[Any, Any]:
    """(findings, summary) DataFrames: per producer, persisted duplicates and sequence gaps (batch
    ranges aware), plus undecodable entries as ``unreadable`` findings."""
    from pyspark.sql import functions as F

    d = _decoded(df, entry_col)
    unreadable = d.where(F.col("error").isNotNull()).select(
        F.lit(None).cast("string").alias("producer_name"),
        F.lit("unreadable").alias("kind"),
        *[F.lit(None).cast("long").alias(c) for c in ("first_sequence_id", "last_sequence_id", "messages")],
        F.col("ledger_id").cast("long"),
        F.col("entry_id").cast("long"),
        F.lit(None).cast("long").alias("previous_ledger_id"),
        F.lit(None).cast("long").alias("previous_entry_id"),
    )
    good = d.where(F.col("error").isNull()).select(*_AUDIT_INPUT)

    def findings(t: pa.Table) -> pa.Table:
        f, _ = _audit.audit_producer(t)
        return pa.Table.from_pylist(f, _audit.AUDIT_SCHEMA)

    def summary(t: pa.Table) -> pa.Table:
        _, s = _audit.audit_producer(t)
        return pa.Table.from_pylist([s], _audit.SUMMARY_SCHEMA)

    grouped = good.groupBy("producer_name")
    found = grouped.applyInArrow(findings, _struct(_audit.AUDIT_SCHEMA)).unionByName(unreadable)
    return found, grouped.applyInArrow(summary, _struct(_audit.SUMMARY_SCHEMA))


def time_index(df: Any, entry_col: str = "entry") -> tuple[Any, Any]:
    """(per entry, per ledger) DataFrames: broker timestamp, publish time and the entry timestamp seek
    uses (broker time when present), with per-ledger min/max and counts."""
    from pyspark.sql import functions as F

    d = _decoded(df, entry_col)
    entries = d.select(
        "ledger_id",
        "entry_id",
        "broker_timestamp",
        "publish_time",
        F.coalesce("broker_timestamp", "publish_time").alias("entry_timestamp"),
    )
    per_ledger = entries.groupBy("ledger_id").agg(
        F.count("entry_id").alias("entries"),
        *[
            getattr(F, fn)(c).alias(f"{c}_{fn}")
            for c in ("broker_timestamp", "publish_time", "entry_timestamp")
            for fn in ("min", "max")
        ],
    )
    return entries, per_ledger


def clock_skew(df: Any, threshold_ms: int = 60_000, entry_col: str = "entry") -> Any:
    """Entries whose publish time and broker time differ by more than ``threshold_ms``."""
    from pyspark.sql import functions as F

    d = _decoded(df, entry_col)
    return (
        d.where(F.col("broker_timestamp").isNotNull())
        .select(
            "producer_name",
            "ledger_id",
            "entry_id",
            "publish_time",
            "broker_timestamp",
            (F.col("publish_time") - F.col("broker_timestamp")).alias("skew_ms"),
        )
        .where(F.abs(F.col("skew_ms")) > threshold_ms)
    )
