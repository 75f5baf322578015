"""Messages and entries of data directories, planned on one machine and read partition by partition.

This is the one message reader: behind ``pulsarkit messages`` and ``backlog`` (the same read with a
subscription's acknowledgements as a filter), :mod:`pulsarkit.analysis.messages`, the ``pulsarkit`` /
``pulsarkit-entries`` Spark data sources and ``pulsarkit export``; it needs no Spark. :func:`plan`
opens each data directory once (the driver; :func:`plan_data_dir` plans one already open) and cuts
every topic's ledgers into :class:`ScanPartition` s of about ``max_partition_bytes``;
:func:`read_partition` (an executor, or the same process) reads a partition's entries by their
bookie locations (digests verified) and turns each Arrow batch of entries into messages with two
native calls (``decode_metadata``, then ``explode_messages`` on the plain entries): batches split,
codecs undone, PIP-70 indexes computed in the core.

Rows are of the one schema (:data:`MESSAGE_FIELDS`), each entry read and parsed once:

* **Transactions** are topic-wide: a message's state is its commit/abort marker in the topic, else
  the coordinator's log, and read-committed stops a topic at the first message of a transaction
  with no marker yet (``maxReadPosition``). The driver finds them in one native pass over the entry
  logs (``scan_entry_logs`` as views + ``decode_metadata``: no payload copied or decompressed), or
  of the entries' heads, and takes the transactions and markers from that metadata (no entry is read
  again for them); every partition gets the states and the cut.
* **Chunked messages** (an id is the last chunk's position) never straddle two partitions: the
  same pass gives every chunked message's span, and no cut falls inside one; an incremental read
  after a position starts at the first chunk of a message that ends after it.
* Markers, encrypted entries and chunks (rare) go through the per-entry rules one at a time
  (:class:`~pulsarkit.scan.messages.EntryRules`); every other entry is decoded column-wise.

**Memory follows the data, not the metadata.** A ledger's range (``0..lastEntryId`` of a closed
ledger) is cut at the entries some bookie holds: segments cover runs of held entries only, and each
run the metadata claims but no bookie holds is a gap of its partition (:attr:`ScanPartition.gaps`),
read as one issue with its count (one error row for ``entries``), however long: a forged
``lastEntryId`` of 4·10^9 costs one record, not a location per entry id.

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
entry logs' bytes (a topic filter selecting a small part of a directory), else scans. ``read`` (what
one reader per topic plans with, :func:`pulsarkit.analysis.messages.message_batches`) leaves a topic's pass
to its read when the topic is read as one partition (``min_partitions=1``, its bytes within
``max_partition_bytes``) from its start, with no time or ledger filter, from one bookie: its chunk spans
would only keep cuts out of its chunked messages, and its transactions are found by the read, which plans
the topic again with its pass (:attr:`ScanPartition.refine`) at the first transactional entry it meets and
goes on from that batch (nothing before it depends on them); a topic with no transaction is planned and
read without its pass. Such a plan's marks do not account for an open transaction.

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
(:attr:`~pulsarkit.scan.records.Ledger.closed_time`) bounds it only while the brokers' clocks
agree (Pulsar's own time seek allows 60 s of skew there). The metadata pass times every entry
anyway (transactions are topic-wide), and deciding per entry needs no assumption about clocks.

:class:`ReadStats` counts what was read from the entry logs: :attr:`ScanPlan.read_stats` for the plan,
``read_partition(..., stats=...)`` for a partition.
"""

from __future__ import annotations

import array
import bisect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..broker.topic_name import is_system_topic, ml_kind, ml_to_topic, partition_of
from ..errors import PulsarkitError
from .datadir import DataDir, DataDirSpec
from .facts import TopicFacts, location_index, topic_facts
from .partition import PRUNED, ReadStats, Replica, ScanPartition, Segment
from .records import DataDirError, Ledger, held_pieces
from .schema import TIME_COLUMNS, Filter, Pos, passes
from .transactions import TXN_MODES, coordinator_states


@dataclass(kw_only=True)
class ScanPlan:
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


Runs = list[tuple[int, int, int]]


