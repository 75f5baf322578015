"""Messages of a real data directory as a consumer received them, and the transactions behind them.

One row per message, in topic order, of the one message schema (:data:`pulsarkit.scan.MESSAGE_FIELDS`,
flat, payload as bytes): :func:`iter_message_rows`, :func:`read_message_rows`, :func:`messages_table`.
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

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
from google.protobuf.json_format import MessageToDict

from ..broker.topic_name import ml_kind, ml_to_topic, partition_of
from ..codec.entry import Entry
from ..codec.raw_message import decode_compacted_entry
from ..codec.txn import MARKER_TYPES, decode_pending_ack_entry, decode_txn_log_entry
from ..errors import PulsarkitError
from ..managed_ledger.position import Position
from ..proto import PositionInfo
from ..scan.datadir import DataDir
from ..scan.facts import topic_markers
from ..scan.messages import EntryRules
from ..scan.records import DataDirError, Issue
from ..scan.schema import arrow_schema, json_record, message_fields
from ..scan.transactions import TXN_MODES, coordinator_states

# ------------------------------------------------------------------------------ messages


#: Decides which batch indexes of an entry to deliver (None: all); used by the backlog reader.
BatchFilter = Callable[[Position, int], "set[int] | None"]


def iter_message_rows(
    dd: DataDir,
    topic: str,
    *,
    txn: str = "committed",
    markers: bool = False,
    start: Position | None = None,
    skip_entry: Callable[[Position], bool] | None = None,
    batch_filter: BatchFilter | None = None,
    coordinator: dict[tuple[int, int], str] | None = None,
    txn_facts: tuple[dict[tuple[int, int], str], dict[tuple[int, int], Position]] | None = None,
) -> Iterator[dict[str, Any]]:
    """Rows of the one message schema (:data:`pulsarkit.scan.MESSAGE_FIELDS`, plus ``marker`` with
    ``markers``) of one topic's messages, in order, by the scan's per-entry rules
    (:class:`pulsarkit.scan.messages.EntryRules`). ``start`` reads after that position;
    ``skip_entry``/``batch_filter`` drop acknowledged entries and batch indexes; ``coordinator``: the
    coordinators' transaction states and ``txn_facts`` the topic's (:func:`pulsarkit.scan.facts.topic_markers`),
    when the caller has them (read once per data directory)."""
    if txn not in TXN_MODES:
        raise PulsarkitError(f"txn must be one of {TXN_MODES}, not {txn!r}")
    ml = dd.resolve(topic)
    name = ml_to_topic(ml)
    if ml_kind(ml) != "topic":
        raise DataDirError(
            f"{name} is a {ml_kind(ml).replace('_', ' ')} topic: its entries are not messages "
            f"(see pulsarkit.analysis.transactions)"
        )
    _, partition = partition_of(name)
    tmarkers, first_txn_pos = txn_facts if txn_facts is not None else topic_markers(dd, [ml])[ml]
    # TopicTransactionBuffer's maxReadPosition: a read-committed consumer gets nothing from the first
    # message of a transaction that has no commit/abort marker in this topic yet (still ongoing)
    ongoing = [p for k, p in first_txn_pos.items() if k not in tmarkers]
    max_read = min(ongoing) if (ongoing and txn == "committed") else None

    def bad(kind: str, lid: int, eid: int, message: str) -> None:
        if kind == "bad_chunk":
            dd.issues.append(Issue(kind, name, None, message, lid, eid))
        else:
            path, offset = dd.where(lid, eid)
            dd.issues.append(Issue(kind, path, offset, message, lid, eid))

    coord = coordinator if coordinator is not None else coordinator_states(dd)
    rules = EntryRules(name, partition, tmarkers, coord, txn=txn, markers=markers, on_bad=bad)
    for pos, data in dd.ml_entries(ml, start):
        if max_read is not None and pos >= max_read:
            break
        if isinstance(data, DataDirError):
            continue  # recorded in dd.issues; the rest is still read
        if skip_entry is not None and skip_entry(pos):
            continue
        keep = None
        if batch_filter is not None:
            keep = lambda n, pos=pos: batch_filter(pos, n)  # noqa: E731
        yield from rules.rows(pos.ledger_id, pos.entry_id, data, keep)
    for uuid, why in rules.assembler.discarded:
        dd.issues.append(Issue("incomplete_chunked_message", name, None, f"uuid {uuid}: {why}"))
    for uuid in rules.assembler.pending:
        dd.issues.append(Issue("incomplete_chunked_message", name, None, f"uuid {uuid}: last chunk missing"))


def iter_messages(dd: DataDir, topic: str, **kw: Any) -> Iterator[dict[str, Any]]:
    """:func:`iter_message_rows` rendered as JSON records (see the module doc)."""
    return map(json_record, iter_message_rows(dd, topic, **kw))


def message_topics(dd: DataDir, include_system: bool = False) -> list[str]:
    """Topics whose entries are messages (not transaction logs or pending-ack stores)."""
    return [t.name for t in dd.topics(include_system=include_system) if t.kind == "topic"]


def read_message_rows(
    dd: DataDir,
    topics: Iterable[str] | str | None = None,
    *,
    txn: str = "committed",
    markers: bool = False,
    include_system: bool = False,
) -> Iterator[dict[str, Any]]:
    """Rows of the given topics (default: every non-system topic), topic after topic."""
    if isinstance(topics, str):
        topics = [topics]
    names = [ml for t in topics for ml in dd.expand(t)] if topics is not None else message_topics(dd, include_system)
    mls = [dd.resolve(t) for t in names]
    coord = coordinator_states(dd) if mls else {}
    facts = topic_markers(dd, [ml for ml in mls if ml_kind(ml) == "topic"])  # one metadata pass for all
    for ml in mls:
        yield from iter_message_rows(dd, ml, txn=txn, markers=markers, coordinator=coord, txn_facts=facts.get(ml))


def read_messages(dd: DataDir, topics: Iterable[str] | str | None = None, **kw: Any) -> Iterator[dict[str, Any]]:
    """:func:`read_message_rows` rendered as JSON records."""
    return map(json_record, read_message_rows(dd, topics, **kw))


def message_batches(
    rows: Iterable[dict[str, Any]], *, markers: bool = False, batch_size: int = 8192
) -> Iterator[pa.RecordBatch]:
    """Rows as Arrow record batches of the one message schema."""
    schema = arrow_schema(message_fields(markers))
    buf: list[dict[str, Any]] = []
    for r in rows:
        buf.append(r)
        if len(buf) >= batch_size:
            yield pa.RecordBatch.from_pylist(buf, schema=schema)
            buf = []
    if buf:
        yield pa.RecordBatch.from_pylist(buf, schema=schema)


def messages_table(
    dd: DataDir,
    topics: Iterable[str] | str | None = None,
    *,
    txn: str = "committed",
    markers: bool = False,
    include_system: bool = False,
) -> pa.Table:
    """:func:`read_message_rows` as one Arrow table of the one message schema."""
    rows = read_message_rows(dd, topics, txn=txn, markers=markers, include_system=include_system)
    schema = arrow_schema(message_fields(markers))
    return pa.Table.from_batches(list(message_batches(rows, markers=markers)), schema=schema)


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
        return {"transaction_log": decode_txn_log_entry(data)}
    if kind == "pending_ack":
        return {"pending_ack": decode_pending_ack_entry(data)}
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
