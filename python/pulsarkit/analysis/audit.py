"""Bulk checks over a topic's entries, on Arrow tables (and, through :mod:`pulsarkit.spark`, on Spark):

- :func:`dedup_audit`: per producer, sequence gaps and duplicates that were *persisted*, aware of
  batch ranges (``sequence_id..highest_sequence_id``, or ``num_messages`` when the client did not
  set the highest id, as the C++ client does not);
- :func:`time_index`: broker timestamp and publish time per entry, with per-ledger min/max;
- :func:`clock_skew_report`: entries whose publish time disagrees with the broker time by more
  than a threshold, and whether a seek by publish time would land elsewhere than a seek by broker time.

Inputs are tables with ``ledger_id``, ``entry_id`` and either an ``entry`` column of stored bytes or
the columns :func:`pulsarkit.bulk.decode_metadata` produces.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from .. import bulk
from ..broker.finder import EntrySpace, LedgerSpan, find_newest_matching
from ..lazy import deferred

pc = deferred("pyarrow.compute")

AUDIT_SCHEMA = pa.schema(
    [
        ("producer_name", pa.string()),
        ("kind", pa.string()),  # "duplicate" | "gap"
        ("first_sequence_id", pa.int64()),
        ("last_sequence_id", pa.int64()),
        ("messages", pa.int64()),
        ("ledger_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("previous_ledger_id", pa.int64()),
        ("previous_entry_id", pa.int64()),
    ]
)

SUMMARY_SCHEMA = pa.schema(
    [
        ("producer_name", pa.string()),
        ("entries", pa.int64()),
        ("messages", pa.int64()),
        ("first_sequence_id", pa.int64()),
        ("last_sequence_id", pa.int64()),
        ("duplicate_entries", pa.int64()),
        ("duplicate_messages", pa.int64()),
        ("gaps", pa.int64()),
        ("missing_messages", pa.int64()),
    ]
)


def _decoded(table: Any) -> pa.Table:
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if "producer_name" in table.column_names:
        return table
    meta = bulk.decode_metadata(table.column("entry").combine_chunks())
    meta = pa.Table.from_batches([meta]) if isinstance(meta, pa.RecordBatch) else meta
    for name in meta.column_names:
        table = table.append_column(name, meta.column(name))
    return table


def _ranges(t: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    seq = t.column("sequence_id").to_numpy(zero_copy_only=False).astype(np.int64)
    hi = t.column("highest_sequence_id").to_numpy(zero_copy_only=False).astype(np.int64)
    n = t.column("num_messages").to_numpy(zero_copy_only=False).astype(np.int64)
    # The Java producer sets highest_sequence_id for batches; the C++ one leaves it 0.
    end = np.where(hi > seq, hi, seq + np.maximum(n, 1) - 1)
    return seq, end


def audit_producer(t: pa.Table) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Findings and summary for one producer's entries, in storage order."""
    order = pc.sort_indices(t, [("ledger_id", "ascending"), ("entry_id", "ascending")])
    t = t.take(order)
    seq, end = _ranges(t)
    lid = t.column("ledger_id").to_numpy(zero_copy_only=False)
    eid = t.column("entry_id").to_numpy(zero_copy_only=False)
    name = t.column("producer_name")[0].as_py() if t.num_rows else None
    findings: list[dict[str, Any]] = []
    dup_entries = dup_msgs = gaps = missing = 0
    high = None
    for i in range(t.num_rows):
        s, e = int(seq[i]), int(end[i])
        prev = (int(lid[i - 1]), int(eid[i - 1])) if i else (None, None)
        if high is not None and s <= high:
            overlap = min(e, high) - s + 1
            dup_entries += 1
            dup_msgs += overlap
            findings.append(
                dict(
                    producer_name=name,
                    kind="duplicate",
                    first_sequence_id=s,
                    last_sequence_id=min(e, high),
                    messages=overlap,
                    ledger_id=int(lid[i]),
                    entry_id=int(eid[i]),
                    previous_ledger_id=prev[0],
                    previous_entry_id=prev[1],
                )
            )
        elif high is not None and s > high + 1:
            gaps += 1
            missing += s - high - 1
            findings.append(
                dict(
                    producer_name=name,
                    kind="gap",
                    first_sequence_id=high + 1,
                    last_sequence_id=s - 1,
                    messages=s - high - 1,
                    ledger_id=int(lid[i]),
                    entry_id=int(eid[i]),
                    previous_ledger_id=prev[0],
                    previous_entry_id=prev[1],
                )
            )
        high = e if high is None else max(high, e)
    summary = dict(
        producer_name=name,
        entries=t.num_rows,
        messages=int((end - seq + 1).sum()) if t.num_rows else 0,
        first_sequence_id=int(seq.min()) if t.num_rows else None,
        last_sequence_id=high,
        duplicate_entries=dup_entries,
        duplicate_messages=dup_msgs,
        gaps=gaps,
        missing_messages=missing,
    )
    return findings, summary


