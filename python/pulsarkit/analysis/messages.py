"""Messages of a real data directory as a consumer received them, and the transactions behind them.

One record per message, in topic order::

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

import base64
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
from google.protobuf.json_format import MessageToDict

from ..broker.topic_name import ml_kind, ml_to_topic, partition_of
from ..codec.chunks import ChunkAssembler
from ..codec.entry import Entry
from ..codec.raw_message import decode_compacted_entry
from ..codec.txn import MARKER_TYPES, decode_pending_ack_entry, decode_txn_log_entry
from ..errors import PulsarkitError
from ..managed_ledger.position import Position
from ..proto import PositionInfo
from ..scan.datadir import DataDir
from ..scan.records import DataDirError, Issue
from ..scan.transactions import TXN_MODES, entry_txn, topic_markers
from .transactions import Transaction, transactions


def _txn_state(
    txns: dict[tuple[int, int], Transaction], key: tuple[int, int], markers: dict[tuple[int, int], str]
) -> str:
    m = markers.get(key)
    if m == "TXN_COMMIT":
        return "COMMITTED"
    if m == "TXN_ABORT":
        return "ABORTED"
    t = txns.get(key)
    return t.coordinator_state or "UNKNOWN" if t else "UNKNOWN"


# ------------------------------------------------------------------------------ messages


def _bem(e: Entry, index: int | None) -> dict[str, Any] | None:
    b = e.broker_entry_metadata
    if b is None:
        return None
    return {"broker_timestamp": b.broker_timestamp, "index": index}


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode("ascii")


#: Decides which batch indexes of an entry to deliver (None: all); used by the backlog reader.
BatchFilter = Callable[[Position, int], "set[int] | None"]


def iter_messages(
    dd: DataDir,
    topic: str,
    *,
    txn: str = "committed",
    markers: bool = False,
    start: Position | None = None,
    skip_entry: Callable[[Position], bool] | None = None,
    batch_filter: BatchFilter | None = None,
) -> Iterator[dict[str, Any]]:
    """Records of one topic's messages in order (see the module doc). ``start`` reads after that
    position; ``skip_entry``/``batch_filter`` drop acknowledged entries and batch indexes."""
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
    txns = transactions(dd)
    tmarkers, first_txn_pos = topic_markers(dd, ml)
    # TopicTransactionBuffer's maxReadPosition: a read-committed consumer gets nothing from the first
    # message of a transaction that has no commit/abort marker in this topic yet (still ongoing)
    ongoing = [p for k, p in first_txn_pos.items() if k not in tmarkers]
    max_read = min(ongoing) if (ongoing and txn == "committed") else None
    assembler = ChunkAssembler(max_pending_chunked_messages=0, expire_incomplete_after_ms=0)

    def rec(
        pos: Position,
        bi: int,
        e: Entry,
        *,
        key: Any,
        props: dict[str, str],
        payload: bytes | None,
        event_time: int | None,
        seq: int,
        null_value: bool,
        index: int | None,
        encrypted: bool = False,
        marker: str | None = None,
    ) -> dict[str, Any] | None:
        md = e.metadata
        tkey = entry_txn(md)
        t = None
        if tkey is not None:
            state = _txn_state(txns, tkey, tmarkers)
            if txn == "committed" and state != "COMMITTED" and marker is None:
                return None
            t = {"most_bits": tkey[0], "least_bits": tkey[1], "state": state}
        r = {
            "topic": name,
            "message_id": {
                "ledger_id": pos.ledger_id,
                "entry_id": pos.entry_id,
                "batch_index": bi,
                "partition": partition,
            },
            "key": key,
            "properties": props,
            "payload_b64": None if null_value else _b64(payload),  # Java: getData() is null
            "publish_time": md.publish_time,
            "event_time": event_time,
            "sequence_id": seq - (1 << 64) if seq >= 1 << 63 else seq,  # Java long: markers carry -1
            "producer_name": md.producer_name,
            "null_value": null_value,
            "encrypted": encrypted,
            "broker_entry_metadata": _bem(e, index),
            "txn": t,
        }
        if markers:
            r["marker"] = marker
        return r

    for pos, data in dd.ml_entries(ml, start):
        if max_read is not None and pos >= max_read:
            break
        if isinstance(data, DataDirError):
            continue  # recorded in dd.issues; the rest is still read
        if skip_entry is not None and skip_entry(pos):
            continue
        try:
            e = Entry.parse(data)
        except PulsarkitError as err:
            path, offset = dd.where(*pos)
            dd.issues.append(
                Issue("bad_entry", path, offset, f"not a Pulsar entry: {err}", pos.ledger_id, pos.entry_id)
            )
            continue
        md = e.metadata
        if md.HasField("marker_type") and md.marker_type:
            if markers:
                r = rec(
                    pos,
                    -1,
                    e,
                    key=None,
                    props={},
                    payload=None,
                    event_time=None,
                    seq=md.sequence_id,
                    null_value=False,
                    index=e.broker_entry_metadata.index if e.broker_entry_metadata else None,
                    marker=MARKER_TYPES.get(md.marker_type, str(md.marker_type)),
                )
                if r is not None:
                    yield r
            continue
        bem_index = e.broker_entry_metadata.index if e.broker_entry_metadata else None
        key = md.partition_key if md.HasField("partition_key") else None
        if len(md.encryption_keys):
            r = rec(
                pos,
                -1,
                e,
                key=key,
                props={kv.key: kv.value for kv in md.properties},
                payload=None,
                event_time=md.event_time or None,
                seq=md.sequence_id,
                null_value=md.null_value,
                index=bem_index,
                encrypted=True,
            )
            if r is not None:
                yield r
            continue
        if md.HasField("uuid") and md.HasField("num_chunks_from_msg") and md.num_chunks_from_msg > 1:
            try:
                done = assembler.add(e, pos)
            except PulsarkitError as err:
                dd.issues.append(Issue("bad_chunk", name, None, str(err), pos.ledger_id, pos.entry_id))
                continue
            if done is None:
                continue
            m = done.message
            r = rec(
                pos,
                -1,
                e,
                key=key,
                props={kv.key: kv.value for kv in md.properties},
                payload=m.payload,
                event_time=md.event_time or None,
                seq=md.sequence_id,
                null_value=md.null_value,
                index=bem_index,
            )
            if r is not None:
                yield r
            continue
        try:
            msgs = e.messages()
        except PulsarkitError as err:
            path, offset = dd.where(*pos)
            dd.issues.append(
                Issue("bad_entry", path, offset, f"messages undecodable: {err}", pos.ledger_id, pos.entry_id)
            )
            continue
        keep = batch_filter(pos, e.num_messages) if (batch_filter is not None and e.is_batch) else None
        for m in msgs:
            if keep is not None and m.batch_index not in keep:
                continue
            r = rec(
                pos,
                m.batch_index if e.is_batch else -1,
                e,
                key=m.key,
                props=m.properties,
                payload=m.payload,
                event_time=m.event_time or None,
                seq=m.sequence_id,
                null_value=m.null_value,
                index=m.index,
            )
            if r is not None:
                yield r
    for uuid, why in assembler.discarded:
        dd.issues.append(Issue("incomplete_chunked_message", name, None, f"uuid {uuid}: {why}"))
    for uuid in assembler.pending:
        dd.issues.append(Issue("incomplete_chunked_message", name, None, f"uuid {uuid}: last chunk missing"))


def message_topics(dd: DataDir, include_system: bool = False) -> list[str]:
    """Topics whose entries are messages (not transaction logs or pending-ack stores)."""
    return [t.name for t in dd.topics(include_system=include_system) if t.kind == "topic"]


def read_messages(
    dd: DataDir,
    topics: Iterable[str] | str | None = None,
    *,
    txn: str = "committed",
    markers: bool = False,
    include_system: bool = False,
) -> Iterator[dict[str, Any]]:
    """Records of the given topics (default: every non-system topic), topic after topic."""
    if isinstance(topics, str):
        topics = [topics]
    names = [ml for t in topics for ml in dd.expand(t)] if topics is not None else message_topics(dd, include_system)
    for t in names:
        yield from iter_messages(dd, t, txn=txn, markers=markers)


def message_schema(markers: bool = False) -> Any:

    fields = [
        ("topic", pa.string()),
        (
            "message_id",
            pa.struct(
                [
                    ("ledger_id", pa.int64()),
                    ("entry_id", pa.int64()),
                    ("batch_index", pa.int32()),
                    ("partition", pa.int32()),
                ]
            ),
        ),
        ("key", pa.string()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("payload_b64", pa.string()),
        ("publish_time", pa.int64()),
        ("event_time", pa.int64()),
        ("sequence_id", pa.int64()),
        ("producer_name", pa.string()),
        ("null_value", pa.bool_()),
        ("encrypted", pa.bool_()),
        ("broker_entry_metadata", pa.struct([("broker_timestamp", pa.int64()), ("index", pa.int64())])),
        ("txn", pa.struct([("most_bits", pa.uint64()), ("least_bits", pa.uint64()), ("state", pa.string())])),
    ]
    if markers:
        fields.append(("marker", pa.string()))
    return pa.schema(fields)


def _arrow_rows(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for r in records:
        r = dict(r)
        r["properties"] = list(r["properties"].items())
        yield r


def message_batches(
    records: Iterable[dict[str, Any]], *, markers: bool = False, batch_size: int = 8192
) -> Iterator[Any]:
    """The records as Arrow record batches."""

    schema = message_schema(markers)
    buf: list[dict[str, Any]] = []
    for r in _arrow_rows(records):
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
) -> Any:
    """:func:`read_messages` as one Arrow table."""

    schema = message_schema(markers)
    batches = list(
        message_batches(
            read_messages(dd, topics, txn=txn, markers=markers, include_system=include_system),
            markers=markers,
        )
    )
    return pa.Table.from_batches(batches, schema=schema)


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
    if md.HasField("marker_type"):
        d["marker"] = MARKER_TYPES.get(md.marker_type, str(md.marker_type))
    if entry_txn(md) is not None:
        d["txn"] = list(entry_txn(md))  # type: ignore[arg-type]
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
