"""What a scan reads: partitions of ledger segments and where the bookies keep them, and what a read
took from the entry logs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from ..bookkeeper.entrylog import EntryLogReader
from .replicas import Layout
from .schema import Pos

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
    #: entries the read gave no rows for because they could not be read or verified (a run no bookie
    #: holds counts all its entries), and the issues reported (``on_issue``; a run is one)
    unreadable_entries: int = 0
    issues: int = 0

    @property
    def total_bytes(self) -> int:
        return self.head_bytes + self.entry_bytes + self.scan_bytes

    def add(self, other: ReadStats) -> None:
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + getattr(other, k))

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


# ------------------------------------------------------------------------------------------- plan


@dataclass(kw_only=True)
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


@dataclass(kw_only=True)
class Replica:
    """One bookie's copies of a segment's entries: one of its ledger directories (``current`` and a
    location per entry, -1 when absent) or its journal (``current`` None)."""

    bookie_id: str
    current: str | None
    locations: bytes
    journal: dict[int, bytes] = field(default_factory=dict)


@dataclass(kw_only=True)
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
    #: ``(ledger, first, last)`` runs of entries the ledger's range claims but no bookie holds: each is
    #: read as one issue (``missing_entries``; with ``kind="entries"`` one error row), however long
    gaps: list[tuple[int, int, int]] = field(default_factory=list)
    #: planned without its topic's metadata pass (``metadata_pass="read"``, in-process only): the topic
    #: planned again with it (and what that pass read), called by the read at the first transactional entry
    #: it meets
    refine: Callable[[], tuple[ScanPartition | None, ReadStats]] | None = field(default=None, compare=False, repr=False)


def starting_at(part: ScanPartition, pos: Pos) -> ScanPartition:
    """The partition's entries and gaps at ``pos`` (an entry or a gap's first entry) and after it; its
    segments are one bookie's."""
    segs = []
    for s in part.segments:
        if (s.ledger_id, s.last) < pos:
            continue
        if (s.ledger_id, s.first) < pos:
            assert not s.replicas and s.layout is None
            k = pos[1] - s.first
            journal = {e: d for e, d in s.journal.items() if e >= pos[1]}
            s = dataclasses.replace(s, first=pos[1], locations=s.locations[8 * k :], journal=journal)
        segs.append(s)
    gaps = [g for g in part.gaps if (g[0], g[1]) >= pos]
    return dataclasses.replace(part, segments=segs, gaps=gaps, refine=None)


#: A segment location for an entry the plan pruned by its times.
PRUNED = -2
# ------------------------------------------------------------------------------------------- read


class Readers:
    def __init__(self) -> None:
        self._r: dict[str, EntryLogReader] = {}

    def get(self, current: str) -> EntryLogReader:
        r = self._r.get(current)
        if r is None:
            r = self._r[current] = EntryLogReader(current)
        return r