def dedup_audit(table: Any) -> tuple[pa.Table, pa.Table]:
    """(findings, per-producer summary) for a topic's entries. Rows whose metadata could not be
    decoded are reported as producer ``None`` with kind ``unreadable`` in the findings."""
    t = _decoded(table)
    bad = pc.is_valid(t.column("error")) if "error" in t.column_names else None
    findings: list[dict[str, Any]] = []
    if bad is not None and pc.any(bad).as_py():
        for r in t.filter(bad).select(["ledger_id", "entry_id"]).to_pylist():
            findings.append(
                dict(
                    producer_name=None,
                    kind="unreadable",
                    first_sequence_id=None,
                    last_sequence_id=None,
                    messages=None,
                    ledger_id=r["ledger_id"],
                    entry_id=r["entry_id"],
                    previous_ledger_id=None,
                    previous_entry_id=None,
                )
            )
        t = t.filter(pc.invert(bad))
    summaries = []
    for name in sorted(set(t.column("producer_name").to_pylist())):
        f, s = audit_producer(t.filter(pc.equal(t.column("producer_name"), name)))
        findings.extend(f)
        summaries.append(s)
    return pa.Table.from_pylist(findings, AUDIT_SCHEMA), pa.Table.from_pylist(summaries, SUMMARY_SCHEMA)


def render_audit(summary: pa.Table) -> str:
    lines = [
        f"{'producer':<30}{'entries':>9}{'messages':>10}{'dup entries':>13}{'dup msgs':>10}{'gaps':>6}{'missing':>9}"
    ]
    for r in summary.to_pylist():
        lines.append(
            f"{r['producer_name']!s:<30}{r['entries']:>9}{r['messages']:>10}{r['duplicate_entries']:>13}"
            f"{r['duplicate_messages']:>10}{r['gaps']:>6}{r['missing_messages']:>9}"
        )
    return "\n".join(lines)


def time_index(table: Any) -> tuple[pa.Table, pa.Table]:
    """(per entry, per ledger): ``ledger_id``, ``entry_id``, ``broker_timestamp``, ``publish_time``,
    ``entry_timestamp`` (broker time when present, else publish time, as seek uses it); per ledger the
    min/max of each and the entry count."""
    t = _decoded(table)
    bt = t.column("broker_timestamp")
    et = pc.coalesce(bt, t.column("publish_time"))
    entries = pa.table(
        {
            "ledger_id": t.column("ledger_id"),
            "entry_id": t.column("entry_id"),
            "broker_timestamp": bt,
            "publish_time": t.column("publish_time"),
            "entry_timestamp": et,
        }
    ).sort_by([("ledger_id", "ascending"), ("entry_id", "ascending")])
    per_ledger = (
        entries.group_by("ledger_id")
        .aggregate(
            [
                ("entry_id", "count"),
                ("broker_timestamp", "min"),
                ("broker_timestamp", "max"),
                ("publish_time", "min"),
                ("publish_time", "max"),
                ("entry_timestamp", "min"),
                ("entry_timestamp", "max"),
            ]
        )
        .sort_by("ledger_id")
    )
    return entries, per_ledger


#: One entry as the seek comparison reads it: ``(ledger_id, entry_id, broker_timestamp, publish_time)``.
SeekRow = tuple[int, int, int | None, int | None]


