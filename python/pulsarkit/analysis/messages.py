"""Messages of a real data directory as a consumer received them, and the transactions behind them.

One row per message, in topic order, of the one message schema (:data:`pulsarkit.scan.MESSAGE_FIELDS`,
flat, payload as bytes), read by the one reader (:mod:`pulsarkit.scan`, planned over the open
directory): :func:`message_batches` (Arrow), :func:`messages_table`, :func:`read_message_rows`,
:func:`iter_message_rows`.
:func:`iter_messages`/:func:`read_messages` render each row as the JSON record ``pulsarkit messages``
prints (:func:`pulsarkit.scan.schema.json_record`)::

    topic, message_id {ledger_id, entry_id, batch_index, partition}, key, properties, payload_b64,
    publish_time, event_time, sequence_id, producer_name, null_value, encrypted,
    broker_entry_metadata {broker_timestamp, index} | None, txn {most_bits, least_bits, state} | None

``batch_index`` is -1 for a message that was not batched, ``partition`` -1 for a topic without
partitions. Batches are split and decompressed, chunked messages reassembled once (their id is the
last chunk's, as ``ChunkMessageIdImpl`` reports it). Transaction messages carry their transaction's
state: the commit/abort marker in the topic decides, else the coordinator's log
(``__transaction_log_<n>``, PIP-160 batched entries or single ones). By default only committed ones
come out (read-committed); ``txn="all"`` keeps every one, flagged. Markers are not messages
(``markers=True`` shows them, with a ``marker`` field). Encrypted messages are flagged and their
payload is never shown (``payload_b64`` is None): pulsarkit has no keys, and a batch it cannot open
is one record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
from google.protobuf.json_format import MessageToDict

from ..broker.topic_name import is_system_topic, ml_kind, ml_to_topic
from ..codec.entry import Entry
from ..codec.raw_message import decode_compacted_entry
from ..codec.txn import MARKER_TYPES, decode_pending_ack_entry, decode_txn_log_entry
from ..errors import PulsarkitError
from ..managed_ledger.position import Position
from ..proto import PositionInfo
from ..scan.datadir import DataDir
from ..scan.messages import AckFilter, OnIssue
from ..scan.plan import plan_data_dir
from ..scan.read import read_partition
from ..scan.records import DataDirError, Issue
from ..scan.schema import arrow_schema, json_record, message_fields
from ..scan.transactions import TXN_MODES
from .decoded import DECODE_MODES, decoded_table

# ------------------------------------------------------------------------------ messages


def message_topics(dd: DataDir, include_system: bool = False) -> list[str]:
    """Managed ledgers whose entries are messages (not transaction logs or pending-ack stores), from
    the metadata alone (:meth:`DataDir.topics` sizes open ledgers by reading them)."""
    return [
        ml
        for ml in dd.managed_ledger_names()
        if ml_kind(ml) == "topic" and (include_system or not is_system_topic(ml_to_topic(ml)))
    ]


def message_entries(dd: DataDir, mls: Iterable[str]) -> int:
    """The entries of these managed ledgers' ledgers a read can find (a read's progress total): as their
    metadata counts them, but no more than the bookies hold (a forged ``lastEntryId`` claims billions)."""
    return sum(
        min(led.entries, led.entries_on_bookie)
        for ml in mls
        for lid in dd.ml_ledgers(ml)
        if (led := dd.ledgers.get(lid)) is not None
    )


def message_batches(
    dd: DataDir,
    topics: Iterable[str] | str | None = None,
    *,
    txn: str = "committed",
    markers: bool = False,
    include_system: bool = False,
    after: dict[str, Position] | None = None,
    acks: AckFilter | None = None,
) -> Iterator[pa.RecordBatch]:
    """The messages of the given topics (default: every non-system topic), topic after topic, as
    Arrow record batches of the one message schema: the scan engine's plan and read
    (:func:`pulsarkit.scan.plan.plan_data_dir`, :func:`pulsarkit.scan.read.read_partition`) over the
    open directory. ``after`` (topic -> position) reads a topic after that position; ``acks`` leaves
    out what a subscription acknowledged. What cannot be read goes to ``dd.issues`` and the read goes on."""
    if txn not in TXN_MODES:
        raise PulsarkitError(f"txn must be one of {TXN_MODES}, not {txn!r}")
    if isinstance(topics, str):
        topics = [topics]
    names = [ml for t in topics for ml in dd.expand(t)] if topics is not None else message_topics(dd, include_system)
    mls = list(dict.fromkeys(dd.resolve(t) for t in names))
    if not mls:
        return
    # a partitioned topic's position applies to each of its partitions
    starts = {
        ml_to_topic(dd.resolve(ml)): (p.ledger_id, p.entry_id) for t, p in (after or {}).items() for ml in dd.expand(t)
    }
    # one partition per topic in this process: one chunk assembler and one reader each, nothing to spread;
    # so a topic read from its start needs no metadata pass unless its read meets a transaction
    scan = plan_data_dir(
        dd,
        str(dd.metadata_dir),
        topics=mls,
        txn=txn,
        after=starts,
        min_partitions=1,
        max_partition_bytes=1 << 62,
        metadata_pass="read",
    )

    for part in scan.partitions:
        yield from read_partition(part, txn=txn, markers=markers, acks=acks, on_issue=_recorder(dd, part.topic))


def _recorder(dd: DataDir, topic: str | None) -> OnIssue:
    """Issues of a read into ``dd.issues``, at the file and offset of the entry when known."""

    def issue(found: Issue, /) -> None:
        path, offset, lid, eid = found.path, found.offset, found.ledger_id, found.entry_id
        if path is None and lid is not None and eid is not None and found.kind != "bad_chunk" and found.count == 1:
            path, offset = dd.where(lid, eid)
        dd.report(dataclasses.replace(found, path=path or topic or "?", offset=offset))

    return issue


def read_message_rows(
    dd: DataDir,
    topics: Iterable[str] | str | None = None,
    *,
    txn: str = "committed",
    markers: bool = False,
    include_system: bool = False,
) -> Iterator[dict[str, Any]]:
    """:func:`message_batches` row by row (dicts of the one message schema)."""
    for b in message_batches(dd, topics, txn=txn, markers=markers, include_system=include_system):
        yield from b.to_pylist()


def iter_message_rows(
    dd: DataDir, topic: str, *, txn: str = "committed", markers: bool = False, start: Position | None = None
) -> Iterator[dict[str, Any]]:
    """One topic's rows (:func:`read_message_rows`; a partitioned topic's partitions one after the
    other), after ``start`` when given (in each partition)."""
    after = {topic: start} if start is not None else None
    for b in message_batches(dd, [topic], txn=txn, markers=markers, after=after):
        yield from b.to_pylist()


def iter_messages(dd: DataDir, topic: str, **kw: Any) -> Iterator[dict[str, Any]]:
    """:func:`iter_message_rows` rendered as JSON records (see the module doc)."""
    return map(json_record, iter_message_rows(dd, topic, **kw))


def read_messages(dd: DataDir, topics: Iterable[str] | str | None = None, **kw: Any) -> Iterator[dict[str, Any]]:
    """:func:`read_message_rows` rendered as JSON records."""
    return map(json_record, read_message_rows(dd, topics, **kw))


def messages_table(
    dd: DataDir,
    topics: Iterable[str] | str | None = None,
    *,
    txn: str = "committed",
    markers: bool = False,
    include_system: bool = False,
    decode: str = "bytes",
) -> pa.Table:
    """:func:`message_batches` as one Arrow table of the one message schema; ``decode="schema"`` decodes each
    payload with its topic's schema into typed ``key``/``value`` columns (:mod:`.decoded`; topics of one schema)."""
    if decode not in DECODE_MODES:
        raise PulsarkitError(f"decode must be one of {DECODE_MODES}, not {decode!r}")
    batches = message_batches(dd, topics, txn=txn, markers=markers, include_system=include_system)
    if decode == "schema":
        names = [topics] if isinstance(topics, str) else list(topics or [])
        if not names:
            raise PulsarkitError("decode='schema' needs the topic(s) to read")
        return decoded_table(dd, names[0], batches, markers)
    return pa.Table.from_batches(list(batches), schema=arrow_schema(message_fields(markers)))


