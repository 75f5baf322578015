"""Messages and entries of data directories, planned on one machine and read partition by partition.

This is the engine behind the ``pulsarkit`` / ``pulsarkit-entries`` Spark data sources and
``pulsarkit export``; it needs no Spark. :func:`plan` opens each data directory once (the driver)
and cuts every topic's ledgers into :class:`ScanPartition` s of about ``max_partition_bytes``;
:func:`read_partition` (an executor, or the same process) reads a partition's entries by their
bookie locations (digests verified) and turns each Arrow batch of entries into messages with two
native calls (``decode_metadata``, then ``explode_messages`` on the plain entries): batches split,
codecs undone, PIP-70 indexes computed in the core.

Rows equal :func:`pulsarkit.analysis.messages.read_messages` (flattened, see :data:`MESSAGE_FIELDS`):

* **Transactions** are topic-wide: a message's state is its commit/abort marker in the topic, else
  the coordinator's log, and read-committed stops a topic at the first message of a transaction
  with no marker yet (``maxReadPosition``). The driver finds them in one native pass over the entry
  logs (``scan_entry_logs`` as views + ``decode_metadata``: no payload copied or decompressed), then
  reads the few transactional entries exactly as the single process does; every partition gets the
  states and the cut.
* **Chunked messages** (an id is the last chunk's position) never straddle two partitions: the
  same pass gives every chunked message's span, and no cut falls inside one; an incremental read
  after a position starts at the first chunk of a message that ends after it.
* Markers, encrypted entries and chunks (rare) take the single process's own code path per entry.

Deleted ledgers (no longer in their managed ledger: deleted topics, retention-trimmed ledgers whose
entries the bookie still holds) are left out unless ``include_deleted``; their topic is the one
their metadata names, when it survives, else null.
"""

from __future__ import annotations

import array
import base64
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .. import bulk
from ..analysis.datadir import DataDir, open_data_dir
from ..analysis.messages import TXN_MODES
from ..analysis.records import DataDirError
from ..analysis.transactions import entry_txn
from ..bookkeeper import digest as bookie_digest
from ..bookkeeper.entrylog import EntryLogReader, scan_entry_logs
from ..broker.topic_name import is_system_topic, ml_kind, ml_to_topic, partition_of
from ..codec.chunks import ChunkAssembler
from ..codec.entry import Entry
from ..codec.txn import MARKER_TYPES, TXN_ABORT_MARKER, TXN_COMMIT_MARKER, decode_txn_log_entry
from ..errors import PulsarkitError

_MASK = (1 << 64) - 1
Pos = tuple[int, int]

#: One row per message, flattened: ``message_schema()``'s ``message_id`` struct becomes
#: ``partition``/``ledger_id``/``entry_id``/``batch_index``, ``broker_entry_metadata`` becomes
#: ``broker_timestamp``/``broker_index``, ``txn`` becomes ``txn_most_bits``/``txn_least_bits``
#: (Java longs, as ``TxnID`` prints them) and ``txn_state``; ``payload`` is the bytes (null for a
#: null value or an encrypted message), not base64.
MESSAGE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("ledger_id", pa.int64()),
    ("entry_id", pa.int64()),
    ("batch_index", pa.int32()),
    ("key", pa.string()),
    ("properties", pa.map_(pa.string(), pa.string())),
    ("payload", pa.binary()),
    ("publish_time", pa.int64()),
    ("event_time", pa.int64()),
    ("sequence_id", pa.int64()),
    ("producer_name", pa.string()),
    ("null_value", pa.bool_()),
    ("encrypted", pa.bool_()),
    ("broker_timestamp", pa.int64()),
    ("broker_index", pa.int64()),
    ("txn_most_bits", pa.int64()),
    ("txn_least_bits", pa.int64()),
    ("txn_state", pa.string()),
]
MARKER_FIELD = ("marker", pa.string())

