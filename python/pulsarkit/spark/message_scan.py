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

**The metadata pass.** Transactions and chunks need the MessageMetadata of every entry of the
selected topics, so the plan decodes it, one of two ways: ``scan``, one native pass over all the
entry logs of the directory (views, nothing copied), or ``heads``, for each entry of the selected
ledgers a positioned read (``os.pread``, :func:`read_heads`) of its head only: the record's length,
the bookie header and digest, broker entry metadata, Pulsar's magic, checksum and metadata size and
the MessageMetadata, typically 100-200 bytes, decoded by one native call per 8192 heads. ``auto``
(the default) reads heads when the selected entries times :data:`HEAD_COST_BYTES` are fewer than the
entry logs' bytes (a topic filter selecting a small part of a directory), else scans. Only the
transactional entries the pass found are then read whole.

**Time filters** (``publish_time``, ``broker_timestamp``: ``= IN < <= > >=``) prune entries, exactly:
every row of an entry carries its entry's publish time (a batch's) and broker timestamp, so an entry
none of whose rows can pass is left out of its segment (:data:`PRUNED`) and never read; a run of 256
or more such entries splits a segment, and partitions are sized by the entries kept. A chunked
message's row carries its completing chunk's times, so its chunks are kept or left out together:
kept when any of them passes (Pulsar's Java producer gives every chunk the message's publish time;
another client need not). An entry whose metadata does not decode is kept (its read reports it).
The rows read are filtered again, so a pruned read gives the rows of the unpruned one, filtered.

