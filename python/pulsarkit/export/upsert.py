"""Keyed topics as upsert tables (``export --mode upsert``): each topic's latest message per key, with
Pulsar topic compaction's rules, at the run's position.

The rules are not restated here: the retained messages are those of compaction's phase one, the native
``LatestForKey`` over the topic's compacted view up to the run's mark (:func:`pulsarkit.analysis.compaction.phase_one`,
what ``pulsarkit compacted`` and the compactor use): a message with a null value, or an empty payload, deletes
its key; a message without a key is not retained (compaction's default, ``topicCompactionRetainNullKey=false``).
The rows are the export's own read of the topic, kept only at the retained positions (:func:`keep_retained`).

Each run recomputes the state of every topic whose mark moved (reading the topic from its start) and
replaces that topic's rows: Parquet writes the new snapshot's files and lists them in the marks file at
the commit point, then deletes the files it replaced (a run that dies in between leaves them, and the
next run deletes them); Delta MERGEs the snapshot by (``topic``, ``key``) in one commit carrying the
marks: a key whose message did not change is not rewritten, a new key is inserted, a deleted key is
deleted; Iceberg, in one catalog commit, deletes the keys no longer in the snapshot and upserts by
(``topic``, ``key``), which rewrites only the rows whose message changed (copy-on-write). A rerun
after new messages or a tombstone therefore changes exactly those keys. Rows decoded with their topic's schema
(``--decode schema``) are kept by the same message key (:func:`merge_key`)."""

from __future__ import annotations

import pyarrow as pa

from ..analysis.compaction import phase_one
from ..managed_ledger.position import Position
from ..scan import DataDir
from .marks import Mark

MODES = ("append", "upsert")
#: the targets that take ``--mode upsert``
UPSERT_TARGETS = ("parquet", "delta", "iceberg")

Positions = frozenset[tuple[int, int, int]]


def retained(dd: DataDir, topic: str, until: Mark) -> Positions:
    """The positions (ledger, entry, batch index; -1: an entry taken whole) of ``topic``'s latest message
    per key up to ``until`` (inclusive), tombstoned keys left out: compaction's phase one."""
    if until.entry_id < 0 and until.ledger_id < 0:
        return frozenset()
    r = phase_one(dd, topic, up_to=Position(*until), view=True).retained()
    return frozenset(
        zip(r.column("ledger_id").to_pylist(), r.column("entry_id").to_pylist(), r.column("batch_index").to_pylist())
    )


def keep_retained(batch: pa.RecordBatch, positions: Positions) -> pa.RecordBatch:
    """The rows of ``batch`` at ``positions``."""
    ids = zip(
        batch.column("ledger_id").to_pylist(),
        batch.column("entry_id").to_pylist(),
        batch.column("batch_index").to_pylist(),
    )
    return batch.filter(pa.array([p in positions for p in ids], pa.bool_()))


def merge_key(columns: list[str]) -> str:
    """The column holding the message key a row is kept by: ``key``, or for a ``KEY_VALUE`` topic's decoded rows
    (``--decode schema``, ``key`` the typed key) ``partition_key``, the message's own key, which compaction keys by."""
    return "partition_key" if "partition_key" in columns else "key"


def merge_predicate(topics: set[str]) -> str:
    """The SQL condition naming the topics whose rows a Delta MERGE may delete (the snapshot's topics)."""
    quoted = ", ".join("'" + t.replace("'", "''") + "'" for t in sorted(topics))
    return f"t.topic IN ({quoted})"


def changed_predicate() -> str:
    """A matched key is rewritten only when its latest message is another one."""
    return " OR ".join(f"t.{c} <> s.{c}" for c in ("ledger_id", "entry_id", "batch_index"))


__all__ = [
    "MODES",
    "UPSERT_TARGETS",
    "changed_predicate",
    "keep_retained",
    "merge_key",
    "merge_predicate",
    "retained",
]
