"""A plan's partitions read: entries by their bookie locations (digests verified; with several bookies
the first copy in read order that verifies), in bounded batches, turned into rows of the one schema."""

from __future__ import annotations

import array
import bisect
import itertools
import os
from collections.abc import Generator, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from .. import bulk
from ..bookkeeper import digest as bookie_digest
from ..codec.columns import binary_array, int64_array, scalar, string_array
from ..errors import PulsarkitError
from ..lazy import deferred
from .datadir import DataDirSpec
from .messages import AckFilter, MessageState, OnIssue
from .partition import PRUNED, Readers, ReadStats, ScanPartition, Segment, starting_at
from .plan import plan
from .prefetch import decode_threads, prefetched
from .prefetch import default_depth as prefetch_depth
from .records import DataDirError, Issue, missing_message
from .replicas import read_order
from .schema import ENTRY_FIELDS, TIME_COLUMNS, Filter, arrow_schema, filter_mask, message_fields

pc = deferred("pyarrow.compute")


def iter_entries(
    part: ScanPartition, stats: ReadStats | None = None
) -> Iterator[tuple[int, int, bytes | None, str | None]]:
    """``(ledger, entry, data, error)`` of the partition's entries in order, read as
    ``DataDir.read_entry`` reads them (the index's location, else the journal; digest verified);
    entries the plan pruned are not read. ``stats`` counts the reads."""
    for lids, eids, datas, errs in _entry_chunks(part, stats if stats is not None else ReadStats()):
        yield from zip(lids, eids, datas, errs)


_Chunk = tuple[list[int], list[int], list[bytes | None], list[str | None]]


def gap_message(part: ScanPartition, lid: int, a: int, b: int) -> str:
    """What a run of entries no bookie holds is called (one entry: as a single read says it)."""
    many = any(s.replicas or s.layout is not None for s in part.segments)
    return missing_message(lid, a, b, "on no given bookie" if many else "on no bookie and in no journal")


def _entry_chunks(part: ScanPartition, stats: ReadStats, on_issue: OnIssue | None = None) -> Iterator[_Chunk]:
    """:func:`iter_entries`' rows as column lists, a chunk at a time (at most ``_READ_AHEAD``
    entries): a chunk of entries that all read and verify is passed on as built by the native read,
    with no Python work per entry. A gap (:attr:`ScanPartition.gaps`) is one row, its error saying
    which entries and how many, in its place in the order."""
    readers = Readers()
    gaps = sorted(part.gaps)
    for seg in [*part.segments, None]:
        while gaps and (seg is None or gaps[0][:2] < (seg.ledger_id, seg.first)):
            lid, a, b = gaps.pop(0)
            yield [lid], [a], [None], [gap_message(part, lid, a, b)]
        if seg is None:
            break
        locs = array.array("q")
        locs.frombytes(seg.locations)
        if seg.replicas or seg.layout is not None:
            yield from _sliced(_replicated_entries(seg, readers, stats, on_issue))
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
                payloads: list[Any] = got  # all bytes: checked just above
                n = len(payloads)
                stats.entry_reads += n
                stats.entry_bytes += sum(map(len, payloads)) + n * overhead
                yield [lid] * n, list(range(first, first + n)), payloads, [None] * n
                continue
            rows: list[tuple[int, int, bytes | None, str | None]] = []
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
    seg: Segment, locs: array.array[int], i: int, readers: Readers, stats: ReadStats
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
    seg: Segment, readers: Readers, stats: ReadStats, on_issue: OnIssue | None = None
) -> Iterator[tuple[int, int, bytes | None, str | None]]:
    """A segment's entries from several bookies, as ``DataDir.read_entry`` reads them there: each from
    the first copy in read order (:func:`~pulsarkit.scan.replicas.read_order`: its write set
    first) whose digest verifies. A copy passed over is counted in ``stats.skipped_copies`` and is a
    ``bad_replica`` issue; an entry no copy verifies is an error naming every copy's fault."""
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
        where: list[tuple[str | None, int | None]] = []  # each fault's file and record offset
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
                    loc = locs[k][i]
                    if loc >= 0 and r.current is not None:
                        where.append((str(readers.get(r.current).path_of(loc >> 32)), (loc & 0xFFFFFFFF) - 4))
                    else:
                        where.append((None, None))
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
        if on_issue is not None:
            for fault, (path, offset) in zip(faults, where, strict=True):
                bookie, why = fault.split(": ", 1)
                on_issue(
                    Issue(
                        "bad_replica",
                        path,
                        offset,
                        f"{bookie}'s copy skipped ({why}); read from bookie {bookie_id}",
                        lid,
                        eid,
                    )
                )
        yield lid, eid, data, None