Ledgers are not pruned by time alone. Publish times are the producers' clocks. A ledger's broker
timestamps are not bounded by its metadata either: the broker stamps an entry when it is added,
which can be before the ledger that stores it was created (``ManagedLedgerImpl`` stamps adds that wait
while a ledger rolls over, and moves the pending adds of a failed write to the next ledger); Pulsar
4.0.7 stores no ledger ``ctime``; the close time its managed ledger records
(:attr:`~pulsarkit.analysis.records.Ledger.closed_time`) bounds it only while the brokers' clocks
agree (Pulsar's own time seek allows 60 s of skew there). The metadata pass times every entry
anyway (transactions are topic-wide), and deciding per entry needs no assumption about clocks.

:class:`ReadStats` counts what was read from the entry logs: :attr:`Plan.read_stats` for the plan,
``read_partition(..., stats=...)`` for a partition.
"""

from __future__ import annotations

import array
import base64
import bisect
import itertools
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
from ..analysis.replicas import Layout, read_order
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
            "publish_time": ("=", "in", ">", ">=", "<", "<="),
            "broker_timestamp": ("=", "in", ">", ">=", "<", "<=")}  # fmt: skip
#: The columns whose filters prune entries: every row of an entry has its entry's publish time and
#: broker timestamp (a chunked message the completing chunk's).
TIME_COLUMNS = ("publish_time", "broker_timestamp")


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


# ------------------------------------------------------------------------------------------- stats


@dataclass
class ReadStats:
    """What a plan or a read took from the entry logs, counted where it was read. A head read counts
    the bytes it asked of the file (the record's 4-byte length, the bookie header, broker entry
    metadata and MessageMetadata, and any slack read past them); a full read the record and its
    length; the native pass whole files. Entries the journal holds are in memory: counted apart."""

    head_reads: int = 0
    head_bytes: int = 0
    entry_reads: int = 0
    entry_bytes: int = 0
    #: whole entry logs read by the plan's native pass
    scan_bytes: int = 0
    journal_entries: int = 0
    #: entries left out because no row of theirs can pass the time filters
    pruned_entries: int = 0
    #: with several bookies: copies passed over because they did not verify (another one did)
    skipped_copies: int = 0

    @property
    def total_bytes(self) -> int:
        return self.head_bytes + self.entry_bytes + self.scan_bytes

    def add(self, other: ReadStats) -> None:
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + getattr(other, k))

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


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
    #: native-endian int64 per entry: its location in the entry logs, -1 when the index lacks it,
    #: :data:`PRUNED` when the plan found no row of it can pass the time filters (not read)
    locations: bytes
    #: stored entries only the journal holds (replayed as bookie recovery would)
    journal: dict[int, bytes] = field(default_factory=dict)
    #: with several bookies: every copy, and the ledger's layout that orders them per entry (then
    #: ``current`` is None and ``locations`` only marks pruned entries)
    replicas: list[Replica] = field(default_factory=list)
    layout: Layout | None = None

    @property
    def entries(self) -> int:
        return self.last - self.first + 1


@dataclass
class Replica:
    """One bookie's copies of a segment's entries: one of its ledger directories (``current`` and a
    location per entry, -1 when absent) or its journal (``current`` None)."""

    bookie_id: str
    current: str | None
    locations: bytes
    journal: dict[int, bytes] = field(default_factory=dict)


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
    #: what planning read from the entry logs (all directories)
    read_stats: ReadStats = field(default_factory=ReadStats)

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


#: A segment location for an entry the plan pruned by its times.
PRUNED = -2
#: Bytes first read at an entry's location while no head was seen: the length field, the bookie
#: header and digest, broker entry metadata, Pulsar's magic, checksum and metadata size and a small
#: MessageMetadata fit; after that each read asks for the size of the last head of its ledger (or of
#: any ledger) and some slack, and reads the rest when the metadata declares more.
HEAD_GUESS = 256
_HEAD_SLACK = 24
#: A head read costs about as much time as the native pass takes over this many bytes of entry logs
#: (measured warm: ~10 us for a positioned read and its share of a decode call, against several GB/s
#: for the pass over mapped files): ``auto`` reads heads when the selected entries times this are
#: fewer than the entry logs' bytes, i.e. when they are a small part of the directory or large.
HEAD_COST_BYTES = 16 << 10
_DIGEST_CANDIDATES = (4, 8, 20, 0)  # CRC32C, CRC32, MAC, DUMMY


def _head_end(buf: bytes, dlen: int) -> int:
    """Where the MessageMetadata of the record in ``buf`` ends (an offset into ``buf``, which starts
    at the record's length field; the Pulsar entry starts at ``36 + dlen``), possibly beyond
    ``len(buf)``: then at least that much must be read. -1 when the bytes are no Pulsar entry."""
    p = 4 + 32 + dlen
    if len(buf) < p + 2:
        return p + 2
    if buf[p : p + 2] == b"\x0e\x02":  # broker entry metadata: magic, size, BrokerEntryMetadata
        if len(buf) < p + 6:
            return p + 6
        p += 6 + int.from_bytes(buf[p + 2 : p + 6], "big")
        if len(buf) < p + 2:
            return p + 2
    if buf[p : p + 2] == b"\x0e\x01":  # magic and CRC32C; an entry without a checksum has neither
        p += 6
    if len(buf) < p + 4:
        return p + 4
    n = int.from_bytes(buf[p : p + 4], "big")
    return p + 4 + n if n < 1 << 24 else -1


def read_heads(
    reader: EntryLogReader, wants: Sequence[tuple[int, int, int, int | None]], stats: ReadStats
) -> list[bytes | None]:
    """The head of each entry ``(ledger, entry, location, digest length or None: unknown)``: its Pulsar
    entry up to the end of its MessageMetadata (broker entry metadata included), what
    :func:`pulsarkit.bulk.decode_metadata` needs, without its payload. Read with ``os.pread`` from the
    entry log at the location (``log_id << 32 | offset of the record's data``, the 4-byte big-endian
    record length just before it), in location order; None when the record there is not that entry
    or not a Pulsar entry (the caller reads such an entry whole). The digest is not verified: a
    decision taken from a head is checked again on the rows of every entry read whole."""
    out: list[bytes | None] = [None] * len(wants)
    fds: dict[int, int] = {}
    guess: dict[int, int] = {}  # per ledger: its last head's size and some slack
    last = HEAD_GUESS  # any ledger's, for a ledger's first head
    try:
        for i in sorted(range(len(wants)), key=lambda i: wants[i][2]):
            lid, eid, loc, dlen = wants[i]
            log_id, off = loc >> 32, (loc & 0xFFFFFFFF) - 4
            try:
                fd = fds.get(log_id)
                if fd is None:
                    fd = fds[log_id] = os.open(reader.path_of(log_id), os.O_RDONLY)
                buf = os.pread(fd, guess.get(lid, last), off)
                stats.head_reads += 1
                stats.head_bytes += len(buf)
            except (OSError, PulsarkitError):
                continue
            if len(buf) < 4 + 32 + 6:
                continue
            size = int.from_bytes(buf[:4], "big")
            if (int.from_bytes(buf[4:12], "big"), int.from_bytes(buf[12:20], "big")) != (lid, eid):
                continue
            if dlen is None:  # no ledger metadata: the digest whose length puts a Pulsar magic next
                dlen = next((d for d in _DIGEST_CANDIDATES if buf[36 + d : 38 + d] in (b"\x0e\x01", b"\x0e\x02")), -1)
                if dlen < 0:
                    continue
            end = _head_end(buf, dlen)
            while end > len(buf) and end <= 4 + size:
                more = os.pread(fd, end - len(buf) + _HEAD_SLACK, off + len(buf))
                stats.head_bytes += len(more)
                if not more:
                    break
                buf += more
                end = _head_end(buf, dlen)
            if end < 0 or end > min(len(buf), 4 + size):
                continue
            guess[lid] = last = min(end + _HEAD_SLACK, 1 << 20)
            out[i] = buf[4 + 32 + dlen : end]
    finally:
        for fd in fds.values():
            os.close(fd)
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
    """ledger -> (its bookie's ``current/``, entry -> location). With several bookies a ledger's
    copies are in several directories: then the entries any bookie indexes, with no directory or
    location (the partitions carry every copy, see :func:`_segment`)."""
    out: dict[int, tuple[str, dict[int, int]]] = {}
    if dd.replicas is not None:
        for _, lid, eid, _ in dd.entry_locations():
            out.setdefault(lid, (None, {}))[1][eid] = -1  # type: ignore[arg-type]
        return out
    for current, lid, eid, loc in dd.entry_locations():
        if lid not in out:
            out[lid] = (current, {})
        out[lid][1][eid] = loc
    return out


def _topic_facts(
    dd: DataDir,
    owner: dict[int, str],
    index: dict[int, tuple[str, dict[int, int]]],
    *,
    time_filters: Sequence[Filter] = (),
    metadata_pass: str = "auto",
    stats: ReadStats | None = None,
) -> tuple[dict[str, _TopicFacts], dict[int, array.array] | None]:
    """Markers, first transactional positions and chunk spans of every topic in ``owner``'s values
    (ledger -> topic), from the MessageMetadata of every entry of those ledgers: one native pass over
    the entry logs (``scan``), or a read of each entry's head at its location (``heads``; ``auto``
    picks the cheaper). With ``time_filters``, also the entries no row of which can pass them, per
    ledger (sorted entry ids): the rest, and every entry whose metadata was not decoded, are read."""
    stats = stats if stats is not None else ReadStats()
    facts: dict[str, _TopicFacts] = {}
    if not owner:
        return facts, ({} if time_filters else None)
    candidates: list[tuple[int, int, str | None, bool]] = []  # ledger, entry, uuid of a chunk, transactional
    pruning = _Pruning(time_filters) if time_filters else None

    def absorb(lids: pa.Array, eids: pa.Array, md: Any, keep: Any) -> None:
        """One decoded batch: ``md`` the metadata of entries ``lids``/``eids``, ``keep`` the rows of
        owned ledgers (None: all)."""
        txn = pc.or_(pc.is_valid(md.column("txnid_most_bits")), pc.is_valid(md.column("txnid_least_bits")))
        chunk = pc.fill_null(
            pc.and_(pc.is_valid(md.column("uuid")), pc.greater(md.column("num_chunks_from_msg"), 1)), False
        )
        m = pc.or_(pc.fill_null(txn, False), chunk)
        if keep is not None:
            m = pc.and_(keep, m)
        if pc.any(m).as_py():
            sel = pa.Table.from_arrays(
                [lids, eids, md.column("uuid"), chunk, pc.fill_null(txn, False)], names=["l", "e", "u", "c", "t"]
            ).filter(m)
            for lid, eid, uuid, is_chunk, is_txn in zip(*(sel.column(i).to_pylist() for i in range(5)), strict=True):
                candidates.append((lid, eid, uuid if is_chunk else None, is_txn))
        if pruning is not None:
            pruning.absorb(lids, eids, md, chunk, keep)

    if metadata_pass not in ("auto", "heads", "scan"):
        raise ValueError(f"metadata_pass must be auto, heads or scan, not {metadata_pass!r}")
    logs = [(p, i, md) for p, i, md in dd.entry_logs()]
    mode = metadata_pass
    many = dd.replicas is not None
    if many:
        # Heads are read at one bookie's locations; with several bookies every copy is scanned and
        # only those whose digest verifies count (a damaged copy must not prune or mark anything).
        mode = "scan"
    if mode == "auto":
        n_heads = sum(len(index.get(lid, (None, {}))[1]) for lid in owner)
        log_bytes = sum(int(getattr(md, "total_size", 0) or 0) for _, _, md in logs)
        mode = "heads" if n_heads * HEAD_COST_BYTES < log_bytes else "scan"
    wanted: dict[str, list[tuple[int, int, int, int | None]]] = {}
    for lid in owner if mode == "heads" else ():
        led = dd.ledgers.get(lid)
        last = led.last_entry_id if led is not None else -1
        current, locs = index.get(lid, (None, {}))
        if current is None or last < 0:
            continue
        dlen = bookie_digest.digest_length(led.digest_type) if led is not None and led.digest_type else None
        w = wanted.setdefault(current, [])
        w += [(lid, eid, loc, dlen) for eid, loc in locs.items() if eid <= last]
    if mode == "scan" and logs:
        ledgers = pa.array(sorted(owner), pa.int64())
        for path, _, _ in logs:
            try:
                stats.scan_bytes += os.path.getsize(path)
            except OSError:
                pass
        for b in scan_entry_logs(
            [(p, i) for p, i, _ in logs], "AUTO", include_issues=False, payload_type="binary_view"
        ):
            keep = pc.fill_null(pc.is_in(b.column("ledger_id"), value_set=ledgers), False)
            if many:
                keep = pc.and_(keep, pc.fill_null(b.column("digest_ok"), False))
            if not pc.any(keep).as_py():
                continue
            # metadata only, of every row (views cannot be filtered cheaply; other ledgers give errors)
            absorb(b.column("ledger_id"), b.column("entry_id"), bulk.decode_metadata(b.column("payload")), keep)
    elif mode == "heads":
        readers = _Readers()
        for current, wants in wanted.items():
            for k in range(0, len(wants), 8192):
                part = wants[k : k + 8192]
                heads = read_heads(readers.get(current), part, stats)
                for j, h in enumerate(heads):
                    if h is None:  # not where the index says, or not a Pulsar entry: read it whole
                        try:
                            heads[j] = dd.read_entry(part[j][0], part[j][1])
                            stats.entry_reads += 1
                            stats.entry_bytes += len(heads[j]) + 40  # type: ignore[arg-type]
                        except PulsarkitError:
                            pass
                got = [j for j, h in enumerate(heads) if h is not None]
                if not got:
                    continue
                absorb(
                    pa.array([part[j][0] for j in got], pa.int64()),
                    pa.array([part[j][1] for j in got], pa.int64()),
                    bulk.decode_metadata(pa.array([heads[j] for j in got], pa.binary())),
                    None,
                )
    for lid in owner:
        local = index.get(lid, (None, {}))[1]
        for eid in dd.journal.get(lid, {}):
            if eid not in local:
                candidates.append((lid, eid, None, True))  # decoded below
    seen: set[Pos] = set()
    for lid, eid, uuid, is_txn in sorted(set(candidates), key=lambda c: (c[0], c[1])):
        led = dd.ledgers.get(lid)
        if led is None or eid > led.last_entry_id or (lid, eid) in seen:
            continue
        seen.add((lid, eid))
        f = facts.setdefault(owner[lid], _TopicFacts())
        if not is_txn and uuid is not None:  # a chunk's span needs its uuid only: no need to read it whole
            _span(f, uuid, (lid, eid))
            continue
        try:
            data = dd.read_entry(lid, eid)
            if eid in index.get(lid, (None, {}))[1]:
                stats.entry_reads += 1
                stats.entry_bytes += len(data) + 40  # the record: bookie header, digest, length field
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
    return facts, (pruning.dropped() if pruning is not None else None)


class _Pruning:
    """The entries whose rows all fail the time filters, gathered batch by batch of decoded metadata.

    A row's publish time and broker timestamp are its entry's, so an entry is decided by its own
    metadata; except a chunk: its message's row carries the completing chunk's times, so the chunks
    of a message are dropped together, only when none of them passes. An entry whose metadata does not
    decode (or has no publish time) is kept: its read reports it as before."""

    def __init__(self, filters: Sequence[Filter]) -> None:
        self.filters = list(filters)
        self._dropped: list[pa.Table] = []
        self._chunks: list[pa.Table] = []

    def absorb(self, lids: pa.Array, eids: pa.Array, md: Any, chunk: Any, keep: Any) -> None:
        t = pa.table({"publish_time": md.column("publish_time"), "broker_timestamp": md.column("broker_timestamp")})
        ok = _mask(t, self.filters, TIME_COLUMNS)
        if ok is None:
            return
        unknown = pc.or_(pc.is_valid(md.column("error")), pc.is_null(md.column("publish_time")))
        ok = pc.or_(ok, unknown)
        base = pa.table({"l": lids, "e": eids})
        plain = pc.invert(chunk) if keep is None else pc.and_(keep, pc.invert(chunk))
        drop = pc.and_(plain, pc.invert(ok))
        if pc.any(drop).as_py():
            self._dropped.append(base.filter(drop))
        is_chunk = chunk if keep is None else pc.and_(keep, chunk)
        if pc.any(is_chunk).as_py():
            self._chunks.append(base.append_column("u", md.column("uuid")).append_column("ok", ok).filter(is_chunk))

    def dropped(self) -> dict[int, array.array]:
        parts = list(self._dropped)
        if self._chunks:
            chunks = pa.concat_tables(self._chunks)
            passing = chunks.group_by("u").aggregate([("ok", "any")])
            good = passing.filter(passing.column("ok_any")).column("u")
            parts.append(chunks.filter(pc.invert(pc.is_in(chunks.column("u"), value_set=good))).select(["l", "e"]))
        out: dict[int, array.array] = {}
        if not parts:
            return out
        t = pa.concat_tables([p.cast(pa.schema([("l", pa.int64()), ("e", pa.int64())])) for p in parts])
        t = t.group_by(["l", "e"]).aggregate([]).sort_by([("l", "ascending"), ("e", "ascending")])
        ls, es = t.column("l").combine_chunks(), t.column("e").combine_chunks()
        i = 0
        for lid, n in _runs_of(ls):
            a = array.array("q")
            a.frombytes(_int64_bytes(es.slice(i, n)))
            out[lid] = a
            i += n
        return out


def _runs_of(sorted_ids: pa.Array) -> list[tuple[int, int]]:
    """(value, count) of each run of equal values of a sorted int64 array."""
    if len(sorted_ids) == 0:
        return []
    ree = pc.run_end_encode(sorted_ids)
    ends = ree.run_ends.to_pylist()
    vals = ree.values.to_pylist()
    out, prev = [], 0
    for v, e in zip(vals, ends, strict=True):
        out.append((v, e - prev))
        prev = e
    return out


def _int64_bytes(a: pa.Array) -> bytes:
    """The values of an int64 array without nulls, native-endian."""
    buf = a.buffers()[1]
    return bytes(memoryview(buf)[a.offset * 8 : (a.offset + len(a)) * 8])


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


def _segment(
    dd: DataDir,
    lid: int,
    a: int,
    b: int,
    index: dict[int, tuple[str, dict[int, int]]],
    dropped: array.array | None = None,
) -> Segment:
    led = dd.ledgers.get(lid)
    current, locs = index.get(lid, (None, {}))
    arr = array.array("q", (locs.get(e, -1) for e in range(a, b + 1)))
    gone: set[int] = set()
    if dropped:
        for i in range(bisect.bisect_left(dropped, a), bisect.bisect_right(dropped, b)):
            arr[dropped[i] - a] = PRUNED
            gone.add(dropped[i])
    if dd.replicas is not None:
        return _replicated_segment(dd, lid, a, b, arr, gone)
    journal = {}
    for e, rec in dd.journal.get(lid, {}).items():
        if a <= e <= b and e not in locs and e not in gone:
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


def _replicated_segment(dd: DataDir, lid: int, a: int, b: int, marks: array.array, gone: set[int]) -> Segment:
    """A segment of a ledger several bookies hold: every bookie's copies (per ledger directory, and
    its journal's records no directory of it indexes) and the layout that orders them per entry."""
    assert dd.replicas is not None
    led = dd.ledgers.get(lid)
    copies: list[Replica] = []
    for bookie in dd.replicas.bookies:
        indexed: set[int] = set()
        for d in bookie.dirs:
            locs = d.locations.get(lid, {})
            if not any(a <= e <= b for e in locs):
                continue
            indexed.update(locs)
            arr = array.array("q", (locs.get(e, -1) for e in range(a, b + 1)))
            copies.append(Replica(bookie.bookie_id, str(d.current), arr.tobytes()))
        jr = {
            e: rec.data
            for e, rec in bookie.journal.get(lid, {}).items()
            if a <= e <= b and e not in indexed and e not in gone
        }
        if jr:
            copies.append(Replica(bookie.bookie_id, None, array.array("q", [-1]).tobytes() * (b - a + 1), jr))
    for i in range(len(marks)):
        marks[i] = PRUNED if marks[i] == PRUNED else 0
    return Segment(
        lid,
        a,
        b,
        None,
        led.digest_type if led is not None and led.digest_type else None,
        led.password if led is not None else b"",
        marks.tobytes(),
        {},
        copies,
        dd.replicas.layout(lid),
    )


def _kept(dropped: dict[int, array.array] | None, lid: int, a: int, b: int) -> int:
    """Entries a..b of a ledger that the time filters did not prune."""
    d = dropped.get(lid) if dropped else None
    return b - a + 1 - (bisect.bisect_right(d, b) - bisect.bisect_left(d, a) if d else 0)


#: Pruned entries between two kept ones that still split a run into two segments (fewer stay inside
#: one segment, marked :data:`PRUNED`, which costs their 8-byte location each and no read).
SPLIT_GAP = 256


def _prune_runs(runs: list[tuple[int, int, int]], dropped: dict[int, array.array]) -> list[tuple[int, int, int]]:
    """The runs without their pruned entries: trimmed to the kept ones, split at long pruned stretches."""
    out = []
    for lid, a, b in runs:
        d = dropped.get(lid)
        if not d:
            out.append((lid, a, b))
            continue
        start = None  # first kept entry of the current piece
        prev = a - 1  # last kept entry seen
        i = bisect.bisect_left(d, a)
        e = a
        while e <= b:
            if i < len(d) and d[i] == e:  # a pruned stretch d[i] .. d[j-1]
                j = i
                while j + 1 < len(d) and d[j + 1] == d[j] + 1 and d[j + 1] <= b:
                    j += 1
                stop = d[j]
                if start is not None and stop - e + 1 >= SPLIT_GAP:
                    out.append((lid, start, prev))
                    start = None
                e, i = stop + 1, j + 1
                continue
            nxt = min(d[i] - 1 if i < len(d) else b, b)  # kept stretch e .. nxt
            if start is None:
                start = e
            prev = nxt
            e = nxt + 1
        if start is not None:
            out.append((lid, start, prev))
    return out


def _cut(
    runs: list[tuple[int, int, int]],
    entry_bytes: dict[int, float],
    target: float,
    spans: list[tuple[Pos, Pos]],
    dropped: dict[int, array.array] | None = None,
) -> list[list[tuple[int, int, int]]]:
    """Groups the runs into pieces of about ``target`` bytes (entries the time filters pruned weigh
    nothing), never cutting inside a span."""

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
            size += _kept(dropped, lid, start, end) * per
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
    metadata_pass: str = "auto",
    ledger_dirs: Sequence[str] | None = None,
) -> Plan:
    """Plans a read of ``paths`` (data directories). ``kind`` is ``messages`` or ``entries``;
    ``after``/``until`` (data dir -> topic -> position) bound each topic (exclusive/inclusive), the
    incremental export's high-water marks; ``filters`` prune topics, ledgers and (on publish_time and
    broker_timestamp) entries, and are applied again to the rows by :func:`read_partition`.
    ``metadata_pass`` is how the selected entries' metadata is read (``heads``, ``scan`` or ``auto``,
    see the module doc); :attr:`Plan.read_stats` counts what it read. ``ledger_dirs`` are the bookie
    directories of a cluster whose metadata store is ``paths``' one directory: each entry is then read
    once, from the first copy of its write set that verifies (see ``analysis.replicas``)."""
    if ledger_dirs and len(paths) != 1:
        raise PulsarkitError(f"ledger_dirs needs exactly one data directory (its metadata store), not {len(paths)}")
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
    read_stats = ReadStats()
    time_filters = [f for f in filters if f[0] in TIME_COLUMNS] if kind == "messages" else []
    for path in paths:
        with open_data_dir(path, ledger_dirs=list(ledger_dirs) if ledger_dirs else None) as dd:
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
            pstats = ReadStats()
            facts, dropped = _topic_facts(
                dd, owner, index, time_filters=time_filters, metadata_pass=metadata_pass, stats=pstats
            )
            coord = coordinator_states(dd) if kind == "messages" else {}
            stats[path] = {"plan_seconds": time.perf_counter() - t0, "read": pstats.as_dict()}
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
                if dropped:
                    before = sum(b - a + 1 for _, a, b in rd)
                    rd = _prune_runs(rd, dropped)
                    pstats.pruned_entries += before - sum(_kept(dropped, *r) for r in rd)
                if not rd:
                    continue
                for lid, a, b in rd:
                    led = dd.ledgers.get(lid)
                    n = max(led.entries_on_bookie, 1) if led is not None else 1
                    per_entry[lid] = (led.bytes_on_bookie / n) if led is not None and led.bytes_on_bookie else 1024.0
                    total += per_entry[lid] * _kept(dropped, lid, a, b)
                work.append((name, k, rd, f, lo))
            target = max(min(float(max_partition_bytes), total / max(min_partitions, 1)), 1.0, target)
            for name, k, rd, f, lo in work:
                spans = list(f.chunks.values())
                for piece in _cut(rd, per_entry, target, spans, dropped):
                    segs = [_segment(dd, lid, a, b, index, (dropped or {}).get(lid)) for lid, a, b in piece]
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
                            int(
                                sum(per_entry[s.ledger_id] * _kept(dropped, s.ledger_id, s.first, s.last) for s in segs)
                            ),
                        )
                    )
            stats[path]["read"] = pstats.as_dict()
            read_stats.add(pstats)
    return Plan(partitions, marks, issues, stats, target, topic_ledgers, read_stats)


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