def _runs(dd: DataDir, lids: Sequence[int]) -> tuple[Runs, Runs]:
    """(ledger, first, last) readable ranges, as ``DataDir.entries`` reads them, cut at what the
    bookies hold: the runs of held entries, and the gaps (claimed by the metadata, held by no
    bookie). Both are as many as the data has runs, whatever ``lastEntryId`` claims."""
    out: Runs = []
    gaps: Runs = []
    for lid in lids:
        led = dd.ledgers.get(lid)
        last = led.last_entry_id if led is not None else -1
        for a, b, held in held_pieces(dd.held_entries(lid), 0, last):
            (out if held else gaps).append((lid, a, b))
    return out, gaps


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


def _ledger_auth(led: Ledger | None) -> dict[str, Any]:
    """A segment's ``digest`` and ``password`` from its ledger's metadata (no digest type known: None)."""
    if led is None:
        return {"digest": None, "password": b""}
    return {"digest": led.digest_type or None, "password": led.password}


def _segment(
    dd: DataDir,
    lid: int,
    a: int,
    b: int,
    index: dict[int, tuple[str, dict[int, int]]],
    dropped: array.array[int] | None = None,
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
        ledger_id=lid,
        first=a,
        last=b,
        current=current,
        **_ledger_auth(led),
        locations=arr.tobytes(),
        journal=journal,
    )


def _replicated_segment(dd: DataDir, lid: int, a: int, b: int, marks: array.array[int], gone: set[int]) -> Segment:
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
            copies.append(Replica(bookie_id=bookie.bookie_id, current=str(d.current), locations=arr.tobytes()))
        jr = {
            e: rec.data
            for e, rec in bookie.journal.get(lid, {}).items()
            if a <= e <= b and e not in indexed and e not in gone
        }
        if jr:
            none = array.array("q", [-1]).tobytes() * (b - a + 1)
            copies.append(Replica(bookie_id=bookie.bookie_id, current=None, locations=none, journal=jr))
    for i in range(len(marks)):
        marks[i] = PRUNED if marks[i] == PRUNED else 0
    return Segment(
        ledger_id=lid,
        first=a,
        last=b,
        current=None,
        **_ledger_auth(led),
        locations=marks.tobytes(),
        replicas=copies,
        layout=dd.replicas.layout(lid),
    )


def _kept(dropped: dict[int, array.array[int]] | None, lid: int, a: int, b: int) -> int:
    """Entries a..b of a ledger that the time filters did not prune."""
    d = dropped.get(lid) if dropped else None
    return b - a + 1 - (bisect.bisect_right(d, b) - bisect.bisect_left(d, a) if d else 0)


#: Pruned entries between two kept ones that still split a run into two segments (fewer stay inside
#: one segment, marked :data:`PRUNED`, which costs their 8-byte location each and no read).
SPLIT_GAP = 256


def _prune_runs(runs: list[tuple[int, int, int]], dropped: dict[int, array.array[int]]) -> list[tuple[int, int, int]]:
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
    dropped: dict[int, array.array[int]] | None = None,
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
    paths: Sequence[str | DataDirSpec],
    *,
    kind: str = "messages",
    txn: str = "committed",
    include_system: bool = False,
    include_deleted: bool = False,
    filters: Sequence[Filter] = (),
    after: Mapping[str, Mapping[str, Pos]] | None = None,
    until: Mapping[str, Mapping[str, Pos]] | None = None,
    max_partition_bytes: int = 64 << 20,
    min_partitions: int = 2,
    metadata_pass: str = "auto",
    ledger_dirs: Sequence[str] | None = None,
) -> ScanPlan:
    """Plans a read of ``paths`` (data directories, or :class:`DataDirSpec` values: a cluster's parts, named in
    the plan by their :attr:`DataDirSpec.key`). ``kind`` is ``messages`` or ``entries``;
    ``after``/``until`` (data dir -> topic -> position) bound each topic (exclusive/inclusive), the
    incremental export's high-water marks; ``filters`` prune topics, ledgers and (on publish_time and
    broker_timestamp) entries, and are applied again to the rows by :func:`read_partition`.
    ``metadata_pass`` is how the selected entries' metadata is read (``heads``, ``scan`` or ``auto``,
    see the module doc); :attr:`ScanPlan.read_stats` counts what it read. ``ledger_dirs`` are the bookie
    directories of a cluster whose metadata store is ``paths``' one directory: each entry is then read
    once, from the first copy of its write set that verifies (see ``analysis.replicas``)."""
    if ledger_dirs and len(paths) != 1:
        raise PulsarkitError(f"ledger_dirs needs exactly one data directory (its metadata store), not {len(paths)}")
    if metadata_pass == "read":  # a refined read plans its topic again on the open directory
        raise ValueError("metadata_pass='read' needs the directory open while it is read: plan_data_dir")
    out = ScanPlan(partitions=[], marks={}, issues=[], stats={}, target_bytes=1.0)
    for source in paths:
        if isinstance(source, DataDirSpec):
            if ledger_dirs:
                raise PulsarkitError("ledger_dirs go into the DataDirSpec")
            spec, path = source, source.key
        else:
            spec, path = DataDirSpec.of(source, ledger_dirs=ledger_dirs), source
        with spec.open() as dd:
            p = plan_data_dir(
                dd,
                path,
                kind=kind,
                txn=txn,
                include_system=include_system,
                include_deleted=include_deleted,
                filters=filters,
                after=(after or {}).get(path),
                until=(until or {}).get(path),
                max_partition_bytes=max_partition_bytes,
                min_partitions=min_partitions,
                metadata_pass=metadata_pass,
                min_target=out.target_bytes,
            )
        out.partitions += p.partitions
        out.marks.update(p.marks)
        out.issues += p.issues
        out.stats.update(p.stats)
        out.topic_ledgers.update(p.topic_ledgers)
        out.read_stats.add(p.read_stats)
        out.target_bytes = p.target_bytes
    return out


