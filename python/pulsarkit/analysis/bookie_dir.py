"""The bookie side of a data directory, read-only: where a standalone or a bookie keeps its
directories, and each ledger directory's entry logs and ``ledgers``/``locations`` indexes (read
through private copies; a missing or unreadable index is rebuilt by scanning the entry logs)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from ..bookkeeper import entrylog, key_value_storage
from ..errors import PulsarkitError
from ..proto import LedgerData
from .records import DataDirError, Issue

_KEY = struct.Struct(">qq")
_LONG = struct.Struct(">q")


def is_rocksdb(d: Path) -> bool:
    return d.is_dir() and (d / "CURRENT").exists()


def find_layout(root: Path) -> tuple[Path, list[Path]]:
    """(metadata dir, bookie dirs holding ``current/``) of a standalone or pulsarkit directory."""
    md = next((c for c in (root / "metadata", root) if is_rocksdb(c)), None)
    if md is None:
        raise DataDirError(f"{root}: no RocksDB metadata store (expected {root / 'metadata'}/CURRENT)", str(root))
    bks = [
        c
        for c in (
            root / "bookkeeper",
            root / "standalone" / "bookkeeper",
            root / "bookie",
            root / "data" / "standalone" / "bookkeeper",
        )
        if (c / "current").is_dir()
    ]
    if not bks:
        raise DataDirError(
            f"{root}: no bookie directory (looked for bookkeeper/current, standalone/bookkeeper/current, "
            "bookie/current)",
            str(root),
        )
    return md, bks[:1]


def read_rocksdb(src: Path, what: str) -> list[tuple[bytes, bytes]]:
    """All key/value pairs of a RocksDB, read through a private copy (WAL replayed), in key order."""
    try:
        return key_value_storage.read_all(src, what=what)
    except PulsarkitError as e:
        raise DataDirError(str(e), str(src)) from None


class BookieDir:
    """A ledger directory's ``current/`` (entry logs) and its index directory (``ledgers``/``locations``)."""

    def __init__(self, current: Path, index_current: Path, issues: list[Issue]) -> None:
        self.current = current
        self.index_current = index_current
        self.reader = entrylog.EntryLogReader(str(current))
        self.ledger_data: dict[int, Any] = {}
        self.locations: dict[int, dict[int, int]] = {}
        self.log_ledger_bytes: dict[int, int] = {}
        #: log id -> its ``EntryLogMetadata`` (total and remaining size, bytes per ledger)
        self.log_metadata: dict[int, Any] = {}
        led = index_current / "ledgers"
        pairs = self._index(led, "ledgers index", issues)
        if pairs is not None:
            for k, v in pairs:
                if len(k) != 8:
                    continue
                lid = _LONG.unpack(k)[0]
                if lid < 0:
                    continue  # STORAGE_FLAGS and other non-ledger keys
                ld = LedgerData()
                try:
                    ld.ParseFromString(v)
                except Exception as e:  # noqa: BLE001 - protobuf DecodeError
                    issues.append(Issue("bad_ledger_data", str(led), None, f"ledger {lid}: {e}", lid))
                    continue
                self.ledger_data[lid] = ld
        else:
            issues.append(Issue("missing_index", str(led), None, "no readable ledgers/ RocksDB; ledger flags unknown"))
        loc = index_current / "locations"
        self.log_ids = self.reader.log_ids()
        pairs = self._index(loc, "locations index", issues)
        if pairs is not None:
            for k, v in pairs:
                if len(k) != 16 or len(v) != 8:
                    continue
                lid, eid = _KEY.unpack(k)
                self.locations.setdefault(lid, {})[eid] = _LONG.unpack(v)[0]
            self.scanned = False
        else:
            issues.append(
                Issue(
                    "missing_index",
                    str(loc),
                    None,
                    "no readable locations/ RocksDB; entry locations rebuilt by scanning the entry logs",
                )
            )
            self._scan_all(issues)
            self.scanned = True
        for log_id in self.log_ids:
            try:
                md = self.reader.metadata(log_id)
            except (PulsarkitError, OSError) as e:
                issues.append(Issue("unreadable_entry_log", str(self.reader.path_of(log_id)), None, str(e)))
                continue
            empty = self.reader.file_size(log_id) == 0  # the preallocated next log (lastId names it)
            if not empty:
                self.log_metadata[log_id] = md
            for issue in md.issues:
                if issue.kind != "zero_tail" and not empty:
                    issues.append(Issue(issue.kind, str(self.reader.path_of(log_id)), issue.offset, issue.message))
            for lid, size in md.ledgers.items():
                self.log_ledger_bytes[lid] = self.log_ledger_bytes.get(lid, 0) + size

    @staticmethod
    def _index(path: Path, what: str, issues: list[Issue]) -> list[tuple[bytes, bytes]] | None:
        """A RocksDB index's pairs, or None (with an issue) when it is missing or unreadable."""
        if not is_rocksdb(path):
            return None
        try:
            return read_rocksdb(path, what)
        except DataDirError as e:
            issues.append(Issue("unreadable_index", str(path), None, e.reason))
            return None

    def _scan_all(self, issues: list[Issue]) -> None:
        # Later logs win: compaction copies live entries forward into newer logs.
        for log_id in self.log_ids:
            scan = self.reader.scan(log_id, resync=False)
            for r in scan:
                if r.ledger_id >= 0:
                    self.locations.setdefault(r.ledger_id, {})[r.entry_id] = r.location


__all__ = ["BookieDir", "find_layout", "is_rocksdb", "read_rocksdb"]
