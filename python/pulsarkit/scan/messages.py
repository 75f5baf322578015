"""The per-entry rules of a message read: markers, encryption, chunks, batches, transaction state and
the read-committed filter, applied to a batch of entries."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .. import bulk
from ..codec.chunks import ChunkAssembler
from ..codec.entry import Entry
from ..codec.txn import MARKER_TYPES
from ..errors import PulsarkitError
from .partition import ScanPartition
from .schema import MASK, TIME_COLUMNS, Filter, Pos, arrow_schema, filter_mask, message_fields
from .transactions import entry_txn


def signed(v: int | None) -> int | None:
    return None if v is None else (v - (1 << 64) if v >= 1 << 63 else v)


class MessageState:
    """Per-partition state of the message read: the chunk assembler and the transaction states."""

    def __init__(self, part: ScanPartition, txn: str, markers: bool) -> None:
        self.part = part
        self.committed = txn == "committed"
        self.markers = markers
        self.assembler = ChunkAssembler(max_pending_chunked_messages=0, expire_incomplete_after_ms=0)
        self.bad: list[str] = []
        self.fields = message_fields(markers)

    def state(self, key: Pos) -> str:
        m = self.part.markers.get(key)
        if m == "TXN_COMMIT":
            return "COMMITTED"
        if m == "TXN_ABORT":
            return "ABORTED"
        return self.part.coordinator.get(key) or "UNKNOWN"

    def messages(
        self, lids: list[int], eids: list[int], datas: list[bytes | None], filters: Sequence[Filter]
    ) -> pa.Table:
        n = len(lids)
        entries = pa.array(datas, pa.binary())
        md = bulk.decode_metadata(entries)
        marker = pc.fill_null(pc.not_equal(md.column("marker_type"), 0), False)
        chunk = pc.fill_null(
            pc.and_(pc.is_valid(md.column("uuid")), pc.greater(md.column("num_chunks_from_msg"), 1)), False
        )
        special = pc.or_(
            pc.or_(marker, chunk),
            pc.or_(pc.fill_null(md.column("encrypted"), False), pc.is_valid(md.column("error"))),
        )
        special = pc.and_(special, pc.is_valid(entries))
        # transaction state per entry; read-committed drops whole entries before any decompression
        most = md.column("txnid_most_bits").to_pylist()
        least = md.column("txnid_least_bits").to_pylist()
        states: list[str | None] = [None] * n
        keep = [datas[i] is not None for i in range(n)]
        for i in range(n):
            if most[i] is not None or least[i] is not None:
                states[i] = self.state(((most[i] or 0) & MASK, (least[i] or 0) & MASK))
        for i in range(n):
            if datas[i] is None:
                self.bad.append(f"ledger {lids[i]} entry {eids[i]} unreadable")
        plain_mask = pc.and_(pc.invert(special), pa.array(keep, pa.bool_()))
        if self.committed:
            ok = pa.array([s is None or s == "COMMITTED" for s in states], pa.bool_())
            plain_mask = pc.and_(plain_mask, ok)
        pt = [(c, op, ref) for c, op, ref in filters if c in TIME_COLUMNS]
        if pt:  # every row of a plain entry has the entry's times: drop it before it is decompressed
            times = pa.table({c: md.column(c) for c in TIME_COLUMNS})
            m = filter_mask(times, pt, TIME_COLUMNS)
            if m is not None:
                plain_mask = pc.and_(plain_mask, m)
        plain_idx = pc.indices_nonzero(plain_mask)
        parts = []
        if len(plain_idx):
            parts.append(self._kernel_rows(entries.take(plain_idx), plain_idx, lids, eids, md, states))
        spec_idx = pc.indices_nonzero(special).to_pylist()
        if spec_idx:
            rows = []
            for i in spec_idx:
                rows += self._python_rows(lids[i], eids[i], datas[i], i)  # type: ignore[arg-type]
            if rows:
                parts.append(pa.Table.from_pylist(rows, schema=arrow_schema(self.fields + [("_ord", pa.int64())])))
        if not parts:
            return arrow_schema(self.fields + [("_ord", pa.int64())]).empty_table()
        t = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        if len(parts) > 1:
            t = t.take(pc.sort_indices(t, [("_ord", "ascending"), ("batch_index", "ascending")]))
        return t.drop_columns(["_ord"])

    def _kernel_rows(
        self,
        entries: pa.Array,
        idx: pa.Array,
        lids: list[int],
        eids: list[int],
        md: pa.RecordBatch,
        states: list[str | None],
    ) -> pa.Table:
        out = bulk.explode_messages(entries)
        ok = pc.is_null(out.column("error"))
        # an entry that does not decode is skipped whole, as the single process skips it
        bad_entries = pc.unique(pc.filter(out.column("entry_index"), pc.invert(ok)))
        if len(bad_entries):
            bad = pc.is_in(out.column("entry_index"), value_set=bad_entries)
            for j in bad_entries.to_pylist():
                i = idx[j].as_py()
                self.bad.append(f"ledger {lids[i]} entry {eids[i]}: messages undecodable")
            out = out.filter(pc.invert(bad))
        ei = out.column("entry_index")
        src = idx.take(ei)  # row -> index in the batch
        k = len(out)
        part = self.part
        null_value = pc.fill_null(out.column("null_value"), False)
        ev = out.column("event_time")
        st = pa.array(states, pa.string()).take(src)
        txm = md.column("txnid_most_bits").take(src)
        txl = md.column("txnid_least_bits").take(src)
        has_txn = pc.is_valid(st)
        cols = {
            "topic": pa.array([part.topic] * k, pa.string()),
            "partition": pa.array([part.partition] * k, pa.int32()),
            "ledger_id": pa.array(lids, pa.int64()).take(src),
            "entry_id": pa.array(eids, pa.int64()).take(src),
            "batch_index": out.column("batch_index"),
            "key": out.column("key"),
            "properties": out.column("properties"),
            "payload": (  # Java's getData() is null for a null value; no copy when there is none
                pc.if_else(null_value, pa.scalar(None, out.column("payload").type), out.column("payload"))
                if pc.any(null_value).as_py()
                else out.column("payload")
            ),
            "publish_time": out.column("publish_time"),
            "event_time": pc.if_else(pc.equal(ev, 0), pa.scalar(None, pa.int64()), ev),
            "sequence_id": out.column("sequence_id"),
            "producer_name": out.column("producer_name"),
            "null_value": null_value,
            "encrypted": pa.array([False] * k, pa.bool_()),
            "broker_timestamp": out.column("broker_timestamp"),
            "broker_index": out.column("index"),
            "txn_most_bits": pc.if_else(has_txn, pc.fill_null(txm, 0), pa.scalar(None, pa.int64())),
            "txn_least_bits": pc.if_else(has_txn, pc.fill_null(txl, 0), pa.scalar(None, pa.int64())),
            "txn_state": st,
        }
        if self.markers:
            cols["marker"] = pa.nulls(k, pa.string())
        cols["_ord"] = src.cast(pa.int64())
        schema = arrow_schema(self.fields + [("_ord", pa.int64())])
        arrays = []
        for f in schema:
            c = cols[f.name]
            if isinstance(c, pa.ChunkedArray):
                c = c.combine_chunks()
            arrays.append(c if c.type == f.type else c.cast(f.type))
        return pa.Table.from_arrays(arrays, schema=schema)

    def _python_rows(self, lid: int, eid: int, data: bytes, ordinal: int) -> list[dict[str, Any]]:
        """One special entry (marker, encrypted, chunk, or one the kernel refused) exactly as
        :func:`pulsarkit.analysis.messages.iter_messages` reads it."""
        part = self.part
        out: list[dict[str, Any]] = []

        def rec(
            e: Entry,
            bi: int,
            *,
            key: Any,
            props: dict[str, str],
            payload: bytes | None,
            event_time: int | None,
            seq: int,
            null_value: bool,
            index: int | None,
            ts: int | None,
            encrypted: bool = False,
            marker: str | None = None,
        ) -> None:
            md = e.metadata
            tkey = entry_txn(md)
            most = least = state = None
            if tkey is not None:
                state = self.state((tkey[0] & MASK, tkey[1] & MASK))
                if self.committed and state != "COMMITTED" and marker is None:
                    return
                most, least = signed(tkey[0]), signed(tkey[1])
            r = {
                "topic": part.topic,
                "partition": part.partition,
                "ledger_id": lid,
                "entry_id": eid,
                "batch_index": bi,
                "key": key,
                "properties": list(props.items()),
                "payload": None if null_value else payload,
                "publish_time": md.publish_time,
                "event_time": event_time,
                "sequence_id": signed(seq),
                "producer_name": md.producer_name,
                "null_value": null_value,
                "encrypted": encrypted,
                "broker_timestamp": ts,
                "broker_index": index,
                "txn_most_bits": most,
                "txn_least_bits": least,
                "txn_state": state,
                "_ord": ordinal,
            }
            if self.markers:
                r["marker"] = marker
            out.append(r)

        try:
            e = Entry.parse(data)
        except PulsarkitError as err:
            self.bad.append(f"ledger {lid} entry {eid}: not a Pulsar entry: {err}")
            return out
        md = e.metadata
        bem = e.broker_entry_metadata
        ts = bem.broker_timestamp if bem is not None else None
        bem_index = bem.index if bem is not None else None
        if md.HasField("marker_type") and md.marker_type:
            if self.markers:
                rec(
                    e,
                    -1,
                    key=None,
                    props={},
                    payload=None,
                    event_time=None,
                    seq=md.sequence_id,
                    null_value=False,
                    index=bem_index,
                    ts=ts,
                    marker=MARKER_TYPES.get(md.marker_type, str(md.marker_type)),
                )
            return out
        key = md.partition_key if md.HasField("partition_key") else None
        props = {kv.key: kv.value for kv in md.properties}
        if len(md.encryption_keys):
            rec(
                e,
                -1,
                key=key,
                props=props,
                payload=None,
                event_time=md.event_time or None,
                seq=md.sequence_id,
                null_value=md.null_value,
                index=bem_index,
                ts=ts,
                encrypted=True,
            )
            return out
        if md.HasField("uuid") and md.HasField("num_chunks_from_msg") and md.num_chunks_from_msg > 1:
            try:
                done = self.assembler.add(e, (lid, eid))
            except PulsarkitError as err:
                self.bad.append(f"ledger {lid} entry {eid}: bad chunk: {err}")
                return out
            if done is not None:
                rec(
                    e,
                    -1,
                    key=key,
                    props=props,
                    payload=done.message.payload,
                    event_time=md.event_time or None,
                    seq=md.sequence_id,
                    null_value=md.null_value,
                    index=bem_index,
                    ts=ts,
                )
            return out
        try:
            msgs = e.messages()
        except PulsarkitError as err:
            self.bad.append(f"ledger {lid} entry {eid}: messages undecodable: {err}")
            return out
        for m in msgs:
            rec(
                e,
                m.batch_index if e.is_batch else -1,
                key=m.key,
                props=m.properties,
                payload=m.payload,
                event_time=m.event_time or None,
                seq=m.sequence_id,
                null_value=m.null_value,
                index=m.index,
                ts=ts,
            )
        return out


# ----------------------------------------------------------------------- the single-process reference


def flat_record(r: dict[str, Any]) -> dict[str, Any]:
    """A record of :func:`pulsarkit.analysis.messages.read_messages` in the flattened form."""
    mid = r["message_id"]
    bem = r["broker_entry_metadata"] or {}
    t = r["txn"] or {}
    out = {
        "topic": r["topic"],
        "partition": mid["partition"],
        "ledger_id": mid["ledger_id"],
        "entry_id": mid["entry_id"],
        "batch_index": mid["batch_index"],
        "key": r["key"],
        "properties": list(r["properties"].items()),
        "payload": None if r["payload_b64"] is None else base64.b64decode(r["payload_b64"]),
        "publish_time": r["publish_time"],
        "event_time": r["event_time"],
        "sequence_id": r["sequence_id"],
        "producer_name": r["producer_name"],
        "null_value": r["null_value"],
        "encrypted": r["encrypted"],
        "broker_timestamp": bem.get("broker_timestamp"),
        "broker_index": bem.get("index"),
        "txn_most_bits": signed(t.get("most_bits")),
        "txn_least_bits": signed(t.get("least_bits")),
        "txn_state": t.get("state"),
    }
    if "marker" in r:
        out["marker"] = r["marker"]
    return out