def plan_data_dir(
    dd: DataDir,
    path: str,
    *,
    topics: Sequence[str] | None = None,
    kind: str = "messages",
    txn: str = "committed",
    include_system: bool = False,
    include_deleted: bool = False,
    filters: Sequence[Filter] = (),
    after: Mapping[str, Pos] | None = None,
    until: Mapping[str, Pos] | None = None,
    max_partition_bytes: int = 64 << 20,
    min_partitions: int = 2,
    metadata_pass: str = "auto",
    min_target: float = 1.0,
) -> ScanPlan:
    """:func:`plan` of one data directory already open (``path`` names it in the plan). ``topics``
    (managed-ledger names, as :meth:`DataDir.resolve` gives them) selects and orders the topics,
    system topics included when named; ``after``/``until``: topic -> position. ``metadata_pass`` may
    also be ``read`` (see the module doc): the partitions are then read in this process, ``dd`` open."""
    if kind not in ("messages", "entries"):
        raise ValueError(f"kind must be messages or entries, not {kind!r}")
    if txn not in TXN_MODES:
        raise PulsarkitError(f"txn must be one of {TXN_MODES}, not {txn!r}")
    partitions: list[ScanPartition] = []
    target = min_target
    marks: dict[str, dict[str, Pos]] = {}
    topic_ledgers: dict[str, dict[str, list[int]]] = {}
    issues: list[str] = [str(i) for i in dd.issues]
    stats: dict[str, Any] = {}
    time_filters = [f for f in filters if f[0] in TIME_COLUMNS] if kind == "messages" else []
    t0 = time.perf_counter()
    found: list[tuple[str | None, str, Runs, Runs]] = []  # name, kind, held runs, gaps
    ml_of: dict[str | None, str] = {}
    name: str | None  # a topic's, None for a deleted ledger's unknown one (include_deleted)
    led: Ledger | None
    for ml in dd.managed_ledger_names() if topics is None else topics:
        k = ml_kind(ml)
        name = ml_to_topic(ml)
        if kind == "messages" and k != "topic":
            if topics is None:
                continue
            raise DataDirError(
                f"{name} is a {k.replace('_', ' ')} topic: its entries are not messages "
                f"(see pulsarkit.analysis.transactions)"
            )
        if kind == "messages" and topics is None and is_system_topic(name) and not include_system:
            continue
        found.append((name, k, *_runs(dd, dd.ml_ledgers(ml))))
        ml_of[name] = ml
        topic_ledgers.setdefault(path, {})[name] = dd.ml_ledgers(ml)
    if include_deleted:
        for led in sorted(dd.ledgers.values(), key=lambda x: x.ledger_id):
            if led.referenced or led.entries_on_bookie == 0:
                continue
            if kind == "messages" and not (
                led.kind == "topic" or (led.state == "DELETED" and led.deleted_guess == "topic")
            ):
                continue
            found.append((led.topic, led.kind, *_runs(dd, [led.ledger_id])))
    found = [t for t in found if passes(filters, "topic", t[0])]
    # the locations of the ledgers read only (not of every ledger of the directory)
    index = location_index(dd, {lid for t in found for run in (t[2], t[3]) for lid, _, _ in run})
    # the topics whose metadata pass is left to their read (metadata_pass="read")
    deferred = {
        t[0]
        for t in found
        if _deferrable(dd, kind, metadata_pass, filters, min_partitions)
        and t[0] in ml_of
        and _one_piece(dd, t[0], t[2], after, max_partition_bytes)
    }
    owner = {lid: t[0] or f"#{lid}" for t in found if t[0] not in deferred for lid, _, _ in t[2]}
    owner = owner if kind == "messages" else {}
    pstats = ReadStats()
    mode = "auto" if metadata_pass == "read" else metadata_pass
    facts, dropped = topic_facts(dd, owner, index, time_filters=time_filters, metadata_pass=mode, stats=pstats)
    # the coordinators' logs only when a topic read holds a transactional message or marker: a
    # transaction's state is looked up for nothing else
    txns = any(f.first_txn or f.markers for f in facts.values())
    coord = coordinator_states(dd) if kind == "messages" and txns else {}
    stats[path] = {"plan_seconds": time.perf_counter() - t0, "read": pstats.as_dict()}
    total = 0.0
    per_entry: dict[int, float] = {}
    work: list[tuple[str | None, str, Runs, TopicFacts, Pos | None, Runs]] = []
    dmarks = marks.setdefault(path, {})
    for name, k, runs, gaps in found:
        f = facts.get(name or f"#{runs[0][0] if runs else -1}", TopicFacts())
        lo = (after or {}).get(name) if name else None
        hi = (until or {}).get(name) if name else None
        cut = _clip(runs, None, hi)
        gaps = _clip(gaps, None, hi)
        if kind == "messages" and txn == "committed" and name is not None:
            ongoing = [p for key, p in f.first_txn.items() if key not in f.markers]
            if ongoing:
                stop = _before(cut, min(ongoing))
                cut = _clip(cut, None, stop) if stop is not None else []
                gaps = _clip(gaps, None, stop) if stop is not None else []
        mark = _last(cut)
        if name is not None:
            if mark is not None and (lo is None or mark >= lo):
                dmarks[name] = mark
            elif lo is not None:
                dmarks[name] = lo
        start = None
        if lo is not None:
            start = (lo[0], lo[1] + 1)
            for first, last in f.chunks.values():  # a message that ends after the mark needs all its chunks
                if first <= lo < last and first < start:
                    start = first
        rd = _clip(cut, start, None)
        rd = [r for r in rd if _ledger_needed(r[0], filters, f, rd)]
        gaps = [g for g in _clip(gaps, start, None) if passes(filters, "ledger_id", g[0])]
        if dropped:
            before = sum(b - a + 1 for _, a, b in rd)
            rd = _prune_runs(rd, dropped)
            pstats.pruned_entries += before - sum(_kept(dropped, *r) for r in rd)
        if not rd and not gaps:
            continue
        for lid, a, b in rd:
            led = dd.ledgers.get(lid)
            n = max(led.entries_on_bookie, 1) if led is not None else 1
            per_entry[lid] = (led.bytes_on_bookie / n) if led is not None and led.bytes_on_bookie else 1024.0
            total += per_entry[lid] * _kept(dropped, lid, a, b)
        work.append((name, k, rd, f, lo, gaps))
    target = max(min(float(max_partition_bytes), total / max(min_partitions, 1)), 1.0, target)
    for name, k, rd, f, lo, gaps in work:
        spans = list(f.chunks.values())
        hi = (until or {}).get(name) if name else None
        refine = _refine(dd, path, ml_of[name], kind, txn, filters, hi) if name in deferred else None
        first_part = len(partitions)
        for piece in _cut(rd, per_entry, target, spans, dropped):
            segs = [_segment(dd, lid, a, b, index, (dropped or {}).get(lid)) for lid, a, b in piece]
            part = partition_of(name)[1] if name else -1
            partitions.append(
                ScanPartition(
                    data_dir=path,
                    topic=name,
                    kind=k,
                    partition=part,
                    segments=segs,
                    after=lo,
                    markers=f.markers,  # shared by a topic's partitions (a copy each when pickled)
                    coordinator=coord,
                    bytes=int(sum(per_entry[s.ledger_id] * _kept(dropped, s.ledger_id, s.first, s.last) for s in segs)),
                    refine=refine,
                )
            )
        _place_gaps(partitions, first_part, gaps, path, name, k, f, coord, lo)
    stats[path]["read"] = pstats.as_dict()
    return ScanPlan(
        partitions=partitions,
        marks=marks,
        issues=issues,
        stats=stats,
        target_bytes=target,
        topic_ledgers=topic_ledgers,
        read_stats=pstats,
    )


