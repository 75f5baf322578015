"""Compacted topics of a data directory, broker-less: the compacted view a ``readCompacted`` reader
gets (:class:`pulsarkit.broker.compaction.CompactedTopic` over the directory's ledgers), its last
message id, and phase one of pulsarkit's own compactor over the same topic, to compare key by key."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from .. import _native
from ..broker.compaction import CompactedTopic, MessagePosition
from ..broker.topic_name import partition_of
from ..codec.entry import Entry
from ..managed_ledger.position import Position
from ..scan.datadir import DataDir
from ..scan.messages import MessageState
from ..scan.partition import ScanPartition
from ..scan.records import DataDirError
from ..scan.schema import arrow_schema, message_fields


def _data(d: bytes | DataDirError) -> bytes:
    if isinstance(d, DataDirError):
        raise d  # a compacted view with a hole would be wrong, not partial
    return d


class _Ledger:
    """The compacted ledger as :class:`CompactedTopic` reads it."""

    def __init__(self, dd: DataDir, ledger_id: int) -> None:
        self.dd, self.ledger_id = dd, ledger_id

    def entries(self, first: int = 0) -> Iterator[tuple[int, bytes]]:
        for eid, d in self.dd.entries(self.ledger_id, first):
            yield eid, _data(d)


class _Topic:
    """The topic's managed ledger as :class:`CompactedTopic` reads it."""

    def __init__(self, dd: DataDir, ml: str) -> None:
        self.dd, self.name = dd, ml

    @property
    def last_confirmed_entry(self) -> Position:
        return self.dd.ml_last_position(self.name)

    def read_after(self, p: Position) -> Iterator[tuple[Position, bytes]]:
        for pos, d in self.dd.ml_entries(self.name, p if p.ledger_id >= 0 else None):
            yield pos, _data(d)

    def read_entry(self, p: Position) -> bytes:
        return self.dd.read_entry(p.ledger_id, p.entry_id)


def compacted_topic(dd: DataDir, topic: str) -> CompactedTopic:
    """The compacted view of ``topic``; a topic never compacted is its plain managed ledger."""
    t = dd.topic(topic)
    lid = t.compacted_ledger
    if lid is None or lid not in dd.ledgers:
        return CompactedTopic(_Topic(dd, t.managed_ledger), None, None, None)
    return CompactedTopic(_Topic(dd, t.managed_ledger), t.compaction_horizon, int(lid), _Ledger(dd, int(lid)))


def last_message_id(dd: DataDir, topic: str) -> MessagePosition:
    """What ``GetLastMessageId`` answers a ``readCompacted`` reader of ``topic``."""
    return compacted_topic(dd, topic).last_message_id()


def compacted_messages(dd: DataDir, topic: str) -> Iterator[dict[str, Any]]:
    """The messages a ``readCompacted`` reader gets from the start, one dict each."""
    view = compacted_topic(dd, topic)
    for pos, data in view.read_entries():
        e = Entry.parse(data, verify_checksum=False)
        if e.metadata.HasField("marker_type"):
            continue
        compacted = view.horizon is not None and pos <= view.horizon
        for m in e.messages(ciphertext=True):  # an encrypted entry is one message, as CONSUME hands it
            yield {
                "ledger_id": pos.ledger_id,
                "entry_id": pos.entry_id,
                "batch_index": m.batch_index,
                "key": m.key,
                "payload_b64": base64.b64encode(m.payload).decode() if m.payload is not None else None,
                "publish_time": e.metadata.publish_time,
                "from_compacted_ledger": compacted,
            }