#: One row per entry of a managed ledger: its topic (managed ledger), what the ledger holds
#: (``topic``, ``transaction_log``, ``pending_ack``; a deleted ledger's kind), the ids, the entry bytes
#: (what the BookKeeper client wrote, digest verified) and, for an unreadable entry, ``error``.
ENTRY_FIELDS: list[tuple[str, pa.DataType]] = [
    ("topic", pa.string()),
    ("kind", pa.string()),
    ("ledger_id", pa.int64()),
    ("entry_id", pa.int64()),
    ("payload", pa.binary()),
    ("error", pa.string()),
]


def message_fields(markers: bool = False) -> list[tuple[str, pa.DataType]]:
    return MESSAGE_FIELDS + ([MARKER_FIELD] if markers else [])


def arrow_schema(fields: Sequence[tuple[str, pa.DataType]]) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in fields])


# ------------------------------------------------------------------------------------------ filters

#: Pushed-down filters: (column, op, value), op one of = in > >= < <= startswith; ANDed.
Filter = tuple[str, str, Any]
PUSHABLE = {"topic": ("=", "in", "startswith"), "ledger_id": ("=", "in", ">", ">=", "<", "<="),
            "publish_time": ("=", "in", ">", ">=", "<", "<=")}  # fmt: skip


def _test(op: str, v: Any, ref: Any) -> bool:
    if v is None:
        return False
    if op == "=":
        return bool(v == ref)
    if op == "in":
        return v in ref
    if op == "startswith":
        return str(v).startswith(ref)
    return bool({">": v > ref, ">=": v >= ref, "<": v < ref, "<=": v <= ref}[op])


def _passes(filters: Iterable[Filter], column: str, v: Any) -> bool:
    return all(_test(op, v, ref) for c, op, ref in filters if c == column)


def _mask(table: pa.Table, filters: Iterable[Filter], columns: Sequence[str]) -> Any:
    """A boolean mask of the rows passing the filters on ``columns`` (None when none applies)."""
    m = None
    for c, op, ref in filters:
        if c not in columns:
            continue
        col = table.column(c)
        if op == "in":
            x = pc.is_in(col, value_set=pa.array(list(ref), col.type))
        elif op == "startswith":
            x = pc.starts_with(col, ref)
        else:
            fn = {"=": pc.equal, ">": pc.greater, ">=": pc.greater_equal, "<": pc.less, "<=": pc.less_equal}[op]
            x = fn(col, pa.scalar(ref, col.type))
        x = pc.fill_null(x, False)
        m = x if m is None else pc.and_(m, x)
    return m


# ------------------------------------------------------------------------------------------- plan


@dataclass
class Segment:
    """Entries ``first..last`` of one ledger and where the bookie keeps them."""

    ledger_id: int
    first: int
    last: int
    #: the bookie's ``current/`` holding the ledger's entry logs
    current: str | None
    #: the ledger's digest type (None: detected per entry) and password, as its metadata says
    digest: str | None
    password: bytes
    #: native-endian int64 per entry: its location in the entry logs, -1 when the index lacks it
    locations: bytes
    #: stored entries only the journal holds (replayed as bookie recovery would)
    journal: dict[int, bytes] = field(default_factory=dict)

    @property
    def entries(self) -> int:
        return self.last - self.first + 1


@dataclass
class ScanPartition:
    """One read task: consecutive segments of one topic, and what of them to emit."""

    data_dir: str
    topic: str | None
    kind: str
    partition: int
    segments: list[Segment]
    #: emit only rows at positions after this one (entries before it are read for chunks)
    after: Pos | None = None
    #: txn -> TXN_COMMIT / TXN_ABORT marker in this topic; txn -> the coordinator's state
    markers: dict[Pos, str] = field(default_factory=dict)
    coordinator: dict[Pos, str] = field(default_factory=dict)
    bytes: int = 0