def _batches(
    part: ScanPartition,
    batch_entries: int,
    batch_bytes: int,
    stats: ReadStats | None = None,
    on_issue: OnIssue | None = None,
) -> Generator[_Chunk, None, None]:
    lids: list[int] = []
    eids: list[int] = []
    datas: list[bytes | None] = []
    errs: list[str | None] = []
    size = 0
    for c_lids, c_eids, c_datas, c_errs in _entry_chunks(part, stats if stats is not None else ReadStats(), on_issue):
        n = len(c_lids)
        # the chunk's running byte counts, made once: where each batch ends is then a bisection, not a step
        # per entry (B's 200 k entries of 1 KiB)
        ends = list(itertools.accumulate((len(d) if d else 0 for d in c_datas), initial=0))
        i = 0
        while i < n:
            # how many of this chunk's entries the batch takes: up to its entry or byte limit, one entry at
            # least (so limits of 0 or less give one-entry batches, as they always did); the entry that
            # reaches the byte limit is taken
            room = max(batch_entries - len(lids), 1)
            full = bisect.bisect_left(ends, batch_bytes - size + ends[i], i + 1) if size < batch_bytes else i + 1
            j = min(i + room, full, n)
            size += ends[j] - ends[i]
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


def _refined(
    part: ScanPartition,
    state: MessageState,
    batch_entries: int,
    batch_bytes: int,
    stats: ReadStats | None,
    on_issue: OnIssue | None,
) -> Iterator[tuple[list[int], list[int], list[bytes | None], list[str | None], pa.Array | None]]:
    """:func:`_batches`, each with its entries as an Arrow array when made here (else None); for a
    partition planned without its topic's metadata pass (``part.refine``), up to the first batch holding a
    transactional entry (a message or a marker). Nothing before it depends on the pass: no transaction's
    state, and the read-committed cut falls at a transactional message or after. Then the topic is planned
    again with its pass, the read takes its transactions (the chunks assembled so far kept) and goes on from
    that batch's first entry in the new partition, cut where the plan cuts. ``stats`` count what was read:
    that batch's entries twice (they are read again) and the new plan's pass."""
    batches = _batches(part, batch_entries, batch_bytes, stats, on_issue)
    if part.refine is None:
        for b in batches:
            yield (*b, None)
        return
    for lids, eids, datas, errs in batches:
        entries = binary_array(datas)
        if not _transactional(entries):
            yield lids, eids, datas, errs, entries
            continue
        batches.close()
        full, passed = part.refine()
        if stats is not None:
            stats.add(passed)
        if full is not None:
            state.adopt(full)
            for b in _batches(starting_at(full, (lids[0], eids[0])), batch_entries, batch_bytes, stats, on_issue):
                yield (*b, None)
        return


def _transactional(entries: pa.Array) -> bool:
    """Whether an entry of the batch belongs to a transaction (its metadata decoded as the pass decodes it)."""
    return bulk.first_transactional(entries) is not None