# ------------------------------------------------------------------- any ledger, by its kind


def _entry_summary(data: bytes) -> dict[str, Any]:
    e = Entry.parse(data)
    md = e.metadata
    d: dict[str, Any] = {
        "producer_name": md.producer_name,
        "sequence_id": md.sequence_id,
        "publish_time": md.publish_time,
        "num_messages": e.num_messages,
        "compression": e.compression,
        "size": len(data),
    }
    if md.HasField("marker_type"):  # also a marker_type of 0, as stored
        d["marker"] = MARKER_TYPES.get(md.marker_type, str(md.marker_type))
    if e.txn_id is not None:
        d["txn"] = list(e.txn_id)
    if e.broker_entry_metadata is not None:
        d["broker_entry_metadata"] = {
            "broker_timestamp": e.broker_entry_metadata.broker_timestamp,
            "index": e.broker_entry_metadata.index,
        }
    return d


def decode_ledger_entry(kind: str, data: bytes) -> dict[str, Any]:
    """One entry decoded by its ledger's own format (a cursor or txn record is never read as a message)."""

    if kind == "cursor":
        pi = PositionInfo()
        pi.ParseFromString(data)
        return {"position_info": MessageToDict(pi)}
    if kind == "transaction_log":
        return {"transaction_log": [dataclasses.asdict(r) for r in decode_txn_log_entry(data)]}
    if kind == "pending_ack":
        return {"pending_ack": [dataclasses.asdict(r) for r in decode_pending_ack_entry(data)]}
    if kind == "compacted":
        mid, raw = decode_compacted_entry(data)
        return {
            "message_id": {"ledger_id": mid.ledgerId, "entry_id": mid.entryId},
            "entry": _entry_summary(raw),
        }
    if kind == "topic":
        return {"entry": _entry_summary(data)}
    return {"size": len(data), "head_hex": data[:32].hex()}


def ledger_entries(dd: DataDir, ledger_id: int) -> Iterator[dict[str, Any]]:
    """Every readable entry of one ledger, decoded by its kind; unreadable ones carry ``error``."""
    led = dd.ledgers.get(ledger_id)
    if led is None:
        raise DataDirError(f"no ledger {ledger_id} in this data directory")
    last = led.last_entry_id
    if led.state == "DELETED":
        last = dd.last_stored_entry(ledger_id)
    for eid, data in dd.entries(ledger_id, 0, last):
        row: dict[str, Any] = {"ledger_id": ledger_id, "entry_id": eid, "kind": led.kind}
        if isinstance(data, DataDirError):
            row["error"] = str(data)
        else:
            try:
                row.update(decode_ledger_entry(led.kind, data))
            except (PulsarkitError, ValueError) as e:
                row["error"] = f"not a {led.kind} entry: {e}"
        yield row