@dataclass
class Plan:
    partitions: list[ScanPartition]
    #: per data dir and topic: the last position planned (every position up to it was considered)
    marks: dict[str, dict[str, Pos]]
    #: issues met while opening the directories (as strings, file and offset named)
    issues: list[str]
    #: per data dir: seconds spent planning (index, transaction/chunk pass)
    stats: dict[str, Any]
    #: the size a task aims at
    target_bytes: float = 64 << 20
    #: per data dir and topic: its managed ledger's ledgers, in order
    topic_ledgers: dict[str, dict[str, list[int]]] = field(default_factory=dict)

    def tasks(self) -> list[list[ScanPartition]]:
        """The partitions grouped into tasks of about :attr:`target_bytes`: a large topic is cut into
        ledger ranges, small topics share a task."""
        out: list[list[ScanPartition]] = []
        size = 0.0
        for p in self.partitions:
            if out and size + p.bytes <= self.target_bytes:
                out[-1].append(p)
                size += p.bytes
            else:
                out.append([p])
                size = p.bytes
        return out


@dataclass
class _TopicFacts:
    markers: dict[Pos, str] = field(default_factory=dict)
    first_txn: dict[Pos, Pos] = field(default_factory=dict)
    #: uuid -> (first, last) position of its chunks
    chunks: dict[str, tuple[Pos, Pos]] = field(default_factory=dict)


def coordinator_states(dd: DataDir) -> dict[Pos, str]:
    """txn -> its state in the coordinators' logs (what ``transactions(dd)`` calls
    ``coordinator_state``), without reading any other topic."""
    out: dict[Pos, str] = {}
    for ml in dd.managed_ledger_names():
        if ml_kind(ml) != "transaction_log":
            continue
        for _, recs in dd.ml_records(ml, decode_txn_log_entry, "bad_txn_log_entry"):
            for r in recs:
                key = (r["txnid_most_bits"] & _MASK, r["txnid_least_bits"] & _MASK)
                if r["op"] == "NEW":
                    out[key] = out.get(key) or "OPEN"
                elif r["op"] == "UPDATE" and r["new_status"] is not None:
                    out[key] = r["new_status"]
    return out


def _index(dd: DataDir) -> dict[int, tuple[str, dict[int, int]]]:
    out: dict[int, tuple[str, dict[int, int]]] = {}
    for current, lid, eid, loc in dd.entry_locations():
        if lid not in out:
            out[lid] = (current, {})
        out[lid][1][eid] = loc
    return out


def _topic_facts(
    dd: DataDir, owner: dict[int, str], index: dict[int, tuple[str, dict[int, int]]]
) -> dict[str, _TopicFacts]:
    """Markers, first transactional positions and chunk spans of every topic in ``owner``'s values
    (ledger -> topic), from one native pass over the entry logs and the journal's tail."""
    facts: dict[str, _TopicFacts] = {}
    if not owner:
        return facts
    ledgers = pa.array(sorted(owner), pa.int64())
    candidates: list[tuple[int, int, str | None]] = []  # ledger, entry, uuid of a chunk
    logs = [(p, i) for p, i, _ in dd.entry_logs()]
    if logs:
        for b in scan_entry_logs(logs, "AUTO", include_issues=False, payload_type="binary_view"):
            keep = pc.fill_null(pc.is_in(b.column("ledger_id"), value_set=ledgers), False)
            if not pc.any(keep).as_py():
                continue
            # metadata only, of every row (views cannot be filtered cheaply; other ledgers give errors)
            md = bulk.decode_metadata(b.column("payload"))
            txn = pc.or_(pc.is_valid(md.column("txnid_most_bits")), pc.is_valid(md.column("txnid_least_bits")))
            chunk = pc.and_(pc.is_valid(md.column("uuid")), pc.greater(md.column("num_chunks_from_msg"), 1))
            m = pc.and_(keep, pc.or_(pc.fill_null(txn, False), pc.fill_null(chunk, False)))
            if not pc.any(m).as_py():
                continue
            sel = pa.Table.from_arrays(
                [b.column("ledger_id"), b.column("entry_id"), md.column("uuid"), pc.fill_null(chunk, False)],
                names=["l", "e", "u", "c"],
            ).filter(m)
            for lid, eid, uuid, is_chunk in zip(*(sel.column(i).to_pylist() for i in range(4)), strict=True):
                candidates.append((lid, eid, uuid if is_chunk else None))
    for lid in owner:
        local = index.get(lid, (None, {}))[1]
        for eid in dd.journal.get(lid, {}):
            if eid not in local:
                candidates.append((lid, eid, None))  # decoded below
    seen: set[Pos] = set()
    for lid, eid, uuid in sorted(set(candidates), key=lambda c: (c[0], c[1])):
        led = dd.ledgers.get(lid)
        if led is None or eid > led.last_entry_id or (lid, eid) in seen:
            continue
        seen.add((lid, eid))
        f = facts.setdefault(owner[lid], _TopicFacts())
        try:
            data = dd.read_entry(lid, eid)
            e = Entry.parse(data, verify_checksum=False)
        except PulsarkitError:
            if uuid is not None:  # a span only constrains where partitions are cut: keep it wide
                _span(f, uuid, (lid, eid))
            continue
        md = e.metadata
        if md.HasField("uuid") and md.HasField("num_chunks_from_msg") and md.num_chunks_from_msg > 1:
            _span(f, md.uuid, (lid, eid))
        elif uuid is not None:
            _span(f, uuid, (lid, eid))
        key = entry_txn(md)
        if key is None:
            continue
        key = (key[0] & _MASK, key[1] & _MASK)
        if md.HasField("marker_type") and md.marker_type in (TXN_COMMIT_MARKER, TXN_ABORT_MARKER):
            f.markers[key] = MARKER_TYPES[md.marker_type]
        elif not md.marker_type:
            f.first_txn.setdefault(key, (lid, eid))
    return facts