def iter_entries(
    part: ScanPartition, stats: ReadStats | None = None
) -> Iterator[tuple[int, int, bytes | None, str | None]]:
    """``(ledger, entry, data, error)`` of the partition's entries in order, read as
    ``DataDir.read_entry`` reads them (the index's location, else the journal; digest verified);
    entries the plan pruned are not read. ``stats`` counts the reads."""
    for lids, eids, datas, errs in _entry_chunks(part, stats if stats is not None else ReadStats()):
        yield from zip(lids, eids, datas, errs)


_Chunk = tuple[list[int], list[int], list[bytes | None], list[str | None]]


def _entry_chunks(part: ScanPartition, stats: ReadStats) -> Iterator[_Chunk]:
    """:func:`iter_entries`' rows as column lists, a chunk at a time (at most ``_READ_AHEAD``
    entries): a chunk of entries that all read and verify is passed on as built by the native read,
    with no Python work per entry."""
    readers = _Readers()
    for seg in part.segments:
        locs = array.array("q")
        locs.frombytes(seg.locations)
        if seg.replicas or seg.layout is not None:
            yield from _sliced(_replicated_entries(seg, readers, stats))
            continue
        try:
            if seg.current is None or seg.digest is None:
                raise LookupError  # no bookie log or no known digest: entry by entry
            lid, digest = seg.ledger_id, bookie_digest.digest_type_name(seg.digest)
            overhead = 4 + 32 + bookie_digest.digest_length(digest)  # record length, header, digest
            reader = readers.get(seg.current)
        except (LookupError, PulsarkitError):  # _read_one makes each entry's row, its error included
            yield from _sliced(r for i in range(len(locs)) if (r := _read_one(seg, locs, i, readers, stats)))
            continue
        # The digest is known and the entries are in one bookie's logs: read and verified
        # _READ_AHEAD at a time in one native call each, with the rows of the entry-by-entry path.
        start = 0
        while start < len(locs):
            chunk = locs[start : start + _READ_AHEAD]
            first = seg.first + start
            try:
                got = reader.read_payloads(chunk, lid, first, digest, seg.password, _READ_AHEAD_BYTES)
            except OSError:  # a log missing or unreadable: entry by entry, each saying so
                got = [None] * len(chunk)
            base, start = start, start + len(got)
            if all(type(g) is bytes for g in got):
                n = len(got)
                stats.entry_reads += n
                stats.entry_bytes += sum(map(len, got)) + n * overhead
                yield [lid] * n, list(range(first, first + n)), got, [None] * n
                continue
            rows = []
            for k, data in enumerate(got):
                eid = first + k
                if isinstance(data, bytes):
                    stats.entry_reads += 1
                    stats.entry_bytes += len(data) + overhead
                    rows.append((lid, eid, data, None))
                elif isinstance(data, tuple):  # (message, stored length when it was read)
                    message, stored = data
                    if stored is not None:
                        stats.entry_reads += 1
                        stats.entry_bytes += stored + 4
                    rows.append((lid, eid, None, f"ledger {lid} entry {eid}: {message}"))
                elif (row := _read_one(seg, locs, base + k, readers, stats)) is not None:
                    rows.append(row)
            yield _columns(rows)