#: Entry bytes decoded together (one native call each for metadata and messages). The rows of a
#: batch are about 2-3x its entry bytes once decompressed, and a read holds a few copies of them at
#: its peak: with 1 MiB a process reading 64 MiB partitions peaks near 210 MB (2 MiB: 225 MB, 16 MiB:
#: 480 MB, with 105 MB of it the interpreter and its modules; bench/spark_memory.py). 4 MiB: each batch
#: costs ~1 ms of Python around its native calls, and on the benchmark's topics (bench/RESULTS.md, issue 24,
#: "Batches of 4 MiB") ``messages --format parquet`` ran A 1.30 -> 1.11 s, B 1.65 -> 1.54 s, C 1.37 -> 1.31 s
#: and ``export`` A/C 8-10% faster than with 1 MiB, for ~40 MB more at the peak (reading the benchmark's
#: directory in 64 MiB partitions: 190 -> 228 MiB). One entry larger than this is a batch of its own.
BATCH_BYTES = 4 << 20


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
    acks: AckFilter | None = None,
    on_issue: OnIssue | None = None,
    prefetch: int | None = None,
    threads: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of one partition as Arrow record batches of ``columns`` (default: all, in the order
    of :data:`MESSAGE_FIELDS` / :data:`ENTRY_FIELDS`). What gives no rows (an unreadable entry, a
    broken chunk...) goes to ``on_issue`` and the read goes on (``on_error="fail"`` raises
    :class:`UnreadableEntry` instead). ``stats``, when given, counts what was read from the entry
    logs (:class:`ReadStats`); ``acks`` leaves out what a subscription acknowledged (a backlog).
    ``prefetch``: batches made ahead of the consumer by a thread (:mod:`.prefetch`; None: its default,
    0: none), which then also calls ``on_issue``. ``threads``: a batch's payloads are decompressed on this many
    threads, the reading one among them (None: :func:`.prefetch.decode_threads`; 1: the reading thread alone)."""
    threads = decode_threads() if threads is None else max(1, threads)
    batches = _read(
        part, kind, columns, txn, markers, filters, on_error, batch_entries, batch_bytes, stats, acks, on_issue, threads
    )
    depth = prefetch_depth() if prefetch is None else prefetch
    yield from prefetched(batches, depth) if depth > 0 else batches


def _read(
    part: ScanPartition | Sequence[ScanPartition] | None,
    kind: str,
    columns: Sequence[str] | None,
    txn: str,
    markers: bool,
    filters: Sequence[Filter],
    on_error: str,
    batch_entries: int,
    batch_bytes: int,
    stats: ReadStats | None,
    acks: AckFilter | None,
    on_issue: OnIssue | None,
    threads: int = 1,
) -> Iterator[pa.RecordBatch]:
    """:func:`read_partition` in the thread that iterates it."""
    if part is None:
        return
    if not isinstance(part, ScanPartition):
        for p in part:
            yield from _read(
                p, kind, columns, txn, markers, filters, on_error, batch_entries, batch_bytes, stats, acks, on_issue,
                threads,
            )  # fmt: skip
        return
    fields = message_fields(markers) if kind == "messages" else ENTRY_FIELDS
    types = dict(fields)
    names = list(columns) if columns is not None else [n for n, _ in fields]
    unknown = [n for n in names if n not in types]
    if unknown:
        raise ValueError(f"unknown columns {unknown}; the columns are {[n for n, _ in fields]}")
    schema = arrow_schema([(n, types[n]) for n in names])
    if stats is not None:
        on_issue = _counting(stats, on_issue)
    if kind == "entries":
        gaps = {(lid, a): b - a + 1 for lid, a, b in part.gaps}
        for lids, eids, datas, errs in _batches(part, batch_entries, batch_bytes, stats, on_issue):
            if on_error == "fail" and any(errs):
                raise UnreadableEntry(next(e for e in errs if e))
            if stats is not None:
                stats.unreadable_entries += sum(gaps.get((a, b), 1) for a, b, e in zip(lids, eids, errs) if e)
            n = len(lids)
            t = pa.table(
                {
                    "topic": string_array([part.topic] * n),
                    "kind": string_array([part.kind] * n),
                    "ledger_id": int64_array(lids),
                    "entry_id": int64_array(eids),
                    "payload": binary_array(datas),
                    "error": string_array(errs),
                }
            )
            out = _emit(t, part, filters)
            if out.num_rows:
                yield _select(out, schema)
        return
    state = MessageState(part, txn, markers, on_issue, threads)
    try:
        for lids, eids, datas, errs, entries in _refined(part, state, batch_entries, batch_bytes, stats, on_issue):
            if on_error == "fail" and any(errs):
                raise UnreadableEntry(next(e for e in errs if e))
            t = state.messages(lids, eids, datas, filters, errs, acks, entries)
            if on_error == "fail" and state.bad:
                raise UnreadableEntry(state.bad[0])
            out = _emit(t, part, filters)
            if out.num_rows:
                yield _select(out, schema)
        state.finish()  # a chunked message still open at the end is reported, not a failure: more may come
    finally:
        # the Arrow pool keeps freed pages for reuse; a Spark worker then sits idle holding a
        # partition's peak until its next task: hand them back
        pa.default_memory_pool().release_unused()


def _counting(stats: ReadStats, on_issue: OnIssue | None) -> OnIssue:
    """``on_issue`` that also counts the issues and the entries given no rows in ``stats``."""

    def issue(found: Issue, /) -> None:
        stats.issues += 1
        if found.kind in ("unreadable_entry", "bad_entry"):
            stats.unreadable_entries += found.count
        if on_issue is not None:
            on_issue(found)

    return issue


def _one_array(c: pa.ChunkedArray) -> pa.Array:
    # combine_chunks copies even a single chunk: 20% of an export's time went to copying payloads
    return c.chunk(0) if c.num_chunks == 1 else c.combine_chunks()


def _select(t: pa.Table, schema: pa.Schema) -> pa.RecordBatch:
    cols = [_one_array(t.column(n)) for n in schema.names]
    cols = [c.cast(f.type) if c.type != f.type else c for c, f in zip(cols, schema, strict=True)]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _emit(t: pa.Table, part: ScanPartition, filters: Sequence[Filter]) -> pa.Table:
    """The rows after the partition's mark that pass the pushed-down filters."""
    m = filter_mask(t, filters, [c for c in ("ledger_id", "topic", *TIME_COLUMNS) if c in t.column_names])
    if part.after is not None:
        lid, eid = part.after
        lid_, eid_ = scalar(lid, pa.int64()), scalar(eid, pa.int64())
        x = pc.or_(
            pc.greater(t.column("ledger_id"), lid_),
            pc.and_(pc.equal(t.column("ledger_id"), lid_), pc.greater(t.column("entry_id"), eid_)),
        )
        m = x if m is None else pc.and_(m, x)
    return t if m is None else t.filter(m)


def read_all(
    paths: Sequence[str | DataDirSpec] | str | DataDirSpec,
    *,
    kind: str = "messages",
    columns: Sequence[str] | None = None,
    txn: str = "committed",
    markers: bool = False,
    filters: Sequence[Filter] = (),
    **plan_kw: Any,
) -> pa.Table:
    """Plans and reads everything in this process: the data source's rows as one Arrow table."""
    paths = [paths] if isinstance(paths, str | os.PathLike | DataDirSpec) else list(paths)
    p = plan(
        [x if isinstance(x, DataDirSpec) else os.fspath(x) for x in paths],
        kind=kind,
        txn=txn,
        filters=filters,
        **plan_kw,
    )
    fields = message_fields(markers) if kind == "messages" else ENTRY_FIELDS
    names = list(columns) if columns is not None else [n for n, _ in fields]
    schema = arrow_schema([(n, dict(fields)[n]) for n in names])
    batches = [
        b
        for task in p.tasks()
        for b in read_partition(task, kind=kind, columns=names, txn=txn, markers=markers, filters=filters)
    ]
    return pa.Table.from_batches(batches, schema=schema)
