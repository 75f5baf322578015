"""The per-entry rules of a message read (markers, encryption, chunks, batches, transaction state, the
read-committed filter and a subscription's acknowledgements), applied to a batch of entries."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from .. import _native
from ..codec.chunks import ChunkAssembler
from ..codec.columns import binary_array, int64_array, numpy_values, rows_table, string_array
from ..codec.entry import Entry
from ..errors import PulsarkitError
from ..lazy import deferred
from .partition import ScanPartition
from .records import Issue
from .schema import MASK, TIME_COLUMNS, Filter, Pos, arrow_schema, message_fields

pc = deferred("pyarrow.compute")

#: The state of a transaction neither a marker in the topic nor the coordinators know.
UNKNOWN = "UNKNOWN"


def signed(v: int | None) -> int | None:
    return None if v is None else (v - (1 << 64) if v >= 1 << 63 else v)


#: Hears of what a read could not turn into rows, one :class:`~pulsarkit.scan.records.Issue` each (its
#: ``path`` and ``offset`` the file and record when the reader knows them, else None).
#: Kinds: ``unreadable_entry`` (not read or not verified), ``bad_replica`` (a copy skipped, another
#: read), ``bad_entry`` (not a Pulsar entry, or messages undecodable), ``bad_chunk``,
#: ``incomplete_chunked_message`` (no ledger/entry: the chunks never completed in the partition).
#: A run of entries no bookie holds (:attr:`ScanPartition.gaps`) is one ``unreadable_entry`` at its
#: first entry, its ``count`` the run's length.
class OnIssue(Protocol):
    def __call__(self, issue: Issue, /) -> None: ...


class AckFilter(Protocol):
    """What a subscription has acknowledged (the backlog's filter, see :mod:`pulsarkit.analysis.backlog`)."""

    def skip(self, ledger_id: int, entry_id: int) -> bool:
        """True when the whole entry is acknowledged: it is not read into any message (nor a chunk)."""
        ...

    def batch_indexes(self, ledger_id: int, entry_id: int, batch_size: int) -> set[int] | None:
        """The batch indexes of a batch entry still to deliver (None: all of them)."""
        ...


class MessageState:
    """The per-entry rules of a message read, applied to a batch of entries at a time, with the
    per-partition state (the chunk assembler and the transactions' states): a marker is no message
    (a row with ``marker`` when asked for), an encrypted entry one row without payload, chunks
    reassembled once (the row has the last chunk's id), a batch split and decompressed; a
    transactional message carries its transaction's state (its marker in the topic, else the
    coordinators'), and read-committed drops all but committed ones, before anything is decompressed.

    Plain entries (most) are turned into rows by one native call per batch
    (``bulk_assemble_messages``, GIL released: ``rust/src/bulk/assemble.rs``); markers, encrypted
    entries and chunks go through :class:`EntryRules`, one entry at a time. What gives no rows goes to
    ``on_issue`` (and :attr:`bad`)."""

    def __init__(
        self, part: ScanPartition, txn: str, markers: bool, on_issue: OnIssue | None = None, threads: int = 1
    ) -> None:
        self.part = part
        self.threads = threads  # a batch's payloads decompressed on this many threads
        self.committed = txn == "committed"
        self.markers = markers
        self.bad: list[str] = []
        self.on_issue = on_issue
        self.gaps = {(lid, a): b - a + 1 for lid, a, b in part.gaps}
        self.fields = message_fields(markers)
        self.rules = EntryRules(
            part.topic, part.partition, part.markers, part.coordinator, txn=txn, markers=markers, on_bad=self._bad
        )
        self.state = self.rules.state
        self.txn_table = _txn_table([*part.markers, *part.coordinator], self.state)

    def adopt(self, part: ScanPartition) -> None:
        """Goes on with ``part``'s transactions and gaps (the same topic planned with its metadata pass),
        the chunks assembled so far kept."""
        self.part = part
        self.gaps = {(lid, a): b - a + 1 for lid, a, b in part.gaps}
        self.rules.txn_markers, self.rules.coordinator = part.markers, part.coordinator
        self.txn_table = _txn_table([*part.markers, *part.coordinator], self.state)

    def _bad(
        self,
        kind: str,
        lid: int | None,
        eid: int | None,
        message: str,
        path: str | None = None,
        offset: int | None = None,
    ) -> None:
        at = f"ledger {lid} entry {eid}: " if lid is not None else ""
        self.bad.append(f"{at}{'bad chunk: ' if kind == 'bad_chunk' else ''}{message}")
        if self.on_issue is not None:
            n = 1
            if kind == "unreadable_entry" and lid is not None and eid is not None:
                n = self.gaps.get((lid, eid), 1)
            self.on_issue(Issue(kind, path, offset, message, lid, eid, n))

    def finish(self) -> None:
        """The end of the partition: chunked messages still incomplete are issues."""
        a = self.rules.assembler
        for uuid, why in a.discarded:
            self._bad("incomplete_chunked_message", None, None, f"uuid {uuid}: {why}")
        for uuid in a.pending:
            self._bad("incomplete_chunked_message", None, None, f"uuid {uuid}: last chunk missing")
        a.discarded.clear()

    def messages(
        self,
        lids: list[int],
        eids: list[int],
        datas: list[bytes | None],
        filters: Sequence[Filter],
        errs: Sequence[str | None] | None = None,
        acks: AckFilter | None = None,
        entries: pa.Array | None = None,
    ) -> pa.Table:
        """The rows of a batch of entries, in order; ``datas[i]`` None: unreadable (``errs[i]`` why);
        ``acks`` leaves out what a subscription acknowledged; ``entries``: ``datas`` as an Arrow binary
        array already made (not copied again)."""
        if None in datas:  # an unreadable entry is reported, acknowledged or not
            for i in range(len(lids)):
                if datas[i] is None:
                    why = (errs[i] if errs is not None else None) or "unreadable"
                    prefix = f"ledger {lids[i]} entry {eids[i]}: "  # the issue names the entry itself
                    self._bad("unreadable_entry", lids[i], eids[i], why.removeprefix(prefix))
        if acks is not None:  # acknowledged entries are not read into anything, chunks included
            keep_at = [i for i in range(len(lids)) if not acks.skip(lids[i], eids[i])]
            if len(keep_at) < len(lids):
                lids, eids, datas = [lids[i] for i in keep_at], [eids[i] for i in keep_at], [datas[i] for i in keep_at]
                errs = [errs[i] for i in keep_at] if errs is not None else None
                entries = None
        if entries is None:
            entries = binary_array(datas)
        pt = [(c, op, _int64_values(ref if op == "in" else [ref])) for c, op, ref in filters if c in TIME_COLUMNS]
        # one GIL-free native call: metadata, transaction states, read-committed and the time filters
        # (every row of a plain entry has the entry's times: dropped before it is decompressed), explode,
        # the plain entries' rows in the one schema (+ _ord); the others' status per entry
        rows, info = _native.bulk_assemble_messages(
            entries, int64_array(lids), int64_array(eids), self.part.topic, self.part.partition, self.markers,
            self.txn_table, self.committed, pt, threads=self.threads,
        )  # fmt: skip
        status = numpy_values(info.column("status"))
        if (status > _SPECIAL).any():
            why = info.column("error")
            for code, prefix in ((_NOT_AN_ENTRY, "not a Pulsar entry"), (_UNDECODABLE, "messages undecodable")):
                for i in np.flatnonzero(status == code).tolist():
                    self._bad("bad_entry", lids[i], eids[i], f"{prefix}: {why[i].as_py()}")
        parts = [pa.Table.from_batches([rows])] if rows.num_rows else []
        spec_idx = np.flatnonzero(status == _SPECIAL).tolist()
        if spec_idx:
            special = []
            for i in spec_idx:
                for r in self.rules.rows(lids[i], eids[i], datas[i]):  # type: ignore[arg-type]
                    r["_ord"] = i
                    special.append(r)
            if special:
                parts.append(rows_table(special, arrow_schema(self.fields + [("_ord", pa.int64())])))
        if not parts:
            return arrow_schema(self.fields).empty_table()
        t = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        if len(parts) > 1:
            t = t.take(pc.sort_indices(t, [("_ord", "ascending"), ("batch_index", "ascending")]))
        if acks is not None:
            t = _acked_out(t, acks, lids, eids, info.column("batch_size").to_pylist())
        return t.drop_columns(["_ord"])


#: ``status`` of :func:`pulsarkit._native.bulk_assemble_messages`' per-entry batch (0: a plain entry,
#: its rows in the batch; 4: a null entry, reported by the caller).
_SPECIAL, _NOT_AN_ENTRY, _UNDECODABLE = 1, 2, 3


def _int64_values(values: Any) -> list[int]:
    """A filter's values as the int64s its column compares them as."""
    return pa.array(list(values), pa.int64()).to_pylist()


def _txn_table(keys: Iterable[Pos], state: Callable[[Pos], str]) -> tuple[pa.Array, pa.Array, pa.Array, str]:
    """The known transactions' states for the native assembly: most and least bits (signed, sorted as
    unsigned), each one's state, and the state of any other (``state`` gives both)."""
    keys = sorted(k for k in set(keys) if 0 <= k[0] <= MASK and 0 <= k[1] <= MASK)
    return (
        int64_array([signed(a) for a, _ in keys]),  # type: ignore[misc]
        int64_array([signed(b) for _, b in keys]),  # type: ignore[misc]
        string_array([state(k) for k in keys]),
        UNKNOWN,
    )


class EntryRules:
    """The rules of :class:`MessageState` for the entries it does not decode column-wise, one entry at
    a time, as rows of the one schema (:data:`~.schema.MESSAGE_FIELDS`): a marker (a row only with
    ``markers``), an encrypted entry (one row, no payload), a chunk (the message's row when its last
    chunk completes it), each with its transaction's state (:meth:`state`).

    ``markers``/``coordinator``: txn -> TXN_COMMIT/TXN_ABORT marker in the topic, txn -> the
    coordinators' state (:mod:`~.transactions`); ``on_bad(kind, ledger, entry, message)`` hears of
    entries that give no rows (``bad_entry``, ``bad_chunk``)."""

    def __init__(
        self,
        topic: str | None,
        partition: int,
        txn_markers: dict[Pos, str],
        coordinator: dict[Pos, str],
        *,
        txn: str = "committed",
        markers: bool = False,
        on_bad: Callable[[str, int, int, str], None] | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.txn_markers = txn_markers
        self.coordinator = coordinator
        self.committed = txn == "committed"
        self.with_markers = markers
        self.on_bad = on_bad or (lambda kind, lid, eid, message: None)
        self.assembler = ChunkAssembler(max_pending_chunked_messages=0, expire_incomplete_after_ms=0)

    def state(self, key: Pos) -> str:
        m = self.txn_markers.get(key)
        if m == "TXN_COMMIT":
            return "COMMITTED"
        if m == "TXN_ABORT":
            return "ABORTED"
        return self.coordinator.get(key) or UNKNOWN

    def rows(self, lid: int, eid: int, data: bytes) -> list[dict[str, Any]]:
        """The rows of one marker, encrypted entry or chunk."""
        out: list[dict[str, Any]] = []
        try:
            e = Entry.parse(data)
        except PulsarkitError as err:
            self.on_bad("bad_entry", lid, eid, f"not a Pulsar entry: {err}")
            return out
        md = e.metadata
        tkey = e.txn_id
        most = least = state = None
        if tkey is not None:
            state = self.state((tkey[0] & MASK, tkey[1] & MASK))
            most, least = signed(tkey[0]), signed(tkey[1])
        bem = e.broker_entry_metadata
        ts = bem.broker_timestamp if bem is not None else None
        # read-committed: no message of a transaction not committed (a chunk is still assembled)
        drop = self.committed and state is not None and state != "COMMITTED" and not e.is_marker

        def rec(bi: int, key: Any, props: Any, payload: bytes | None, event_time: int | None, seq: int,
                null_value: bool, index: int | None, encrypted: bool = False) -> None:  # fmt: skip
            if drop:
                return
            r = {
                "topic": self.topic,
                "partition": self.partition,
                "ledger_id": lid,
                "entry_id": eid,
                "batch_index": bi,
                "key": key,
                "properties": list(props.items()),
                "payload": None if null_value else payload,  # Java's getData() is null for a null value
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
                "schema_version": md.schema_version if md.HasField("schema_version") else None,
            }
            if self.with_markers:
                r["marker"] = e.marker
            out.append(r)

        bem_index = bem.index if bem is not None else None
        if e.is_marker:
            if self.with_markers:
                rec(-1, None, {}, None, None, md.sequence_id, False, bem_index)
            return out
        key = md.partition_key if md.HasField("partition_key") else None
        props = {kv.key: kv.value for kv in md.properties}
        if e.is_chunk:  # encrypted chunks too: Java joins them into one message whether or not it can decrypt
            try:
                done = self.assembler.add(e, (lid, eid))
            except PulsarkitError as err:
                self.on_bad("bad_chunk", lid, eid, str(err))
                return out
            if done is not None:
                enc = e.is_encrypted
                p = None if enc else done.message.payload
                rec(-1, key, props, p, md.event_time or None, md.sequence_id, md.null_value, bem_index, enc)
            return out
        if e.is_encrypted:
            rec(-1, key, props, None, md.event_time or None, md.sequence_id, md.null_value, bem_index, True)
            return out
        # a plain entry is decoded column-wise (MessageState): never here
        self.on_bad("bad_entry", lid, eid, "a plain entry was sent to the per-entry rules")
        return out


def _acked_out(t: pa.Table, acks: AckFilter, lids: list[int], eids: list[int], size: list[int | None]) -> pa.Table:
    """The rows without the batch indexes a subscription acknowledged (``_ord``: each row's entry;
    ``size``: each entry's batch size, None when it is no batch)."""
    wanted: dict[int, set[int]] = {}
    for i in set(t.column("_ord").to_pylist()):
        if size[i] is not None:
            w = acks.batch_indexes(lids[i], eids[i], size[i])
            if w is not None:
                wanted[i] = w
    if not wanted:
        return t
    keep = [
        o not in wanted or bi < 0 or bi in wanted[o]
        for o, bi in zip(t.column("_ord").to_pylist(), t.column("batch_index").to_pylist(), strict=True)
    ]
    return t.filter(pa.array(keep, pa.bool_()))