def _span(f: _TopicFacts, uuid: str, pos: Pos) -> None:
    lo, hi = f.chunks.get(uuid, (pos, pos))
    f.chunks[uuid] = (min(lo, pos), max(hi, pos))


def _runs(dd: DataDir, lids: Sequence[int]) -> list[tuple[int, int, int]]:
    """(ledger, first, last) readable ranges, as ``DataDir.entries`` reads them."""
    out = []
    for lid in lids:
        led = dd.ledgers.get(lid)
        last = led.last_entry_id if led is not None else -1
        if last >= 0:
            out.append((lid, 0, last))
    return out


def _clip(runs: list[tuple[int, int, int]], lo: Pos | None, hi: Pos | None) -> list[tuple[int, int, int]]:
    """The runs' positions p with lo <= p (when lo) and p <= hi (when hi)."""
    out = []
    for lid, a, b in runs:
        if lo is not None:
            if lid < lo[0]:
                continue
            if lid == lo[0]:
                a = max(a, lo[1])
        if hi is not None:
            if lid > hi[0]:
                continue
            if lid == hi[0]:
                b = min(b, hi[1])
        if a <= b:
            out.append((lid, a, b))
    return out


def _last(runs: list[tuple[int, int, int]]) -> Pos | None:
    return (runs[-1][0], runs[-1][2]) if runs else None


def _before(runs: list[tuple[int, int, int]], p: Pos) -> Pos | None:
    """The last position of the runs strictly before ``p``."""
    prev = None
    for lid, a, b in runs:
        if (lid, a) >= p:
            break
        prev = (lid, min(b, p[1] - 1)) if lid == p[0] else (lid, b)
    return prev


def _segment(dd: DataDir, lid: int, a: int, b: int, index: dict[int, tuple[str, dict[int, int]]]) -> Segment:
    led = dd.ledgers.get(lid)
    current, locs = index.get(lid, (None, {}))
    arr = array.array("q", (locs.get(e, -1) for e in range(a, b + 1)))
    journal = {}
    for e, rec in dd.journal.get(lid, {}).items():
        if a <= e <= b and e not in locs:
            journal[e] = rec.data
    if current is None:
        currents = dd.bookie_current_dirs()
        current = currents[0] if currents else None
    return Segment(
        lid,
        a,
        b,
        current,
        led.digest_type if led is not None and led.digest_type else None,
        led.password if led is not None else b"",
        arr.tobytes(),
        journal,
    )


