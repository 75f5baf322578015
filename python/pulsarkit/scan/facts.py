"""The metadata pass of a plan: per topic its transaction markers, first transactional positions and
chunk spans, and the entries the time filters prune, from the MessageMetadata of every selected entry."""

from __future__ import annotations

import array
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .. import bulk
from ..bookkeeper import digest as bookie_digest
from ..bookkeeper.entrylog import scan_entry_logs
from ..codec.columns import binary_array, int64_array, scalar
from ..codec.entry import Entry
from ..codec.txn import TXN_ABORT_MARKER, TXN_COMMIT_MARKER
from ..errors import PulsarkitError
from ..lazy import deferred
from ..managed_ledger.position import Position
from .datadir import DataDir
from .heads import HEAD_COST_BYTES, read_heads
from .partition import Readers, ReadStats
from .schema import MASK, TIME_COLUMNS, Filter, Pos, filter_mask

pc = deferred("pyarrow.compute")

# compute arguments made without pa.scalar (which imports pandas when installed; codec.columns says why)
_ONE, _TRUE, _FALSE = scalar(1, pa.int64()), scalar(True, pa.bool_()), scalar(False, pa.bool_())


@dataclass
class TopicFacts:
    markers: dict[Pos, str] = field(default_factory=dict)
    first_txn: dict[Pos, Pos] = field(default_factory=dict)
    #: uuid -> (first, last) position of its chunks
    chunks: dict[str, tuple[Pos, Pos]] = field(default_factory=dict)


def location_index(dd: DataDir, ledgers: Collection[int] | None = None) -> dict[int, tuple[str, dict[int, int]]]:
    """ledger -> (its bookie's ``current/``, entry -> location), of ``ledgers`` (default: every ledger
    indexed). With several bookies a ledger's copies are in several directories: then the entries any
    bookie indexes, with no directory or location (the partitions carry every copy, see :func:`_segment`)."""
    out: dict[int, tuple[str, dict[int, int]]] = {}
    if dd.replicas is not None:
        for _, lid, eid, _ in dd.entry_locations(ledgers):
            out.setdefault(lid, (None, {}))[1][eid] = -1  # type: ignore[arg-type]
        return out
    for current, lid, entries in dd.ledger_locations(ledgers):
        if not entries:  # a ledger this bookie directory does not hold
            continue
        if lid not in out:
            out[lid] = (current, dict(entries))  # a copy made in C: 200 k entries in a few ms
        else:
            out[lid][1].update(entries)
    return out