def _deferrable(dd: DataDir, kind: str, metadata_pass: str, filters: Sequence[Filter], min_partitions: int) -> bool:
    """Whether ``metadata_pass="read"`` can leave a topic's pass to its read: a plan depends on the pass
    through the topic's transactions (which the read finds at its first transactional entry, see
    :func:`_refine`), the entries time filters prune, and its chunk spans, which only keep cuts out of
    chunked messages (one partition has no cut: ``min_partitions`` 1 and :func:`_one_piece`), move the start
    of a read after a position and keep ledgers a ledger filter would drop. One bookie only (a refined
    read goes on from an entry of one bookie's segment)."""
    if metadata_pass != "read" or kind != "messages" or min_partitions > 1 or dd.replicas is not None:
        return False
    return not any(f[0] in TIME_COLUMNS or f[0] == "ledger_id" for f in filters)


def _refine(
    dd: DataDir, path: str, ml: str, kind: str, txn: str, filters: Sequence[Filter], hi: Pos | None
) -> Callable[[], tuple[ScanPartition | None, ReadStats]]:
    """The topic's partition planned again with its metadata pass (what the read of a partition planned
    without it calls at its first transactional entry), None when the read-committed cut leaves nothing,
    and what that pass read (the read counts it as its own)."""

    def again() -> tuple[ScanPartition | None, ReadStats]:
        name = ml_to_topic(ml)
        p = plan_data_dir(dd, path, topics=[ml], kind=kind, txn=txn, filters=filters,
                          until={name: hi} if hi is not None else None, min_partitions=1,
                          max_partition_bytes=1 << 62)  # fmt: skip
        assert len(p.partitions) <= 1
        return (p.partitions[0] if p.partitions else None), p.read_stats

    return again