def _sliced(rows: Iterable[tuple[int, int, bytes | None, str | None]]) -> Iterator[_Chunk]:
    """Rows made one by one, passed on ``_READ_AHEAD`` at a time (what a read holds stays bounded)."""
    it = iter(rows)
    while chunk := list(itertools.islice(it, _READ_AHEAD)):
        yield _columns(chunk)


def _columns(rows: Iterable[tuple[int, int, bytes | None, str | None]]) -> _Chunk:
    cols = tuple(map(list, zip(*rows)))
    return cols if cols else ([], [], [], [])  # type: ignore[return-value]


#: Entries, and bytes, read and verified per native call (it stops after the entry that reaches the
#: bytes): bounds what a read holds beyond its batch, whatever the entries' sizes.
_READ_AHEAD = 256
_READ_AHEAD_BYTES = 1 << 20


def _read_one(
    seg: Segment, locs: array.array, i: int, readers: _Readers, stats: ReadStats
) -> tuple[int, int, bytes | None, str | None] | None:
    """Entry ``seg.first + i`` of a one-bookie segment, read and verified on its own (None when the
    plan pruned it): from its entry log, else the journal."""
    lid, eid, loc = seg.ledger_id, seg.first + i, locs[i]
    if loc == PRUNED:
        return None
    try:
        if loc >= 0 and seg.current is not None:
            try:
                raw = readers.get(seg.current).read(loc, lid, eid)
            except OSError as e:
                raise DataDirError(f"entry log missing or unreadable for ledger {lid} entry {eid}: {e}")
            stats.entry_reads += 1
            stats.entry_bytes += len(raw) + 4
        elif eid in seg.journal:
            raw = seg.journal[eid]
            stats.journal_entries += 1
        else:
            raise DataDirError(f"ledger {lid} entry {eid} is on no bookie and in no journal")
        digest = seg.digest or bookie_digest.detect_digest_type(raw, seg.password) or "CRC32C"
        data = bookie_digest.unpack_entry(raw, digest, seg.password, ledger_id=lid, entry_id=eid).payload
    except PulsarkitError as e:
        return lid, eid, None, f"ledger {lid} entry {eid}: {e}"
    return lid, eid, data, None


