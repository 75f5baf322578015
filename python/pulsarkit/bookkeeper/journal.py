"""BookKeeper's journal: ``<hex id>.txn`` files, read as ``Journal.scanJournal`` and the bookie's
replay on start-up read them.

A journal starts with ``BKLG`` and a version (V5+ headers are 512 bytes; V1 has none), then records
``[int32 length][ledgerId][entryId]...``: the entry as the client sent it, or a meta entry
(master key, fence, force-ledger, explicit LAC) with a negative entry id. V5+ pads with records of
length ``-0x100``; a zero length ends the journal (the preallocated tail). Entries after the bookie's
``lastMark`` (journal id and offset, in each ledger directory) are what a restart replays into
ledger storage.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, Union

import pyarrow as pa

PathLike = Union[str, "os.PathLike[str]"]

JOURNAL_MAGIC = b"BKLG"
_JOURNAL_HEADER_V5 = 512
_PADDING_MASK = -0x100
_IDS = struct.Struct(">qq")
#: Meta entry ids: master key, fence, force-ledger, explicit LAC (``BookieImpl.METAENTRY_ID_*``).
META_ENTRY_KINDS = {-0x1000: "MASTER_KEY", -0x2000: "FENCE", -0x4000: "FORCE_LEDGER", -0x8000: "EXPLICIT_LAC"}
META_ENTRY_IDS = tuple(META_ENTRY_KINDS)


class JournalRecord(NamedTuple):
    #: The journal file.
    path: str
    #: Offset of the record's length field in the file.
    offset: int
    ledger_id: int
    entry_id: int
    #: The record: ``[ledgerId][entryId]`` then, for a data entry, the rest of the stored entry.
    data: bytes


class JournalIssue(NamedTuple):
    """Bytes of a journal that could not be read as records: what and where."""

    kind: str
    path: str
    offset: int | None
    message: str

    def __str__(self) -> str:
        at = f" at offset {self.offset}" if self.offset is not None else ""
        return f"{self.kind}: {self.path}{at}: {self.message}"


class JournalScan(NamedTuple):
    records: list[JournalRecord]
    issues: list[JournalIssue]
    version: int


def last_mark(dirs: Sequence[Path], name: str = "lastMark") -> tuple[int, int] | None:
    """The bookie's ``lastMark`` (journal id, offset): journal bytes before it are in ledger storage.
    With several journal directories, journal ``i`` has its own ``lastMark.i``."""
    marks = []
    for d in dirs:
        f = d / name
        try:
            raw = f.read_bytes()
        except OSError:
            continue
        if len(raw) >= 16:
            marks.append(struct.unpack(">qq", raw[:16]))
    return max(marks) if marks else None  # LastLogMark.readLog keeps the newest mark of all ledger dirs


def scan_journal(path: PathLike, start: int | None = None) -> JournalScan:
    """Records of one ``<hex>.txn`` journal (from ``start``, a ``lastMark`` offset, when given).

    Follows ``Journal.scanJournal``: a zero length ends the journal (preallocated tail), padding
    records (V5+) are skipped, a record cut by the end of the file is a torn tail (reported)."""
    p = str(path)
    data = Path(p).read_bytes()
    issues: list[JournalIssue] = []
    if len(data) < 8:
        return JournalScan(
            [],
            [JournalIssue("torn_journal_header", p, 0, f"{len(data)} bytes, shorter than the journal header")],
            0,
        )
    if data[:4] == JOURNAL_MAGIC:
        version = struct.unpack_from(">i", data, 4)[0]
        pos = _JOURNAL_HEADER_V5 if version >= 5 else 8
    else:
        version, pos = 1, 0  # V1 journals have no header
    if start is not None and start > pos:
        pos = start
    out = []
    n = len(data)
    while pos + 4 <= n:
        rec_off = pos
        length = struct.unpack_from(">i", data, pos)[0]
        pos += 4
        if length == 0:
            break
        padding = False
        if length < 0:
            if length == _PADDING_MASK and version >= 5:
                if pos + 4 > n:
                    issues.append(
                        JournalIssue("torn_journal_tail", p, rec_off, "padding record cut by the end of the file")
                    )
                    break
                length = struct.unpack_from(">i", data, pos)[0]
                pos += 4
                if length == 0:
                    continue
                padding = True
            else:
                issues.append(JournalIssue("corrupt_journal_record", p, rec_off, f"negative record length {length}"))
                break
        if pos + length > n:
            issues.append(
                JournalIssue(
                    "torn_journal_tail",
                    p,
                    rec_off,
                    f"record of {length} bytes cut by the end of the file ({n - pos} bytes left)",
                )
            )
            break
        rec = data[pos : pos + length]
        pos += length
        if padding:
            continue
        if len(rec) < 16:
            issues.append(
                JournalIssue("corrupt_journal_record", p, rec_off, f"record of {len(rec)} bytes has no ledger/entry id")
            )
            continue
        lid, eid = _IDS.unpack_from(rec)
        out.append(JournalRecord(p, rec_off, lid, eid, rec))
    return JournalScan(out, issues, version)


def journal_files(dirs: Sequence[Path]) -> list[tuple[int, Path]]:
    out = []
    for d in dirs:
        if not d.is_dir():
            continue
        for f in d.iterdir():
            if f.suffix == ".txn":
                try:
                    out.append((int(f.stem, 16), f))
                except ValueError:
                    continue
    return sorted(out)


JOURNAL_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("version", pa.int32()),
        ("offset", pa.int64()),
        ("ledger_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("kind", pa.string()),
        ("size", pa.int64()),
        ("record", pa.binary()),
        ("issue", pa.string()),
    ]
)


def journal_table(paths: Sequence[PathLike]) -> pa.Table:
    """Every record of the given journal files as one Arrow table, in file order; what a journal
    could not give (a torn tail, a corrupt length) is a row with ``issue`` set and its offset, never
    dropped. ``kind`` is ``DATA`` or the meta entry's name (``MASTER_KEY``, ``FENCE``, ...)."""
    cols: dict[str, list[Any]] = {f.name: [] for f in JOURNAL_SCHEMA}

    def row(
        path: str,
        version: int,
        offset: int | None,
        lid: int | None,
        eid: int | None,
        kind: str | None,
        data: bytes | None,
        issue: str | None,
    ) -> None:
        for k, v in zip(
            cols, (path, version, offset, lid, eid, kind, None if data is None else len(data), data, issue)
        ):
            cols[k].append(v)

    for p in paths:
        scan = scan_journal(p)
        for r in scan.records:
            kind = "DATA" if r.entry_id >= 0 else META_ENTRY_KINDS.get(r.entry_id, "META")
            row(r.path, scan.version, r.offset, r.ledger_id, r.entry_id, kind, r.data, None)
        for i in scan.issues:
            row(i.path, scan.version, i.offset, None, None, None, None, f"{i.kind}: {i.message}")
    return pa.Table.from_pydict(cols, schema=JOURNAL_SCHEMA)


__all__ = [
    "JOURNAL_SCHEMA",
    "META_ENTRY_IDS",
    "META_ENTRY_KINDS",
    "JournalIssue",
    "JournalRecord",
    "JournalScan",
    "journal_files",
    "journal_table",
    "last_mark",
    "scan_journal",
]