def _one_piece(dd: DataDir, name: str | None, runs: Runs, after: Mapping[str, Pos] | None, limit: int) -> bool:
    """True when the topic is read from its start (no ``after`` position) and all its held entries
    weigh at most ``limit`` bytes as the cut weighs them: then its partition is one, whatever the
    chunk spans (the cut's target is at least the smaller of ``limit`` and every topic's weight)."""
    if name is not None and (after or {}).get(name) is not None:
        return False
    weight = 0.0
    for lid, a, b in runs:
        led = dd.ledgers.get(lid)
        n = max(led.entries_on_bookie, 1) if led is not None else 1
        per = (led.bytes_on_bookie / n) if led is not None and led.bytes_on_bookie else 1024.0
        if per < 1.0:  # the cut weighs such an entry 1 byte, more than the plan's total does
            return False
        weight += per * (b - a + 1)
    return weight <= limit


def _place_gaps(
    partitions: list[ScanPartition],
    first: int,
    gaps: Runs,
    path: str,
    name: str | None,
    k: str,
    f: TopicFacts,
    coord: dict[Pos, str],
    lo: Pos | None,
) -> None:
    """Gives each gap of a topic to the partition (of ``partitions[first:]``, the topic's) whose
    segments come just before it, so it is reported once, in order; a topic with nothing held gets a
    partition of its gaps alone."""
    if not gaps:
        return
    mine = partitions[first:]
    if not mine:
        part = partition_of(name)[1] if name else -1
        mine = [ScanPartition(data_dir=path, topic=name, kind=k, partition=part, segments=[], after=lo,
                              markers=dict(f.markers), coordinator=coord)]  # fmt: skip
        partitions.append(mine[0])
    starts = [(p.segments[0].ledger_id, p.segments[0].first) if p.segments else (-1, -1) for p in mine]
    for g in gaps:
        mine[max(bisect.bisect_right(starts, (g[0], g[1])) - 1, 0)].gaps.append(g)


def _ledger_needed(lid: int, filters: Sequence[Filter], f: TopicFacts, runs: list[tuple[int, int, int]]) -> bool:
    """A ledger is read when it passes the ledger filters, or holds chunks of a message ending in one that does."""
    if passes(filters, "ledger_id", lid):
        return True
    for a, b in f.chunks.values():
        if a[0] <= lid <= b[0] and passes(filters, "ledger_id", b[0]):
            return True
    return False