def topic_facts(
    dd: DataDir,
    owner: dict[int, str],
    index: dict[int, tuple[str, dict[int, int]]],
    *,
    time_filters: Sequence[Filter] = (),
    metadata_pass: str = "auto",
    stats: ReadStats | None = None,
) -> tuple[dict[str, TopicFacts], dict[int, array.array[int]] | None]:
    """Markers, first transactional positions and chunk spans of every topic in ``owner``'s values
    (ledger -> topic), from the MessageMetadata of every entry of those ledgers: one native pass over
    the entry logs (``scan``), or a read of each entry's head at its location (``heads``; ``auto``
    picks the cheaper). With ``time_filters``, also the entries no row of which can pass them, per
    ledger (sorted entry ids): the rest, and every entry whose metadata was not decoded, are read."""
    stats = stats if stats is not None else ReadStats()
    facts: dict[str, TopicFacts] = {}
    if not owner:
        return facts, ({} if time_filters else None)
    # ledger, entry, uuid of a chunk, (txn most, least bits) or None, marker type, digest still unchecked
    candidates: list[tuple[int, int, str | None, tuple[int, int] | None, int, bool]] = []
    pruning = _Pruning(time_filters) if time_filters else None

    def absorb(lids: pa.Array, eids: pa.Array, md: Any, keep: Any, verified: Any = None) -> None:
        """One decoded batch: ``md`` the metadata of entries ``lids``/``eids``, ``keep`` the rows of
        owned ledgers (None: all). Its transactions and chunks are taken from the metadata itself. A
        copy whose digest does not verify (``verified`` False, from the native pass) decides no
        transaction (the read reports it); heads (``verified`` None) are not verified: their
        transactional entries are read whole and verified before they decide anything."""
        txn = pc.or_(pc.is_valid(md.column("txnid_most_bits")), pc.is_valid(md.column("txnid_least_bits")))
        if verified is not None:
            txn = pc.and_(txn, pc.fill_null(verified, _TRUE))
        chunk = pc.fill_null(
            pc.and_(pc.is_valid(md.column("uuid")), pc.greater(md.column("num_chunks_from_msg"), _ONE)), _FALSE
        )
        m = pc.or_(pc.fill_null(txn, _FALSE), chunk)
        if keep is not None:
            m = pc.and_(keep, m)
        if pc.any(m).as_py():
            cols = [lids, eids, md.column("uuid"), chunk, md.column("txnid_most_bits"), md.column("txnid_least_bits")]
            cols += [md.column("marker_type"), pc.fill_null(txn, _FALSE)]
            sel = pa.Table.from_arrays(cols, names=list("lecuvwkt")).filter(m)
            for lid, eid, uuid, is_chunk, most, least, marker, is_txn in zip(
                *(sel.column(i).to_pylist() for i in range(8)), strict=True
            ):
                key = ((most or 0) & MASK, (least or 0) & MASK) if is_txn else None
                candidates.append((lid, eid, uuid if is_chunk else None, key, marker or 0, verified is None))
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
        ledgers = int64_array(sorted(owner))
        for path, _, _ in logs:
            try:
                stats.scan_bytes += os.path.getsize(path)
            except OSError:
                pass
        # copied payloads in bounded batches, not views: a view scan maps (and faults in) each whole entry
        # log, so the pass peaked at the largest log's size (907 MiB reading B of the 1.0-scale benchmark's
        # 750 MB log, 199 MiB copied, 0.1-0.3 s more; bench/RESULTS.md)
        for b in scan_entry_logs([(p, i) for p, i, _ in logs], "AUTO", include_issues=False, payload_type="binary"):
            keep = pc.fill_null(pc.is_in(b.column("ledger_id"), value_set=ledgers), _FALSE)
            if many:
                keep = pc.and_(keep, pc.fill_null(b.column("digest_ok"), _FALSE))
            if not pc.any(keep).as_py():
                continue
            # metadata of every row (other ledgers give errors): filtering the copies first to the owned
            # ledgers measured no faster (A: 0.51-0.53 s either way at full scale)
            md = bulk.decode_metadata(b.column("payload"))
            absorb(b.column("ledger_id"), b.column("entry_id"), md, keep, b.column("digest_ok"))
    elif mode == "heads":
        readers = Readers()
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
                    int64_array(part[j][0] for j in got),
                    int64_array(part[j][1] for j in got),
                    bulk.decode_metadata(binary_array([heads[j] for j in got])),
                    None,
                )
    journal_only = []
    for lid in owner:
        local = index.get(lid, (None, {}))[1]
        journal_only += [(lid, eid) for eid in dd.journal.get(lid, {}) if eid not in local]
    for lid, eid in journal_only:  # in no entry log: the pass did not see them (they are in memory)
        try:
            e = Entry.parse(dd.read_entry(lid, eid), verify_checksum=False)
        except PulsarkitError:
            continue
        txn = e.txn_id
        key = None if txn is None else (txn[0] & MASK, txn[1] & MASK)
        md = e.metadata
        marker = md.marker_type if e.is_marker else 0
        candidates.append((lid, eid, md.uuid if e.is_chunk else None, key, marker, False))  # read_entry verified it
    seen: set[Pos] = set()
    # an entry twice in the entry logs: a copy that decides a transaction (it verified) first
    for lid, eid, uuid, key, marker, unchecked in sorted(set(candidates), key=lambda c: (c[0], c[1], c[3] is None)):
        led = dd.ledgers.get(lid)
        if led is None or eid > led.last_entry_id or (lid, eid) in seen:
            continue
        seen.add((lid, eid))
        f = facts.setdefault(owner[lid], TopicFacts())
        if uuid is not None:
            _span(f, uuid, (lid, eid))
        if key is None:
            continue
        if unchecked:  # a head: the digest covers the whole entry, so it is read whole to verify it
            try:
                data = dd.read_entry(lid, eid)
            except PulsarkitError:
                continue  # decides nothing; the message read reports the entry
            stats.entry_reads += 1
            stats.entry_bytes += len(data) + 40
        if marker in TXN_MARKERS:
            f.markers[key] = TXN_MARKERS[marker]
        elif not marker:
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
        ok = filter_mask(t, self.filters, TIME_COLUMNS)
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

    def dropped(self) -> dict[int, array.array[int]]:
        parts = list(self._dropped)
        if self._chunks:
            chunks = pa.concat_tables(self._chunks)
            passing = chunks.group_by("u").aggregate([("ok", "any")])
            good = passing.filter(passing.column("ok_any")).column("u")
            parts.append(chunks.filter(pc.invert(pc.is_in(chunks.column("u"), value_set=good))).select(["l", "e"]))
        out: dict[int, array.array[int]] = {}
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


def _span(f: TopicFacts, uuid: str, pos: Pos) -> None:
    lo, hi = f.chunks.get(uuid, (pos, pos))
    f.chunks[uuid] = (min(lo, pos), max(hi, pos))


#: The markers that end a transaction in a topic, by their ``marker_type``.
TXN_MARKERS = {TXN_COMMIT_MARKER: "TXN_COMMIT", TXN_ABORT_MARKER: "TXN_ABORT"}


def topic_markers(dd: DataDir, mls: Sequence[str]) -> dict[str, tuple[dict[Pos, str], dict[Pos, Position]]]:
    """Per managed ledger of ``mls``: (txn -> its TXN_COMMIT/TXN_ABORT marker there, txn -> the
    position of its first message there), from one metadata pass over all their ledgers
    (:func:`topic_facts`)."""
    owner = {lid: ml for ml in mls for lid in dd.ml_ledgers(ml)}
    facts, _ = topic_facts(dd, owner, location_index(dd, owner))
    out = {}
    for ml in mls:
        f = facts.get(ml, TopicFacts())
        out[ml] = (dict(f.markers), {k: Position(*p) for k, p in f.first_txn.items()})
    return out