def _replicated_entries(
    seg: Segment, readers: _Readers, stats: ReadStats
) -> Iterator[tuple[int, int, bytes | None, str | None]]:
    """A segment's entries from several bookies, as ``DataDir.read_entry`` reads them there: each from
    the first copy in read order (:func:`~pulsarkit.analysis.replicas.read_order`: its write set
    first) whose digest verifies. A copy passed over is counted in ``stats.skipped_copies``; an entry
    no copy verifies is an error naming every copy's fault."""
    lid = seg.ledger_id
    marks = array.array("q")
    marks.frombytes(seg.locations)
    locs = []
    for r in seg.replicas:
        a = array.array("q")
        a.frombytes(r.locations)
        locs.append(a)
    for i, eid in enumerate(range(seg.first, seg.last + 1)):
        if marks[i] == PRUNED:
            continue
        holders = [k for k, r in enumerate(seg.replicas) if locs[k][i] >= 0 or eid in r.journal]
        order = read_order(seg.layout, list(dict.fromkeys(seg.replicas[k].bookie_id for k in holders)), eid)
        faults: list[str] = []
        data: bytes | None = None
        for bookie_id in order:
            for k in holders:
                r = seg.replicas[k]
                if r.bookie_id != bookie_id:
                    continue
                try:
                    if locs[k][i] >= 0 and r.current is not None:
                        try:
                            raw = readers.get(r.current).read(locs[k][i], lid, eid)
                        except OSError as e:
                            raise DataDirError(f"entry log missing or unreadable: {e}")
                        stats.entry_reads += 1
                        stats.entry_bytes += len(raw) + 4
                    else:
                        raw = r.journal[eid]
                        stats.journal_entries += 1
                    digest = seg.digest or bookie_digest.detect_digest_type(raw, seg.password) or "CRC32C"
                    data = bookie_digest.unpack_entry(raw, digest, seg.password, ledger_id=lid, entry_id=eid).payload
                    break
                except PulsarkitError as e:
                    faults.append(f"bookie {bookie_id}: {e}")
            if data is not None:
                break
        if data is None:
            if not faults:
                ws = f" (write set {', '.join(seg.layout.write_set(eid))})" if seg.layout is not None else ""
                yield lid, eid, None, f"ledger {lid} entry {eid} is on no given bookie{ws}"
            else:
                yield lid, eid, None, f"ledger {lid} entry {eid}: no copy verifies: {'; '.join(faults)}"
            continue
        stats.skipped_copies += len(faults)
        yield lid, eid, data, None


