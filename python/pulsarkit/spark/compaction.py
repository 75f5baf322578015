"""Topic compaction on Spark, for topics larger than one machine's memory, with exactly the
single-process result (:class:`pulsarkit.broker.compaction.Compactor`).

Input: a DataFrame of one topic's entries in reading order, with ``ledger_id``, ``entry_id`` and a
binary ``entry`` column (e.g. the topic's ledgers from the entry-log data source, or the compacted
view's entries). Phase one is a distributed aggregation: the native kernel gives every message's key,
position and size, then the latest position per key wins (``max`` of the position, or of the event
time with ``event_time_order``); a latest message with an empty payload is a tombstone and retains
nothing. Phase two joins the retained positions back to their entries and rewrites each entry in a
native call per Arrow batch, partition by partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from .. import _native
from ..broker.compaction import CompactionOptions

_KEYS_SCHEMA = (
    "ledger_id long, entry_id long, batch_index int, key string, payload_size long, event_time long, error string"
)


class _Keys:
    """``mapInArrow``: one row per message (phase one's input), positions carried from the entry."""

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            out = _native.bulk_compaction_keys(b.column("entry"))
            idx = out.column("entry_index")
            yield pa.RecordBatch.from_arrays(
                [
                    b.column("ledger_id").take(idx),
                    b.column("entry_id").take(idx),
                    out.column("batch_index"),
                    out.column("key"),
                    out.column("payload_size"),
                    out.column("event_time"),
                    out.column("error"),
                ],
                names=["ledger_id", "entry_id", "batch_index", "key", "payload_size", "event_time", "error"],
            )


def compaction_keys(df: Any) -> Any:
    """One row per message: ``ledger_id``, ``entry_id``, ``batch_index`` (-1 for an entry taken
    whole), ``key``, ``payload_size`` (0 = tombstone), ``event_time``, ``error``."""
    return df.select("ledger_id", "entry_id", "entry").mapInArrow(_Keys(), _KEYS_SCHEMA)


def latest_for_key(df: Any, event_time_order: bool = False) -> Any:
    """Phase one: per key its latest message (``key``, ``ledger_id``, ``entry_id``, ``batch_index``,
    ``payload_size``); tombstones are kept in this result (``payload_size`` 0) so reports can count them.
    An entry that does not decode fails the job, as it fails Pulsar's compaction run."""
    from pyspark.sql import functions as F

    keys = compaction_keys(df)
    bad = keys.where(F.col("error").isNotNull()).limit(1).collect()
    if bad:
        raise ValueError(f"entry {bad[0]['ledger_id']}:{bad[0]['entry_id']} does not decode: {bad[0]['error']}")
    order = ["event_time"] if event_time_order else []
    latest = (
        keys.where(F.col("key").isNotNull())
        .groupBy("key")
        .agg(F.max(F.struct(*order, "ledger_id", "entry_id", "batch_index", "payload_size")).alias("m"))
    )
    return latest.select(
        "key", "m.ledger_id", "m.entry_id", "m.batch_index", F.col("m.payload_size").alias("payload_size")
    )


class _PhaseTwo:
    def __init__(self, options: CompactionOptions) -> None:
        self.options = options

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            kept = b.column("kept")
            if not pa.types.is_list(kept.type) or kept.type.value_type != pa.int32():
                kept = kept.cast(pa.list_(pa.int32()))
            out = _native.bulk_compact_by_indexes(
                b.column("entry"),
                b.column("ledger_id").cast(pa.int64()),
                b.column("entry_id").cast(pa.int64()),
                kept,
                partition=self.options.partition,
                retain_null_key=self.options.retain_null_key,
                retained_only=self.options.retained_only,
            )
            yield pa.RecordBatch.from_arrays(
                [b.column("ledger_id"), b.column("entry_id"), out.column("raw_message"), out.column("error")],
                names=["ledger_id", "entry_id", "raw_message", "error"],
            )


def compact(df: Any, options: CompactionOptions | None = None) -> Any:
    """Both phases: the compacted ledger's entries (``ledger_id``, ``entry_id``, ``raw_message``), in
    position order, exactly those the single-process compactor writes."""
    from pyspark.sql import functions as F

    options = options or CompactionOptions()
    retained = latest_for_key(df, options.event_time_order).where(F.col("payload_size") > 0)
    kept = retained.groupBy("ledger_id", "entry_id").agg(F.collect_list("batch_index").alias("kept"))
    joined = df.select("ledger_id", "entry_id", "entry").join(kept, ["ledger_id", "entry_id"], "left")
    out = joined.mapInArrow(
        _PhaseTwo(options),
        "ledger_id long, entry_id long, raw_message binary, error string",
    )
    bad = out.where(F.col("error").isNotNull()).limit(1).collect()
    if bad:
        raise ValueError(bad[0]["error"])
    return (
        out.where(F.col("raw_message").isNotNull())
        .select("ledger_id", "entry_id", "raw_message")
        .orderBy("ledger_id", "entry_id")
    )


def key_report(df: Any, event_time_order: bool = False) -> dict[str, int]:
    """Key and tombstone analytics of a topic: messages, keyless messages, keys, live keys,
    tombstoned keys, and the payload bytes compaction would reclaim (every message but the live latest)."""
    from pyspark.sql import functions as F

    keys = compaction_keys(df).where(F.col("error").isNull()).cache()
    latest = latest_for_key(df, event_time_order)
    totals = keys.agg(
        F.count("*").alias("messages"),
        F.sum(F.when(F.col("key").isNull(), 1).otherwise(0)).alias("keyless"),
        F.coalesce(F.sum("payload_size"), F.lit(0)).alias("bytes"),
    ).first()
    per_key = latest.agg(
        F.count("*").alias("keys"),
        F.sum(F.when(F.col("payload_size") > 0, 1).otherwise(0)).alias("live_keys"),
        F.coalesce(F.sum(F.when(F.col("payload_size") > 0, F.col("payload_size"))), F.lit(0)).alias("live_bytes"),
    ).first()
    keys.unpersist()
    return {
        "messages": int(totals["messages"]),
        "keyless_messages": int(totals["keyless"] or 0),
        "keys": int(per_key["keys"]),
        "live_keys": int(per_key["live_keys"] or 0),
        "tombstoned_keys": int(per_key["keys"]) - int(per_key["live_keys"] or 0),
        "payload_bytes": int(totals["bytes"]),
        "reclaimable_bytes": int(totals["bytes"]) - int(per_key["live_bytes"]),
    }


__all__ = ["compact", "compaction_keys", "key_report", "latest_for_key"]