def _cut(
    runs: list[tuple[int, int, int]],
    entry_bytes: dict[int, float],
    target: float,
    spans: list[tuple[Pos, Pos]],
) -> list[list[tuple[int, int, int]]]:
    """Groups the runs into pieces of about ``target`` bytes, never cutting inside a span."""

    def hold(p: Pos) -> Pos | None:  # the end of the spans a cut right after p would split
        ends = [hi for lo, hi in spans if lo <= p < hi]
        return max(ends) if ends else None

    pieces: list[list[tuple[int, int, int]]] = []
    cur: list[tuple[int, int, int]] = []
    size = 0.0
    for lid, a, b in runs:
        per = max(entry_bytes.get(lid, 1.0), 1.0)
        start = a
        while start <= b:
            end = min(b, start + max(int((target - size) / per), 1) - 1)
            while end < b:
                h = hold((lid, end))
                if h is None:
                    break
                end = min(b, max(end + 1, h[1])) if h[0] == lid else b
            cur.append((lid, start, end))
            size += (end - start + 1) * per
            start = end + 1
            if size >= target and hold((lid, end)) is None:
                pieces.append(cur)
                cur, size = [], 0.0
    if cur:
        pieces.append(cur)
    return pieces


def plan(
    paths: Sequence[str],
    *,
    kind: str = "messages",
    txn: str = "committed",
    include_system: bool = False,
    include_deleted: bool = False,
    filters: Sequence[Filter] = (),
    after: dict[str, dict[str, Pos]] | None = None,
    until: dict[str, dict[str, Pos]] | None = None,
    max_partition_bytes: int = 64 << 20,
    min_partitions: int = 2,
) -> Plan:
    """Plans a read of ``paths`` (data directories). ``kind`` is ``messages`` or ``entries``;
    ``after``/``until`` (data dir -> topic -> position) bound each topic (exclusive/inclusive), the
    incremental export's high-water marks; ``filters`` prune topics and ledgers (and are applied
    again to the rows by :func:`read_partition`)."""
    if kind not in ("messages", "entries"):
        raise ValueError(f"kind must be messages or entries, not {kind!r}")
    if txn not in TXN_MODES:
        raise PulsarkitError(f"txn must be one of {TXN_MODES}, not {txn!r}")
    partitions: list[ScanPartition] = []
    target = 1.0
    marks: dict[str, dict[str, Pos]] = {}
    topic_ledgers: dict[str, dict[str, list[int]]] = {}
    issues: list[str] = []
    stats: dict[str, Any] = {}
    for path in paths:
        with open_data_dir(path) as dd:
            issues += [str(i) for i in dd.issues]
            t0 = time.perf_counter()
            index = _index(dd)
            topics: list[tuple[str | None, str, list[tuple[int, int, int]], str | None]] = []
            for ml in dd.managed_ledger_names():
                k = ml_kind(ml)
                name = ml_to_topic(ml)
                if kind == "messages" and (k != "topic" or (is_system_topic(name) and not include_system)):
                    continue
                topics.append((name, k, _runs(dd, dd.ml_ledgers(ml)), ml))
                topic_ledgers.setdefault(path, {})[name] = dd.ml_ledgers(ml)
            if include_deleted:
                for led in sorted(dd.ledgers.values(), key=lambda x: x.ledger_id):
                    if led.referenced or led.entries_on_bookie == 0:
                        continue
                    if kind == "messages" and not (
                        led.kind == "topic" or (led.state == "DELETED" and led.deleted_guess == "topic")
                    ):
                        continue
                    topics.append((led.topic, led.kind, _runs(dd, [led.ledger_id]), None))
            topics = [t for t in topics if _passes(filters, "topic", t[0])]
            owner = {lid: t[0] or f"#{lid}" for t in topics for lid, _, _ in t[2]} if kind == "messages" else {}
            facts = _topic_facts(dd, owner, index)
            coord = coordinator_states(dd) if kind == "messages" else {}
            stats[path] = {"plan_seconds": time.perf_counter() - t0}
            total = 0.0
            per_entry: dict[int, float] = {}
            work: list[tuple[str | None, str, list[tuple[int, int, int]], _TopicFacts, Pos | None]] = []
            dmarks = marks.setdefault(path, {})
            for name, k, runs, _ in topics:
                f = facts.get(name or f"#{runs[0][0] if runs else -1}", _TopicFacts())
                lo = (after or {}).get(path, {}).get(name) if name else None
                hi = (until or {}).get(path, {}).get(name) if name else None
                cut = _clip(runs, None, hi)
                if kind == "messages" and txn == "committed" and name is not None:
                    ongoing = [p for key, p in f.first_txn.items() if key not in f.markers]
                    if ongoing:
                        stop = _before(cut, min(ongoing))
                        cut = _clip(cut, None, stop) if stop is not None else []
                mark = _last(cut)
                if name is not None:
                    if mark is not None and (lo is None or mark >= lo):
                        dmarks[name] = mark
                    elif lo is not None:
                        dmarks[name] = lo
                start = None
                if lo is not None:
                    start = (lo[0], lo[1] + 1)
                    for a, b in f.chunks.values():  # a message that ends after the mark needs all its chunks
                        if a <= lo < b and a < start:
                            start = a
                rd = _clip(cut, start, None)
                rd = [r for r in rd if _ledger_needed(r[0], filters, f, rd)]
                if not rd:
                    continue
                for lid, a, b in rd:
                    led = dd.ledgers.get(lid)
                    n = max(led.entries_on_bookie, 1) if led is not None else 1
                    per_entry[lid] = (led.bytes_on_bookie / n) if led is not None and led.bytes_on_bookie else 1024.0
                    total += per_entry[lid] * (b - a + 1)
                work.append((name, k, rd, f, lo))
            target = max(min(float(max_partition_bytes), total / max(min_partitions, 1)), 1.0, target)
            for name, k, rd, f, lo in work:
                spans = list(f.chunks.values())
                for piece in _cut(rd, per_entry, target, spans):
                    segs = [_segment(dd, lid, a, b, index) for lid, a, b in piece]
                    part = partition_of(name)[1] if name else -1
                    partitions.append(
                        ScanPartition(
                            path,
                            name,
                            k,
                            part,
                            segs,
                            lo,
                            dict(f.markers),
                            coord,
                            int(sum(per_entry[s.ledger_id] * s.entries for s in segs)),
                        )
                    )
    return Plan(partitions, marks, issues, stats, target, topic_ledgers)


