"""Many bookies: every entry read once, from one replica its ledger's ensembles choose, and a report of
the replicas that are missing, extra or different.

A BookKeeper client writes entry ``e`` of a ledger to the *write set* of the segment holding ``e``:
``ensemble[(e + k) % ensembleSize]`` for ``k`` in ``0 .. writeQuorum - 1`` (``RoundRobinDistributionSchedule``;
the segment is the last one whose ``firstEntryId <= e``, ``e`` is the ledger's entry id, not the
segment's). So with several bookies, each entry has up to ``writeQuorum`` copies, and a reader that
merged the bookies' indexes would see each entry several times. Here each entry is read once: from
the first bookie of its write set that holds a copy whose digest verifies; when none does, from any
other given bookie whose copy verifies (a copy outside the write set, e.g. left from before an
ensemble change, still holds the bytes the client wrote), else it is unreadable.

A bookie is known by its cookie (:func:`~.bookie_dir.read_cookie`): its ``bookieHost`` is the id
ledger metadata puts in its ensembles; directories without one are named with a mapping
(``bookies={"127.0.0.1:3181": ["/data/ledgers"]}``, :func:`~.bookie_dir.group_bookies`).

:func:`replica_report` checks every copy of every entry against the write sets; one row per problem:

======================== ===================================================================
kind                     meaning
======================== ===================================================================
``under_replicated``     a bookie of the write set lacks the entry (``bookies``: those)
``unexpected_replica``   a bookie outside the write set holds it (``bookies``: those)
``divergent``            the copies differ: one does not verify, or verified copies hold
                         different data (``bookies``: every holder; ``verifies``: the good ones)
``unreadable``           no given bookie has a copy that verifies: the entry cannot be read
======================== ===================================================================

Write-set bookies whose directory was not given are never counted as lacking an entry (they are
listed per ledger as ``bookies_absent``). Copies that verify and differ only in their
``lastAddConfirmed`` are not divergent: ledger recovery re-adds the entries after the last confirmed
one with the recovering client's LAC (and so a new digest), the data the client wrote unchanged.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..bookkeeper import digest as bookie_digest
from .bookie_dir import Bookie, entry_payload
from .records import DataDirError, Issue, held_pieces, missing_message

if TYPE_CHECKING:
    from .datadir import DataDir

PROBLEM_KINDS = ("under_replicated", "unexpected_replica", "divergent", "unreadable")


# ------------------------------------------------------------------------------- write sets


def write_set(entry_id: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """Ensemble indexes holding an entry: ``write_quorum`` consecutive members from ``entry_id % E``,
    wrapping around the ensemble."""
    start = entry_id % ensemble_size
    ring = list(range(ensemble_size)) * 2
    return ring[start : start + write_quorum]


@dataclass(frozen=True)
class Layout:
    """How a ledger's entries are spread over bookies: its segments (first entry id and ensemble)
    and quorums, from its metadata (``LedgerMetadataFormat``)."""

    first_entry_ids: tuple[int, ...]
    ensembles: tuple[tuple[str, ...], ...]
    ensemble_size: int
    write_quorum: int
    ack_quorum: int

    @classmethod
    def of(cls, md: Any) -> Layout:
        """:class:`DataDirError` when the metadata cannot place an entry (what ``LedgerMetadataBuilder``
        refuses: no segment, an ensemble of another size, ``ensembleSize >= writeQuorum >= ackQuorum``
        broken)."""
        segs = sorted(md.segment, key=lambda s: s.firstEntryId)  # stable: a later equal one replaces it
        e, qw = md.ensembleSize, md.quorumSize
        qa = md.ackQuorumSize if md.HasField("ackQuorumSize") else qw
        if not segs or not 1 <= qa <= qw <= e or any(len(s.ensembleMember) != e for s in segs):
            sizes = [len(s.ensembleMember) for s in segs]
            raise DataDirError(
                f"ensemble size {e}, write quorum {qw}, ack quorum {qa}, segment ensemble sizes {sizes}: "
                "entries cannot be placed"
            )
        return cls(tuple(s.firstEntryId for s in segs), tuple(tuple(s.ensembleMember) for s in segs), e, qw, qa)

    def segment_of(self, entry_id: int) -> int:
        """The segment holding an entry: the last one starting at or before it."""
        return max(bisect.bisect_right(self.first_entry_ids, entry_id) - 1, 0)

    def write_set(self, entry_id: int) -> list[str]:
        """Bookie ids an entry was written to, in the order a reader tries them."""
        ens = self.ensembles[self.segment_of(entry_id)]
        return [ens[i] for i in write_set(entry_id, self.ensemble_size, self.write_quorum)]

    def members(self) -> list[str]:
        return list(dict.fromkeys(b for ens in self.ensembles for b in ens))


def read_order(layout: Layout | None, holders: Sequence[str], entry_id: int) -> list[str]:
    """The bookie ids holding a copy of an entry (``holders``), in the order a reader tries them: those
    of its write set in write-set order, then the others in the order given (all of them in that
    order without a layout). The data sources' readers use it too, on what a partition carries."""
    if layout is None:
        return list(holders)
    first = [b for b in layout.write_set(entry_id) if b in holders]
    return first + [b for b in holders if b not in first]