def _batches(
    part: ScanPartition, batch_entries: int, batch_bytes: int, stats: ReadStats | None = None
) -> Iterator[tuple[list[int], list[int], list[bytes | None], list[str | None]]]:
    lids: list[int] = []
    eids: list[int] = []
    datas: list[bytes | None] = []
    errs: list[str | None] = []
    size = 0
    for c_lids, c_eids, c_datas, c_errs in _entry_chunks(part, stats if stats is not None else ReadStats()):
        i = 0
        while i < len(c_lids):
            # how many of this chunk's entries the batch takes: up to its entry or byte limit
            room, j = batch_entries - len(lids), i
            # (one entry at least, so limits of 0 or less give one-entry batches, as they always did)
            while j < len(c_lids) and (j == i or (j - i < room and size < batch_bytes)):
                d = c_datas[j]
                size += len(d) if d else 0
                j += 1
            lids += c_lids[i:j]
            eids += c_eids[i:j]
            datas += c_datas[i:j]
            errs += c_errs[i:j]
            i = j
            if len(lids) >= batch_entries or size >= batch_bytes:
                yield lids, eids, datas, errs
                lids, eids, datas, errs, size = [], [], [], [], 0
    if lids:
        yield lids, eids, datas, errs


#: Entry bytes decoded together (one native call each for metadata and messages). The rows of a
#: batch are about 2-3x its entry bytes once decompressed, and a read holds a few copies of them at
#: its peak: with 1 MiB a process reading 64 MiB partitions peaks near 210 MB (2 MiB: 225 MB, 16 MiB:
#: 480 MB, with 105 MB of it the interpreter and its modules), and decodes as fast or faster (smaller
#: buffers stay in cache); one entry larger than this is a batch of its own. See bench/spark_memory.py.
BATCH_BYTES = 1 << 20


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
    batch_bytes: int = BATCH_BYTES,
    stats: ReadStats | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of one partition as Arrow record batches of ``columns`` (default: all, in the order
    of :data:`MESSAGE_FIELDS` / :data:`ENTRY_FIELDS`). Unreadable entries are skipped, as the single
    process skips them (``on_error="fail"`` raises :class:`UnreadableEntry` instead). ``stats``, when
    given, counts what was read from the entry logs (:class:`ReadStats`)."""
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
                stats=stats,
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
        for lids, eids, datas, errs in _batches(part, batch_entries, batch_bytes, stats):
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
    try:
        for lids, eids, datas, errs in _batches(part, batch_entries, batch_bytes, stats):
            if on_error == "fail" and any(errs):
                raise UnreadableEntry(next(e for e in errs if e))
            t = state.messages(lids, eids, datas, filters)
            if on_error == "fail" and state.bad:
                raise UnreadableEntry(state.bad[0])
            out = _emit(t, part, filters)
            if out.num_rows:
                yield _select(out, schema)
    finally:
        # the Arrow pool keeps freed pages for reuse; a Spark worker then sits idle holding a
        # partition's peak until its next task: hand them back
        pa.default_memory_pool().release_unused()


def _one_array(c: pa.ChunkedArray) -> pa.Array:
    # combine_chunks copies even a single chunk: 20% of an export's time went to copying payloads
    return c.chunk(0) if c.num_chunks == 1 else c.combine_chunks()


def _select(t: pa.Table, schema: pa.Schema) -> pa.RecordBatch:
    cols = [_one_array(t.column(n)) for n in schema.names]
    cols = [c.cast(f.type) if c.type != f.type else c for c, f in zip(cols, schema, strict=True)]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _emit(t: pa.Table, part: ScanPartition, filters: Sequence[Filter]) -> pa.Table:
    """The rows after the partition's mark that pass the pushed-down filters."""
    m = _mask(t, filters, [c for c in ("ledger_id", "topic", *TIME_COLUMNS) if c in t.column_names])
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
        pt = [(c, op, ref) for c, op, ref in filters if c in TIME_COLUMNS]
        if pt:  # every row of a plain entry has the entry's times: drop it before it is decompressed
            times = pa.table({c: md.column(c) for c in TIME_COLUMNS})
            m = _mask(times, pt, TIME_COLUMNS)
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
    "PRUNED",
    "Plan",
    "ReadStats",
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
    "read_heads",
    "read_partition",
]