def _ledger_needed(lid: int, filters: Sequence[Filter], f: _TopicFacts, runs: list[tuple[int, int, int]]) -> bool:
    """A ledger is read when it passes the ledger filters, or holds chunks of a message ending in one that does."""
    if _passes(filters, "ledger_id", lid):
        return True
    for a, b in f.chunks.values():
        if a[0] <= lid <= b[0] and _passes(filters, "ledger_id", b[0]):
            return True
    return False


# ------------------------------------------------------------------------------------------- read


class _Readers:
    def __init__(self) -> None:
        self._r: dict[str, EntryLogReader] = {}

    def get(self, current: str) -> EntryLogReader:
        r = self._r.get(current)
        if r is None:
            r = self._r[current] = EntryLogReader(current)
        return r


def iter_entries(part: ScanPartition) -> Iterator[tuple[int, int, bytes | None, str | None]]:
    """``(ledger, entry, data, error)`` of the partition's entries in order, read as
    ``DataDir.read_entry`` reads them (the index's location, else the journal; digest verified)."""
    readers = _Readers()
    for seg in part.segments:
        locs = array.array("q")
        locs.frombytes(seg.locations)
        lid = seg.ledger_id
        for i, eid in enumerate(range(seg.first, seg.last + 1)):
            loc = locs[i]
            try:
                if loc >= 0 and seg.current is not None:
                    try:
                        raw = readers.get(seg.current).read(loc, lid, eid)
                    except OSError as e:
                        raise DataDirError(f"entry log missing or unreadable for ledger {lid} entry {eid}: {e}")
                elif eid in seg.journal:
                    raw = seg.journal[eid]
                else:
                    raise DataDirError(f"ledger {lid} entry {eid} is on no bookie and in no journal")
                digest = seg.digest or bookie_digest.detect_digest_type(raw, seg.password) or "CRC32C"
                data = bookie_digest.unpack_entry(raw, digest, seg.password, ledger_id=lid, entry_id=eid).payload
            except PulsarkitError as e:
                yield lid, eid, None, f"ledger {lid} entry {eid}: {e}"
                continue
            yield lid, eid, data, None