# ------------------------------------------------------------------------------ replica set


class ReplicaSet:
    """The bookies of a data directory and, per entry, the copy to read (see the module doc)."""

    def __init__(self, bookies: Sequence[Bookie], ledger_metadata: Mapping[int, Any]) -> None:
        self.bookies = list(bookies)
        self.by_id = {b.bookie_id: b for b in self.bookies}
        self._metadata = ledger_metadata
        self._layouts: dict[int, Layout | None] = {}
        #: Ledgers whose metadata cannot place entries, and why (their copies are read from any bookie).
        self.bad_layouts: dict[int, str] = {}
        self._skipped: set[tuple[int, int, str]] = set()  # bad copies already passed on, once each

    def layout(self, ledger_id: int) -> Layout | None:
        """The ledger's layout; None without (usable) metadata."""
        if ledger_id not in self._layouts:
            md = self._metadata.get(ledger_id)
            lay = None
            if md is not None:
                try:
                    lay = Layout.of(md)
                except DataDirError as e:
                    self.bad_layouts[ledger_id] = e.reason
            self._layouts[ledger_id] = lay
        return self._layouts[ledger_id]

    def holders(self, ledger_id: int, entry_id: int) -> list[Bookie]:
        return [b for b in self.bookies if entry_id in b.entry_ids(ledger_id)]

    def read_order(self, ledger_id: int, entry_id: int) -> list[Bookie]:
        """The bookies holding a copy, in the order they are read (:func:`read_order`)."""
        holders = self.holders(ledger_id, entry_id)
        ids = read_order(self.layout(ledger_id), [b.bookie_id for b in holders], entry_id)
        return [self.by_id[b] for b in ids]

    def present(self, ledger_id: int) -> set[int]:
        """Entries of a ledger any bookie holds."""
        out: set[int] = set()
        for b in self.bookies:
            out |= b.entry_ids(ledger_id)
        return out

    def holdings(self, ledger_id: int) -> tuple[set[int], set[int], int]:
        """(entries in some bookie's index, entries only in journals, bytes of those journal records)."""
        indexed: set[int] = set()
        jbytes = 0
        jonly: set[int] = set()
        for b in self.bookies:
            mine = b.indexed(ledger_id)
            indexed |= mine
            jr = b.journal.get(ledger_id, {})
            extra = set(jr) - mine
            jonly |= extra
            jbytes += sum(len(jr[e].data) + 4 for e in extra)
        return indexed, jonly - indexed, jbytes

    def read(
        self,
        ledger_id: int,
        entry_id: int,
        digest: str | None,
        password: bytes,
        issue: Callable[[Issue], None] | None = None,
    ) -> bytes:
        """The entry's data from the first copy in :meth:`read_order` that verifies. Each copy skipped
        because it does not verify is passed to ``issue``; :class:`DataDirError` when none verifies."""
        bad: list[tuple[Bookie, DataDirError]] = []
        for b in self.read_order(ledger_id, entry_id):
            try:
                raw, path, off = b.read_raw(ledger_id, entry_id)  # type: ignore[misc]
                data = entry_payload(raw, digest, password, ledger_id, entry_id, path, off)
            except DataDirError as e:
                bad.append((b, e))
                continue
            for bb, err in bad:
                if issue is not None and (ledger_id, entry_id, bb.bookie_id) not in self._skipped:
                    self._skipped.add((ledger_id, entry_id, bb.bookie_id))
                    why = f"bookie {bb.bookie_id}'s copy skipped ({err.reason}); read from bookie {b.bookie_id}"
                    issue(Issue("bad_replica", err.path or "?", err.offset, why, ledger_id, entry_id))
            return data
        if not bad:
            lay = self.layout(ledger_id)
            ws = f" (write set {', '.join(lay.write_set(entry_id))})" if lay is not None else ""
            raise DataDirError(f"ledger {ledger_id} entry {entry_id} is on no given bookie{ws}", None, None)
        if len(bad) == 1:
            raise bad[0][1]
        e0 = bad[0][1]
        every = "; ".join(f"bookie {b.bookie_id}: {e}" for b, e in bad)
        raise DataDirError(f"ledger {ledger_id} entry {entry_id}: no copy verifies: {every}", e0.path, e0.offset, every)

    def where(self, ledger_id: int, entry_id: int, digest: str | None, password: bytes) -> tuple[str, int | None]:
        """(file, record offset) of the copy :meth:`read` chooses; else of the first copy it tries."""
        first: tuple[str, int | None] | None = None
        for b in self.read_order(ledger_id, entry_id):
            try:
                raw, path, off = b.read_raw(ledger_id, entry_id)  # type: ignore[misc]
                first = first or (path, off)
                entry_payload(raw, digest, password, ledger_id, entry_id, path, off)
            except DataDirError:
                continue
            return path, off
        return first or ("?", None)