COMPACTED_SCHEMA = pa.schema(
    [
        ("ledger_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("batch_index", pa.int32()),
        ("key", pa.string()),
        ("payload_b64", pa.string()),
        ("publish_time", pa.int64()),
        ("from_compacted_ledger", pa.bool_()),
    ]
)


def compacted_table(dd: DataDir, topic: str) -> Any:
    return pa.Table.from_pylist(list(compacted_messages(dd, topic)), schema=COMPACTED_SCHEMA)


def compacted_rows(dd: DataDir, topic: str, positions: Iterable[tuple[int, int, int]]) -> pa.Table:
    """The rows (the one message schema, as the topic's own read gives them) of the messages at ``positions``
    (ledger, entry, batch index) as ``topic``'s compacted ledger holds them, each with its original message id:
    the retained messages whose own ledger retention trimmed after the compaction. They are what a
    ``readCompacted`` reader gets: not filtered again by transaction (compaction chose them; their markers may be
    trimmed too). A position the compacted ledger does not hold, or an entry of it that does not read or decode,
    is a :class:`DataDirError` naming the topic and the ledger: never a row silently missing."""
    wanted = set(positions)
    if not wanted:
        return arrow_schema(message_fields()).empty_table()
    view = compacted_topic(dd, topic)
    lid = view.compacted_ledger_id
    if lid is None:
        raise DataDirError(
            f"{topic}: {len(wanted)} retained message(s) are in no ledger of the topic (trimmed) and its compacted "
            f"ledger {dd.topic(topic).compacted_ledger} is not in the data to read them from"
        )
    entries = {(p[0], p[1]) for p in wanted}
    lids: list[int] = []
    eids: list[int] = []
    datas: list[bytes | None] = []
    try:
        for pos, entry in view.compacted_entries():
            if (pos.ledger_id, pos.entry_id) in entries:
                lids.append(pos.ledger_id)
                eids.append(pos.entry_id)
                datas.append(entry)
    except DataDirError as e:
        raise DataDirError(f"{topic}: its compacted ledger {lid} does not read: {e}") from e
    bad: list[str] = []
    part = ScanPartition(data_dir="", topic=topic, kind="topic", partition=partition_of(topic)[1], segments=[])
    state = MessageState(part, "all", False, on_issue=lambda issue: bad.append(str(issue)))
    rows = state.messages(lids, eids, datas, [])
    got = zip(*(rows.column(c).to_pylist() for c in ("ledger_id", "entry_id", "batch_index")))
    keep = [p in wanted for p in got]
    rows = rows.filter(pa.array(keep, pa.bool_()))
    if rows.num_rows < len(wanted) or bad:
        why = f": {bad[0]}" if bad else ""
        raise DataDirError(
            f"{topic}: {len(wanted) - rows.num_rows} retained message(s) whose ledger was trimmed are not in its "
            f"compacted ledger {lid} as expected{why}"
        )
    return rows


def phase_one(
    dd: DataDir,
    topic: str,
    up_to: Position | None = None,
    event_time_order: bool = False,
    view: bool = False,
    after: Position | None = None,
    seed: pa.Table | None = None,
) -> Any:
    """pulsarkit's phase one over the topic's own entries up to ``up_to`` (default: the compaction
    horizon, else the end): the native ``LatestForKey``. ``view``: over the compacted view instead (what
    the ``__compaction`` reader reads: the compacted ledger, then the topic after the horizon), so a key
    whose messages retention trimmed after a compaction keeps its compacted message. ``after``: only the
    topic's own entries after it, each key continuing from ``seed`` (``key``, ``ledger_id``, ``entry_id``,
    ``batch_index``: the retained messages at ``after``, tombstoned keys absent); the result of a read from
    the start as long as every entry after ``after`` is still in the topic (an incremental upsert export)."""
    t = dd.topic(topic)
    end = up_to or t.compaction_horizon or dd.ml_last_position(t.managed_ledger)
    latest = _native.LatestForKey(event_time_order)
    if seed is not None:
        cols = (seed.column(c).to_pylist() for c in ("key", "ledger_id", "entry_id", "batch_index"))
        for key, lid, eid, bi in zip(*cols):
            latest.insert(key, lid, eid, bi)
    rows: list[tuple[int, int, bytes]] = []
    if after is not None:
        entries = dd.ml_entries(t.managed_ledger, after)
    else:
        entries = compacted_topic(dd, topic).read_entries() if view else dd.ml_entries(t.managed_ledger)
    try:
        for pos, d in entries:
            if pos > end:
                break
            rows.append((pos.ledger_id, pos.entry_id, _data(d)))
    except DataDirError as e:
        if not view or after is not None:
            raise
        lid = t.compacted_ledger
        raise DataDirError(f"{topic}: its compacted view (compacted ledger {lid}) does not read: {e}") from e
    if rows:
        latest.add_entries(
            pa.array([r[2] for r in rows], pa.binary()),
            pa.array([r[0] for r in rows], pa.int64()),
            pa.array([r[1] for r in rows], pa.int64()),
        )
    return latest


__all__ = [
    "COMPACTED_SCHEMA",
    "compacted_messages",
    "compacted_rows",
    "compacted_table",
    "compacted_topic",
    "last_message_id",
    "phase_one",
]