def _batches(
    part: ScanPartition, batch_entries: int, batch_bytes: int
) -> Iterator[tuple[list[int], list[int], list[bytes | None], list[str | None]]]:
    lids: list[int] = []
    eids: list[int] = []
    datas: list[bytes | None] = []
    errs: list[str | None] = []
    size = 0
    for lid, eid, data, err in iter_entries(part):
        lids.append(lid)
        eids.append(eid)
        datas.append(data)
        errs.append(err)
        size += len(data) if data else 0
        if len(lids) >= batch_entries or size >= batch_bytes:
            yield lids, eids, datas, errs
            lids, eids, datas, errs, size = [], [], [], [], 0
    if lids:
        yield lids, eids, datas, errs


class UnreadableEntry(DataDirError):
    """An entry the read could not decode, with ``on_error="fail"``."""


def read_partition(
    part: ScanPartition | Sequence[ScanPartition] | None,
    *,
    kind: str = "messages",
    columns: Sequence[str] | None = None,
    txn: str = "committed",
    markers: bool = False,
    filters: Sequence[Filter] = (),
    on_error: str = "skip",
    batch_entries: int = 2048,
    batch_bytes: int = 16 << 20,
) -> Iterator[pa.RecordBatch]:
    """The rows of one partition as Arrow record batches of ``columns`` (default: all, in the order
    of :data:`MESSAGE_FIELDS` / :data:`ENTRY_FIELDS`). Unreadable entries are skipped, as the single
    process skips them (``on_error="fail"`` raises :class:`UnreadableEntry` instead)."""
    if part is None:
        return
    if not isinstance(part, ScanPartition):
        for p in part:
            yield from read_partition(
                p,
                kind=kind,
                columns=columns,
                txn=txn,
                markers=markers,
                filters=filters,
                on_error=on_error,
                batch_entries=batch_entries,
                batch_bytes=batch_bytes,
            )
        return
    fields = message_fields(markers) if kind == "messages" else ENTRY_FIELDS
    types = dict(fields)
    names = list(columns) if columns is not None else [n for n, _ in fields]
    unknown = [n for n in names if n not in types]
    if unknown:
        raise ValueError(f"unknown columns {unknown}; the columns are {[n for n, _ in fields]}")
    schema = arrow_schema([(n, types[n]) for n in names])
    if kind == "entries":
        for lids, eids, datas, errs in _batches(part, batch_entries, batch_bytes):
            if on_error == "fail" and any(errs):
                raise UnreadableEntry(next(e for e in errs if e))
            n = len(lids)
            t = pa.table(
                {
                    "topic": pa.array([part.topic] * n, pa.string()),
                    "kind": pa.array([part.kind] * n, pa.string()),
                    "ledger_id": pa.array(lids, pa.int64()),
                    "entry_id": pa.array(eids, pa.int64()),
                    "payload": pa.array(datas, pa.binary()),
                    "error": pa.array(errs, pa.string()),
                }
            )
            out = _emit(t, part, filters)
            if out.num_rows:
                yield _select(out, schema)
        return
    state = _MessageState(part, txn, markers)
    for lids, eids, datas, errs in _batches(part, batch_entries, batch_bytes):
        if on_error == "fail" and any(errs):
            raise UnreadableEntry(next(e for e in errs if e))
        t = state.messages(lids, eids, datas, filters)
        if on_error == "fail" and state.bad:
            raise UnreadableEntry(state.bad[0])
        out = _emit(t, part, filters)
        if out.num_rows:
            yield _select(out, schema)