class _Missing(Exception):
    """A row the seek comparison needs was not given (it is fetched, then the comparison runs again)."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


def seek_check(n: int, rows: Mapping[int, SeekRow], max_seek_samples: int) -> tuple[dict[str, Any] | None, set[int]]:
    """Seeking by broker time against seeking by publish time over ``n`` entries in storage order
    (``rows[k]`` is the k-th), at the broker timestamps of up to ``max_seek_samples`` entries, each
    search OpFindNewest's probes. Returns ``(result, set())``, or ``(None, needed)`` when ``rows``
    lacks some row the comparison reads: a caller holding only some rows (Spark fetches the probed
    ones, round by round) adds those and calls again; the probes depend only on the rows read."""
    space = EntrySpace([LedgerSpan(0, n, 0)])
    step = max(1, n // max_seek_samples)
    needed: set[int] = set()

    def row(k: int) -> SeekRow:
        got = rows.get(k)
        if got is None:
            raise _Missing(k)
        return got

    def before(col: int, target: int) -> Callable[[int], bool]:
        def matches(k: int) -> bool:
            v = row(k)[col]
            return v is not None and v < target

        return matches

    disagreements, samples = 0, 0
    examples: list[dict[str, Any]] = []
    for target_i in range(0, n, step):
        try:
            target = row(target_i)[2]
            if target is None:
                continue
            by_b = find_newest_matching(space, 0, n - 1, before(2, target))
            by_p = find_newest_matching(space, 0, n - 1, before(3, target))
            land_b = 0 if by_b is None else by_b + 1
            land_p = 0 if by_p is None else by_p + 1
            samples += 1
            if land_b != land_p:
                disagreements += 1
                if len(examples) < 10:

                    def pos(k: int) -> tuple[int, int] | None:
                        return None if k >= n else row(k)[:2]

                    examples.append(
                        {"target_time": target, "by_broker_time": pos(land_b), "by_publish_time": pos(land_p)}
                    )
        except _Missing as m:
            needed.add(m.index)  # the other samples go on, so one round fetches what they all need next
    if needed:
        return None, needed
    return {"seek_samples": samples, "seek_disagreements": disagreements, "examples": examples}, needed


class _TableRows(Mapping[int, SeekRow]):
    """The rows of a table sorted in storage order, read on demand (no Python object per entry)."""

    def __init__(self, t: pa.Table) -> None:
        self.n = t.num_rows
        self.cols = []
        for name in ("ledger_id", "entry_id", "broker_timestamp", "publish_time"):
            c = t.column(name)
            self.cols.append(
                (
                    pc.fill_null(c, 0).to_numpy(zero_copy_only=False),
                    pc.is_valid(c).to_numpy(zero_copy_only=False),
                )
            )

    def __getitem__(self, k: int) -> SeekRow:
        if not 0 <= k < self.n:
            raise KeyError(k)
        lid, eid, bt, pt = (int(v[k]) if ok[k] else None for v, ok in self.cols)
        return lid, eid, bt, pt  # type: ignore[return-value]

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))


def skew_by_producer(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per producer, the count, min and max skew of its skewed entries, by producer name."""
    out = [
        {
            "producer_name": r["producer_name"],
            "skew_ms_count": int(r["skew_ms_count"]),
            "skew_ms_min": int(r["skew_ms_min"]),
            "skew_ms_max": int(r["skew_ms_max"]),
        }
        for r in rows
    ]
    return sorted(out, key=lambda r: (r["producer_name"] is not None, r["producer_name"] or ""))


def skew_report(
    entries: int,
    with_broker_timestamp: int,
    threshold_ms: int,
    skewed_entries: int = 0,
    by_producer: list[dict[str, Any]] | None = None,
    seeks: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The clock-skew report's dict from its parts (no broker timestamp at all: nothing to compare)."""
    if not with_broker_timestamp:
        return {
            "entries": entries,
            "with_broker_timestamp": 0,
            "skewed_entries": 0,
            "by_producer": [],
            "seek_samples": 0,
            "seek_disagreements": 0,
            "examples": [],
        }
    return {
        "entries": entries,
        "with_broker_timestamp": with_broker_timestamp,
        "threshold_ms": threshold_ms,
        "skewed_entries": skewed_entries,
        "by_producer": by_producer or [],
        **(seeks or {"seek_samples": 0, "seek_disagreements": 0, "examples": []}),
    }


def clock_skew_report(table: Any, threshold_ms: int = 60_000, max_seek_samples: int = 1000) -> dict[str, Any]:
    """Where publish time and broker time disagree by more than ``threshold_ms``, per producer, and
    whether seeking by publish time would land on a different entry than seeking by broker time
    (checked at up to ``max_seek_samples`` target times, each entry's broker timestamp)."""
    t = _decoded(table).sort_by([("ledger_id", "ascending"), ("entry_id", "ascending")])
    bt = t.column("broker_timestamp")
    has_bt = pc.is_valid(bt)
    with_bt = int(pc.sum(has_bt.cast(pa.int64())).as_py() or 0)
    if not with_bt:
        return skew_report(t.num_rows, 0, threshold_ms)
    skew = pc.subtract(t.column("publish_time"), bt)
    skewed = pc.and_(has_bt, pc.greater(pc.abs(skew), threshold_ms))
    sk = t.filter(skewed)
    by_producer = []
    if sk.num_rows:
        g = pa.table({"producer_name": sk.column("producer_name"), "skew_ms": pc.filter(skew, skewed)})
        agg = g.group_by("producer_name").aggregate([("skew_ms", "count"), ("skew_ms", "min"), ("skew_ms", "max")])
        by_producer = skew_by_producer(agg.to_pylist())
    seeks, _ = seek_check(t.num_rows, _TableRows(t), max_seek_samples)
    return skew_report(t.num_rows, with_bt, threshold_ms, sk.num_rows, by_producer, seeks)