# --------------------------------------------------------------------------------- report


@dataclass
class ReplicaReport:
    """One row per problem (:data:`PROBLEMS_SCHEMA`) and one summary row per ledger (:data:`LEDGERS_SCHEMA`)."""

    problems: list[dict[str, Any]]
    ledgers: list[dict[str, Any]]
    bookies: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems

    def problems_table(self) -> Any:
        return pa.Table.from_pylist(self.problems, schema=PROBLEMS_SCHEMA)

    def ledgers_table(self) -> Any:
        return pa.Table.from_pylist(self.ledgers, schema=LEDGERS_SCHEMA)


PROBLEMS_SCHEMA = pa.schema(
    [
        ("ledger_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("kind", pa.string()),
        #: the bookies the problem is about (see the module doc, per kind)
        ("bookies", pa.list_(pa.string())),
        ("write_set", pa.list_(pa.string())),
        #: bookies whose copy's digest verifies
        ("verifies", pa.list_(pa.string())),
        #: the bookie whose copy a reader gets (None: unreadable)
        ("read_from", pa.string()),
        ("evidence", pa.string()),
    ]
)

LEDGERS_SCHEMA = pa.schema(
    [
        ("ledger_id", pa.int64()),
        ("kind", pa.string()),
        ("topic", pa.string()),
        ("state", pa.string()),
        ("ensemble_size", pa.int32()),
        ("write_quorum", pa.int32()),
        ("ack_quorum", pa.int32()),
        #: ``first entry id: member, member, ...`` per segment
        ("ensembles", pa.list_(pa.string())),
        #: ensemble members whose directories were not given
        ("bookies_absent", pa.list_(pa.string())),
        ("last_entry_id", pa.int64()),
        ("entries", pa.int64()),
        ("copies", pa.int64()),
        ("under_replicated", pa.int64()),
        ("unexpected_replica", pa.int64()),
        ("divergent", pa.int64()),
        ("unreadable", pa.int64()),
        #: entries with fewer verifying write-set copies than the ack quorum
        ("below_ack_quorum", pa.int64()),
        #: entries held after the last entry (written, never confirmed; no reader gets them)
        ("beyond_last_entry", pa.int64()),
        ("read_from", pa.map_(pa.string(), pa.int64())),
        ("note", pa.string()),
    ]
)


def replica_set(dd: DataDir) -> ReplicaSet:
    """The data directory's bookies: its own when it has several, else its one bookie, which needs an
    id (a cookie, or ``bookies=``) to be matched with the ensembles."""
    if dd.replicas is not None:
        return dd.replicas
    ids = [i for i in dict.fromkeys(dd.bookie_ids) if i]
    if len(ids) != 1:
        raise DataDirError(
            "the bookie directory has no cookie (current/VERSION) naming its bookie: "
            "name it with bookies={id: [dir]} (the id its ledgers' ensembles use)"
        )
    one = Bookie(ids[0], list(dd._bookies), list(dd.ledger_dirs), list(dd.journal_dirs), dd.journal)
    return ReplicaSet([one], dd.ledger_metadata)


@dataclass
class _Copy:
    bookie: str
    raw: bytes | None
    #: why the copy does not verify (None: it does)
    error: str | None
    where: str


def _copies(order: Iterable[Bookie], lid: int, eid: int, digest: str, pw: bytes) -> list[_Copy]:
    out = []
    verdicts: dict[bytes, str | None] = {}  # each distinct byte string is verified once
    for b in order:
        try:
            raw, path, off = b.read_raw(lid, eid)  # type: ignore[misc]
        except DataDirError as e:
            out.append(_Copy(b.bookie_id, None, e.reason, f"{e.path} at offset {e.offset}"))
            continue
        if raw not in verdicts:
            try:
                entry_payload(raw, digest, pw, lid, eid, path, off)
                verdicts[raw] = None
            except DataDirError as e:
                verdicts[raw] = e.reason
        out.append(_Copy(b.bookie_id, raw, verdicts[raw], f"{path} at offset {off}"))
    return out


def _same_data(a: bytes, b: bytes, digest_len: int) -> bool:
    """Same ids, ledger length and payload: only ``lastAddConfirmed`` (and so the digest) differ."""
    return a[:16] == b[:16] and a[24:32] == b[24:32] and a[32 + digest_len :] == b[32 + digest_len :]


def _check_entry(
    rs: ReplicaSet, lay: Layout, lid: int, eid: int, digest: str, pw: bytes
) -> tuple[list[dict[str, Any]], list[_Copy], str | None]:
    """The problem rows of one entry, its copies, and the bookie it is read from."""
    ws = lay.write_set(eid)
    seg = lay.segment_of(eid)
    order = rs.read_order(lid, eid)
    held = {b.bookie_id for b in order}
    cps = _copies(order, lid, eid, digest, pw)
    good = [c.bookie for c in cps if c.error is None]
    chosen = good[0] if good else None
    rows: list[dict[str, Any]] = []

    def row(kind: str, bookies: list[str], evidence: str) -> None:
        rows.append(
            {
                "ledger_id": lid,
                "entry_id": eid,
                "kind": kind,
                "bookies": bookies,
                "write_set": ws,
                "verifies": good,
                "read_from": chosen,
                "evidence": evidence,
            }
        )

    absent = [b for b in ws if b not in rs.by_id]
    no_dir = f"; no directory given for {absent}" if absent else ""
    lacking = [b for b in ws if b in rs.by_id and b not in held]
    if lacking:
        have = [b for b in ws if b in held] or "none of them"
        quorums = f"write quorum {lay.write_quorum}, ack quorum {lay.ack_quorum}"
        row("under_replicated", lacking, f"write set {ws} (segment {seg}, {quorums}): held by {have}{no_dir}")
    extra = [c.bookie for c in cps if c.bookie not in ws]
    if extra:
        where = []
        for b in extra:
            segs = [i for i, ens in enumerate(lay.ensembles) if b in ens]
            where.append(
                f"{b} is in " + (f"the ensemble of segment(s) {segs}" if segs else "no ensemble of the ledger")
            )
        only = f"; no write-set copy verifies, read from {chosen}" if chosen in extra else ""
        row("unexpected_replica", extra, f"outside write set {ws} (segment {seg}): {'; '.join(where)}{only}")
    raws = [c.raw for c in cps if c.raw is not None]
    dlen = bookie_digest.digest_length(digest)
    data_differs = any(not _same_data(r, raws[0], dlen) for r in raws[1:])
    if len(cps) > 1 and (data_differs or (good and len(good) < len(cps))):
        desc = "; ".join(f"{c.bookie}: {c.error or 'verifies'} ({c.where})" for c in cps)
        row("divergent", [c.bookie for c in cps], f"{desc}; read from {chosen or 'none'}")
    if chosen is None:
        if cps:
            why = "no copy verifies: " + "; ".join(f"{c.bookie}: {c.error} ({c.where})" for c in cps)
        else:
            why = f"no given bookie holds it (write set {ws}){no_dir}"
        row("unreadable", [c.bookie for c in cps] or absent, why)
    return rows, cps, chosen


def _entries_to_check(
    rs: ReplicaSet, lay: Layout, lid: int, last: int, problems: list[dict[str, Any]], counts: Counter[str]
) -> Iterator[int]:
    """The entry ids of ``0..last`` to check one by one: those some bookie holds, and a gap of one.
    A longer run no bookie holds (a ledger whose metadata claims more than was ever stored, up to a
    forged ``lastEntryId`` of 4·10^9) is one ``unreadable`` row here, naming the run and its count,
    counted in the ledger's summary by its entries: the report is sized by the data, not the claim."""
    for a, b, held in held_pieces(sorted(rs.present(lid)), 0, last):
        if held or a == b:
            yield from range(a, b + 1)
            continue
        ws = lay.write_set(a)
        problems.append(
            {
                "ledger_id": lid,
                "entry_id": a,
                "kind": "unreadable",
                "bookies": [x for x in ws if x not in rs.by_id],
                "write_set": ws,
                "verifies": [],
                "read_from": None,
                "evidence": missing_message(lid, a, b, "on no given bookie"),
            }
        )
        counts["unreadable"] += b - a + 1
        counts["below_ack_quorum"] += b - a + 1


def replica_report(dd: DataDir, ledger_ids: Iterable[int] | None = None) -> ReplicaReport:
    """Every copy of every entry checked against its ledger's write sets (see the module doc). Ledgers
    without metadata (deleted) have no write sets: only their summary row, with the entries held."""
    rs = replica_set(dd)
    problems: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    for lid in sorted(dd.ledgers) if ledger_ids is None else sorted(ledger_ids):
        led = dd.ledgers[lid]
        lay = rs.layout(lid)
        last = led.last_entry_id
        counts: Counter[str] = Counter()
        read_from: Counter[str] = Counter()
        copies = below_aq = 0
        if lay is not None:
            digest = led.digest_type or "CRC32C"
            for eid in _entries_to_check(rs, lay, lid, last, problems, counts):
                rows, cps, chosen = _check_entry(rs, lay, lid, eid, digest, led.password)
                problems += rows
                counts.update(r["kind"] for r in rows)
                copies += len(cps)
                if chosen is not None:
                    read_from[chosen] += 1
                ws = lay.write_set(eid)
                if sum(1 for c in cps if c.error is None and c.bookie in ws) < lay.ack_quorum:
                    below_aq += 1
        note = rs.bad_layouts.get(lid) or ("no ledger metadata: no write sets to check" if lay is None else None)
        summaries.append(
            {
                "ledger_id": lid,
                "kind": led.kind,
                "topic": led.topic,
                "state": led.state,
                "ensemble_size": lay.ensemble_size if lay else None,
                "write_quorum": lay.write_quorum if lay else None,
                "ack_quorum": lay.ack_quorum if lay else None,
                "ensembles": [f"{f}: {', '.join(e)}" for f, e in zip(lay.first_entry_ids, lay.ensembles, strict=True)]
                if lay
                else [],
                "bookies_absent": [b for b in lay.members() if b not in rs.by_id] if lay else [],
                "last_entry_id": last,
                "entries": last + 1,
                "copies": copies if lay else sum(len(b.entry_ids(lid)) for b in rs.bookies),
                **{k: counts[k] for k in PROBLEM_KINDS},
                "below_ack_quorum": below_aq + counts["below_ack_quorum"],
                "beyond_last_entry": sum(1 for e in rs.present(lid) if e > last),
                "read_from": dict(sorted(read_from.items())),
                "note": note,
            }
        )
    return ReplicaReport(problems, summaries, [b.bookie_id for b in rs.bookies])


__all__ = [
    "LEDGERS_SCHEMA",
    "PROBLEMS_SCHEMA",
    "PROBLEM_KINDS",
    "Bookie",
    "Layout",
    "ReplicaReport",
    "ReplicaSet",
    "read_order",
    "replica_report",
    "replica_set",
    "write_set",
]
