"""Topic audits on Spark: the dedup audit per producer (``applyInArrow``, the same Arrow code as
:func:`pulsarkit.analysis.audit.dedup_audit`), the time index per ledger and the clock-skew report
(:func:`clock_skew_report`: the single-process dict, its counts aggregated by Spark and its seeks
probing only the entries they read), over a DataFrame of entries with ``ledger_id``, ``entry_id`` and
a binary entry column (e.g. from the entry-log data source)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..analysis import audit as _audit
from ..errors import PulsarkitError
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


#: Below this many times the rows the seek rounds may fetch, a topic's rows are fetched at once.
_FETCH_ALL_FACTOR = 1


def _probe_bound(n: int, max_seek_samples: int) -> int:
    """About the most rows the seek rounds fetch: two searches per sample, each probing first and
    last, then bisecting (``log2 n`` probes)."""
    samples = len(range(0, n, max(1, n // max_seek_samples)))
    return 2 * samples * (n.bit_length() + 2)


def clock_skew_report(
    df: Any, threshold_ms: int = 60_000, max_seek_samples: int = 1000, entry_col: str = "entry"
) -> dict[str, Any]:
    """Exactly :func:`pulsarkit.analysis.audit.clock_skew_report` of the same entries. The counts and
    the per-producer skew are Spark aggregations. The seek comparison runs on the driver
    (:func:`pulsarkit.analysis.audit.seek_check`) over rows it fetches as it probes them: each entry
    gets its index in storage order (per-ledger counts give each ledger's first index, a window over
    the ledger the rest), then every round fetches, in one job, the entries the searches probe next,
    so the driver holds O(samples x log n) rows, never the topic; a topic with no more entries than
    that is fetched whole, sorted, in one job. (Entries with the same ledger and entry id, which a
    real topic does not have, may be ordered differently from the single process.)"""
    cols = ("producer_name", "ledger_id", "entry_id", "broker_timestamp", "publish_time")
    d = _decoded(df, entry_col).select(*cols).cache()  # decoded once for the several jobs below
    try:
        return _clock_skew_report(d, threshold_ms, max_seek_samples)
    finally:
        d.unpersist()


def _clock_skew_report(d: Any, threshold_ms: int, max_seek_samples: int) -> dict[str, Any]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    skew = F.col("publish_time") - F.col("broker_timestamp")
    skewed = F.col("broker_timestamp").isNotNull() & (F.abs(skew) > threshold_ms)
    totals = d.agg(
        F.count(F.lit(1)).alias("n"),
        F.count("broker_timestamp").alias("with_bt"),
        F.count(F.when(skewed, 1)).alias("skewed"),
    ).first()
    n, with_bt, n_skewed = int(totals["n"]), int(totals["with_bt"]), int(totals["skewed"])
    if not with_bt:
        return _audit.skew_report(n, 0, threshold_ms)
    by_producer = _audit.skew_by_producer(
        r.asDict()
        for r in d.where(skewed)
        .groupBy("producer_name")
        .agg(
            F.count(F.lit(1)).alias("skew_ms_count"),
            F.min(skew).alias("skew_ms_min"),
            F.max(skew).alias("skew_ms_max"),
        )
        .collect()
    )
    cols = ("ledger_id", "entry_id", "broker_timestamp", "publish_time")
    if n <= _FETCH_ALL_FACTOR * _probe_bound(n, max_seek_samples):
        # no more rows than the rounds would fetch: all of them, in storage order, in one job
        ordered = d.select(*cols).orderBy("ledger_id", "entry_id").collect()
        seeks, _ = _audit.seek_check(n, dict(enumerate(tuple(r) for r in ordered)), max_seek_samples)
        return _audit.skew_report(n, with_bt, threshold_ms, n_skewed, by_producer, seeks)
    counts = sorted((r["ledger_id"], r["count"]) for r in d.groupBy("ledger_id").count().collect())
    first, at = [], 0
    for lid, c in counts:
        first.append((lid, at))
        at += c
    starts = d.sparkSession.createDataFrame(first, "ledger_id long, first_index long")
    rank = F.row_number().over(Window.partitionBy("ledger_id").orderBy("entry_id"))
    indexed = (
        d.withColumn("k", rank - 1)
        .join(F.broadcast(starts), "ledger_id")
        .select((F.col("first_index") + F.col("k")).alias("k"), *cols)
        .cache()
    )
    try:
        rows: dict[int, _audit.SeekRow] = {}
        while True:
            seeks, needed = _audit.seek_check(n, rows, max_seek_samples)
            if seeks is not None:
                break
            got = indexed.where(F.col("k").isin(sorted(needed))).collect()
            if not got:  # cannot happen for 0 <= k < n; never loop on it
                raise PulsarkitError(f"clock-skew report: entries {sorted(needed)[:5]} have no storage-order index")
            for r in got:
                rows[int(r["k"])] = (r["ledger_id"], r["entry_id"], r["broker_timestamp"], r["publish_time"])
    finally:
        indexed.unpersist()
    return _audit.skew_report(n, with_bt, threshold_ms, n_skewed, by_producer, seeks)