def _select(t: pa.Table, schema: pa.Schema) -> pa.RecordBatch:
    cols = [t.column(n).combine_chunks() for n in schema.names]
    cols = [c.cast(f.type) if c.type != f.type else c for c, f in zip(cols, schema, strict=True)]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _emit(t: pa.Table, part: ScanPartition, filters: Sequence[Filter]) -> pa.Table:
    """The rows after the partition's mark that pass the pushed-down filters."""
    m = _mask(t, filters, ("ledger_id", "publish_time", "topic"))
    if part.after is not None:
        lid, eid = part.after
        x = pc.or_(
            pc.greater(t.column("ledger_id"), lid),
            pc.and_(pc.equal(t.column("ledger_id"), lid), pc.greater(t.column("entry_id"), eid)),
        )
        m = x if m is None else pc.and_(m, x)
    return t if m is None else t.filter(m)


def _signed(v: int | None) -> int | None:
    return None if v is None else (v - (1 << 64) if v >= 1 << 63 else v)


class _MessageState:
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
                states[i] = self.state(((most[i] or 0) & _MASK, (least[i] or 0) & _MASK))
        for i in range(n):
            if datas[i] is None:
                self.bad.append(f"ledger {lids[i]} entry {eids[i]} unreadable")
        plain_mask = pc.and_(pc.invert(special), pa.array(keep, pa.bool_()))
        if self.committed:
            ok = pa.array([s is None or s == "COMMITTED" for s in states], pa.bool_())
            plain_mask = pc.and_(plain_mask, ok)
        pt = [(c, op, ref) for c, op, ref in filters if c == "publish_time"]
        if pt:
            m = _mask(pa.table({"publish_time": md.column("publish_time")}), pt, ("publish_time",))
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
                state = self.state((tkey[0] & _MASK, tkey[1] & _MASK))
                if self.committed and state != "COMMITTED" and marker is None:
                    return
                most, least = _signed(tkey[0]), _signed(tkey[1])
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
                "sequence_id": _signed(seq),
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
        "txn_most_bits": _signed(t.get("most_bits")),
        "txn_least_bits": _signed(t.get("least_bits")),
        "txn_state": t.get("state"),
    }
    if "marker" in r:
        out["marker"] = r["marker"]
    return out


def read_all(
    paths: Sequence[str] | str,
    *,
    kind: str = "messages",
    columns: Sequence[str] | None = None,
    txn: str = "committed",
    markers: bool = False,
    filters: Sequence[Filter] = (),
    **plan_kw: Any,
) -> pa.Table:
    """Plans and reads everything in this process: the data source's rows as one Arrow table."""
    paths = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    p = plan([os.fspath(x) for x in paths], kind=kind, txn=txn, filters=filters, **plan_kw)
    fields = message_fields(markers) if kind == "messages" else ENTRY_FIELDS
    names = list(columns) if columns is not None else [n for n, _ in fields]
    schema = arrow_schema([(n, dict(fields)[n]) for n in names])
    batches = [
        b
        for task in p.tasks()
        for b in read_partition(task, kind=kind, columns=names, txn=txn, markers=markers, filters=filters)
    ]
    return pa.Table.from_batches(batches, schema=schema)


__all__ = [
    "ENTRY_FIELDS",
    "MESSAGE_FIELDS",
    "Filter",
    "Plan",
    "ScanPartition",
    "Segment",
    "UnreadableEntry",
    "arrow_schema",
    "coordinator_states",
    "flat_record",
    "iter_entries",
    "message_fields",
    "plan",
    "read_all",
    "read_partition",
]
