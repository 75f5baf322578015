"""A bookie's ledger storage, laid out like BookKeeper's ``DbLedgerStorage``.

Each ledger directory ``D`` holds ``D/current/`` with

* entry logs ``<hex id>.log`` in DefaultEntryLogger format, and ``lastId``;
* ``ledgers/``: RocksDB, 8-byte big-endian ledger id -> ``LedgerData`` protobuf;
* ``locations/``: RocksDB, 16-byte big-endian ``(ledgerId, entryId)`` -> 8-byte big-endian
  ``logId << 32 | offset`` (offset of the entry, just after its 4-byte length).

Ledgers are spread over the directories by ``ledgerId mod n``, as DbLedgerStorage does. Adds go to
a write cache; :meth:`DbLedgerStorage.flush` (a checkpoint) appends them to the entry log sorted by
``(ledgerId, entryId)``, fsyncs the log, then writes their locations in one synced RocksDB batch.
An acknowledged flush therefore survives a crash. On reopen the bookie scans the tail of the newest
entry logs, re-indexes complete records that were written but not yet indexed (what a journal replay
would give back), reports a torn tail with its offset, and starts a new log, never appending to an
old one.

A real bookie's directory opens with ``read_only=True``: the RocksDB indexes are read through
private copies (:class:`~pulsarkit.bookkeeper.key_value_storage.ReadOnlyCopy`), entry logs in place.

The stored entry bytes are what the BookKeeper client sends: ``[ledgerId][entryId][lastAddConfirmed]
[length][digest][payload]``; :mod:`pulsarkit.bookkeeper.digest` builds and checks them.
"""

from __future__ import annotations

import itertools
import operator
import os
import struct
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import _native
from ..durable import fsync_dir
from ..errors import (
    BookieError,
    CorruptEntryError,
    EntryNotFoundError,
    LedgerNotFoundError,
)
from ..proto import LedgerData
from . import entrylog, key_value_storage
from .digest import master_key

DEFAULT_LOG_SIZE_LIMIT = 1 << 30
DEFAULT_WRITE_CACHE_SIZE = 64 << 20
DEFAULT_BOOKIE_ID = "127.0.0.1:3181"
LONG_MAX = 2**63 - 1
#: ``BookieProtocol.LAST_ADD_CONFIRMED``: as an entry id, "the last entry of the ledger".
LAST_ADD_CONFIRMED = -1

_KEY = struct.Struct(">qq")
_LONG = struct.Struct(">q")
_ULONG = struct.Struct(">Q")
_HEADER = struct.Struct(">qqqq")


@dataclass
class _ScanResult:
    records: list[tuple[int, int, int]]  # (ledger_id, entry_id, location)
    torn_offset: int | None
    torn_reason: str
    file_size: int


def _log_ids(current: str) -> list[int]:
    return entrylog.EntryLogReader(current).log_ids() if os.path.isdir(current) else []


def _scan_log(current: str, log_id: int) -> _ScanResult:
    """Records of one log up to its first problem (no resynchronisation: bytes after a torn or
    corrupt record are never trusted as entries)."""
    scan = entrylog.EntryLogReader(current).scan(log_id, resync=False)
    records = [(r.ledger_id, r.entry_id, r.location) for r in scan if r.ledger_id >= 0]
    summ = scan.summary
    issue = next(iter(summ.issues), None)
    if issue is None:
        return _ScanResult(records, None, "", summ.file_size)
    return _ScanResult(records, issue.offset, f"{issue.kind}: {issue.message}", summ.file_size)


class _EntryReader:
    """Reads stored entries by location; a missing log file is an :class:`EntryNotFoundError`."""

    def __init__(self, current: str) -> None:
        self.r = entrylog.EntryLogReader(current)

    def read(self, location: int, lid: int, eid: int) -> bytes:
        try:
            return self.r.read(location, lid, eid)
        except OSError:
            raise EntryNotFoundError(f"entry ({lid}, {eid}): entry log {location >> 32:x}.log is missing") from None

    def refresh(self, log_ids: Iterable[int]) -> None:
        for i in log_ids:  # the reader caches each log's size; logs being written grow
            self.r.evict(i)

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------------ recovery report


@dataclass(frozen=True, slots=True)
class TornTail:
    """The incomplete bytes at the end of an entry log (a write cut short by a crash)."""

    ledger_dir: str
    log_id: int
    #: Offset of the first incomplete record (its length field).
    offset: int
    #: Bytes from ``offset`` to the end of the file.
    length: int
    reason: str


@dataclass
class RecoveryReport:
    """What a writable open found at the tail of the entry logs."""

    torn_tails: list[TornTail] = field(default_factory=list)
    #: Complete records that were written but not indexed before the crash, now indexed.
    reindexed_entries: int = 0
    #: ``(ledger_id, entry_id)`` of those records.
    reindexed: list[tuple[int, int]] = field(default_factory=list)
    scanned_logs: list[int] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.torn_tails and not self.reindexed_entries


# ----------------------------------------------------------------------- one ledger directory


class SingleDirectoryDbLedgerStorage:
    """``SingleDirectoryDbLedgerStorage``: one ledger directory, its entry logs and indexes."""

    def __init__(
        self,
        ledger_dir: str,
        log_size_limit: int = DEFAULT_LOG_SIZE_LIMIT,
        read_only: bool = False,
        sync: bool = True,
        recover: bool = True,
    ) -> None:
        self.ledger_dir = os.fspath(ledger_dir)
        self.current = os.path.join(self.ledger_dir, "current")
        self.read_only = read_only
        self.log_size_limit = log_size_limit
        self._copies: list[key_value_storage.ReadOnlyCopy] = []
        if read_only:
            if not os.path.isdir(self.current):
                raise BookieError(f"no bookie ledger directory at {self.ledger_dir} (missing current/)")
            try:
                for sub in ("ledgers", "locations"):
                    self._copies.append(
                        key_value_storage.ReadOnlyCopy(
                            os.path.join(self.current, sub), error=BookieError, what="bookie index"
                        )
                    )
            except BaseException:
                for c in self._copies:
                    c.close()
                raise
            self.ledgers_db, self.locations_db = (c.db for c in self._copies)
        else:
            os.makedirs(self.ledger_dir, mode=0o700, exist_ok=True)  # message data: private to the user
            os.makedirs(self.current, mode=0o700, exist_ok=True)
            self.ledgers_db = key_value_storage.open_writable(
                os.path.join(self.current, "ledgers"), sync=sync, error=BookieError, what="bookie index"
            )
            try:
                self.locations_db = key_value_storage.open_writable(
                    os.path.join(self.current, "locations"), sync=sync, error=BookieError, what="bookie index"
                )
            except BaseException:
                self.ledgers_db.close()
                raise
        self.ledger_data: dict[int, Any] = {}
        it = self.ledgers_db.iter()
        it.seek_to_first()
        while it.valid():
            k = bytes(it.key())
            if len(k) == 8:
                lid = _LONG.unpack(k)[0]
                if lid >= 0:  # negative keys are storage flags, not ledgers
                    ld = LedgerData()
                    try:
                        ld.ParseFromString(bytes(it.value()))
                    except Exception as e:  # noqa: BLE001 - protobuf raises DecodeError subclasses
                        raise BookieError(f"{self.current}/ledgers: bad LedgerData for ledger {lid}: {e}") from None
                    self.ledger_data[lid] = ld
            it.next()
        self.write_cache: dict[tuple[int, int], bytes] = {}
        self.write_cache_bytes = 0
        self.deleted_ledgers: set[int] = set()
        self.reader = _EntryReader(self.current)
        self.writer: Any = None
        self._seen_rotations = 0
        self.recovery = RecoveryReport()
        if not read_only and recover:
            self._recover()

    # -- recovery -----------------------------------------------------------------------------

    def _recover(self) -> None:
        """Re-indexes complete, unindexed records at the tail of the newest logs and reports torn
        tails. Walks logs newest first and stops after the first one holding an indexed record:
        everything written before an indexed record was indexed in the same or an earlier flush."""
        rep = self.recovery
        for log_id in sorted(_log_ids(self.current), reverse=True):
            rep.scanned_logs.append(log_id)
            batch = key_value_storage.write_batch()
            found_indexed = False
            pending: list[tuple[int, int]] = []
            scan = _scan_log(self.current, log_id)
            for lid, eid, location in scan.records:
                ld = self.ledger_data.get(lid)
                if ld is None or not ld.exists or eid < 0:
                    continue  # a deleted ledger, or a meta entry
                key = _KEY.pack(lid, eid)
                if self.locations_db.get(key) is not None:
                    found_indexed = True
                    continue
                batch.put(key, _ULONG.pack(location))
                pending.append((lid, eid))
            if scan.torn_offset is not None:
                rep.torn_tails.append(
                    TornTail(
                        self.ledger_dir,
                        log_id,
                        scan.torn_offset,
                        scan.file_size - scan.torn_offset,
                        scan.torn_reason,
                    )
                )
            if pending:
                self.locations_db.write(batch)
                rep.reindexed.extend(pending)
                rep.reindexed_entries += len(pending)
            if found_indexed:
                break

    # -- ledgers ------------------------------------------------------------------------------

    def _put_ledger_data(self, lid: int, ld: Any) -> None:
        self.ledgers_db.put(_LONG.pack(lid), ld.SerializeToString())
        self.ledger_data[lid] = ld

    def set_master_key(self, lid: int, key: bytes) -> None:
        ld = self.ledger_data.get(lid)
        if ld is not None and ld.exists:
            if ld.masterKey != key and ld.masterKey:
                raise BookieError(f"ledger {lid}: master key mismatch")
            return
        self._put_ledger_data(lid, LedgerData(exists=True, fenced=False, masterKey=key))

    def set_fenced(self, lid: int) -> bool:
        ld = self._ledger(lid)
        if ld.fenced:
            return False
        new = LedgerData()
        new.CopyFrom(ld)
        new.fenced = True
        self._put_ledger_data(lid, new)
        return True

    def _ledger(self, lid: int) -> Any:
        ld = self.ledger_data.get(lid)
        if ld is None or not ld.exists:
            raise LedgerNotFoundError(f"ledger {lid} does not exist on this bookie ({self.ledger_dir})")
        return ld

    def delete_ledger(self, lid: int) -> None:
        self._ledger(lid)
        self.ledgers_db.delete(_LONG.pack(lid))
        del self.ledger_data[lid]
        self.deleted_ledgers.add(lid)
        for k in [k for k in self.write_cache if k[0] == lid]:
            self.write_cache_bytes -= len(self.write_cache.pop(k))

    # -- entries ------------------------------------------------------------------------------

    def add_entry(self, lid: int, eid: int, data: bytes) -> None:
        ld = self._ledger(lid)
        if ld.fenced:
            raise BookieError(f"ledger {lid} is fenced")
        old = self.write_cache.get((lid, eid))
        if old is not None:
            self.write_cache_bytes -= len(old)
        self.write_cache[(lid, eid)] = data
        self.write_cache_bytes += len(data)

    def add_entries(self, keys: list[tuple[int, int]], entries: list[bytes]) -> None:
        """Many :meth:`add_entry` calls at once; the caller has checked that every ledger exists and is not fenced."""
        cache, new = self.write_cache, dict(zip(keys, entries))  # a key given twice: its last bytes
        for k in cache.keys() & new.keys():  # re-added entries replace the cached bytes
            self.write_cache_bytes -= len(cache[k])
        cache.update(new)
        self.write_cache_bytes += sum(map(len, new.values()))

    def location(self, lid: int, eid: int) -> int:
        raw = self.locations_db.get(_KEY.pack(lid, eid))
        return 0 if raw is None else _ULONG.unpack(raw)[0]

    def last_entry_id(self, lid: int) -> int:
        """Highest entry id stored for the ledger (-1 if none)."""
        self._ledger(lid)
        best = -1
        for l, e in self.write_cache:
            if l == lid and e > best:
                best = e
        it = self.locations_db.iter()
        it.seek_for_prev(_KEY.pack(lid, LONG_MAX))
        if it.valid():
            l, e = _KEY.unpack(bytes(it.key()))
            if l == lid and e > best:
                best = e
        return best

    def read_entry(self, lid: int, eid: int) -> bytes:
        self._ledger(lid)
        if eid == LAST_ADD_CONFIRMED:
            eid = self.last_entry_id(lid)
            if eid < 0:
                raise EntryNotFoundError(f"ledger {lid} holds no entries")
        data = self.write_cache.get((lid, eid))
        if data is not None:
            return data
        loc = self.location(lid, eid)
        if loc == 0:
            raise EntryNotFoundError(f"entry ({lid}, {eid}) not found")
        return self.reader.read(loc, lid, eid)

    def entry_ids(self, lid: int) -> list[int]:
        self._ledger(lid)
        out = {e for (l, e) in self.write_cache if l == lid}
        it = self.locations_db.iter()
        it.seek(_KEY.pack(lid, 0))
        while it.valid():
            l, e = _KEY.unpack(bytes(it.key()))
            if l != lid:
                break
            out.add(e)
            it.next()
        return sorted(out)

    # -- checkpoint -----------------------------------------------------------------------------

    def flush(self) -> int:
        """Checkpoint: cache -> entry log (sorted) -> fsync -> locations batch (synced) -> cleanup of
        deleted ledgers' locations. Returns the number of entries written."""
        n = len(self.write_cache)
        if n:
            if self.writer is None:
                self.writer = entrylog.EntryLogWriter(self.current, log_size_limit=self.log_size_limit)
            batch = key_value_storage.write_batch()
            keys = sorted(self.write_cache)
            locs = self.writer.append_entries(list(map(self.write_cache.__getitem__, keys)))  # one native call
            # map/starmap keep the per-entry index work in C: no Python frame or tuple per entry
            deque(map(batch.put, itertools.starmap(_KEY.pack, keys), map(_ULONG.pack, locs)), maxlen=0)
            self.writer.flush()
            self.reader.refresh(self._written_logs())
            self.locations_db.write(batch)
            self.write_cache.clear()
            self.write_cache_bytes = 0
        for lid in sorted(self.deleted_ledgers):
            self.locations_db.delete_range(_KEY.pack(lid, 0), _KEY.pack(lid, LONG_MAX))
        self.deleted_ledgers.clear()
        return n

    def _written_logs(self) -> list[int]:
        """Logs whose size changed since the last checkpoint: the active one and new rotations."""
        w = self.writer
        rotated = list(getattr(w, "rotated_log_ids", None) or [])
        ids, self._seen_rotations = rotated[self._seen_rotations :], len(rotated)
        cur = getattr(w, "current_log_id", None)
        return ids + ([cur] if cur is not None else [])

    # -- garbage collection (bookkeeper.gc drives these; the index and the files are this class's) ----

    def active_log_id(self) -> int | None:
        """The log the writer appends to (never garbage-collected or compacted)."""
        return getattr(self.writer, "current_log_id", None) if self.writer is not None else None

    def entry_log_ids(self) -> list[int]:
        return _log_ids(self.current)

    def entry_log_size(self, log_id: int) -> int:
        """The log file's size on disk (header and ledgers map included)."""
        return os.path.getsize(os.path.join(self.current, f"{log_id:x}.log"))

    def entry_log_metadata(self, log_id: int) -> Any:
        """``EntryLogMetadata`` of a log: its ledgers map (or a scan), total and remaining size."""
        return entrylog.EntryLogReader(self.current).metadata(log_id)

    def next_log_id(self) -> int:
        """An id above every log, compaction leftover and ``lastId`` (``EntryLogger`` allocation)."""
        ids = list(self.entry_log_ids())
        for name in os.listdir(self.current):
            if ".log." in name:
                head = name.split(".log.", 1)[0]
                try:
                    ids.append(int(head, 16))
                except ValueError:
                    pass
                pair = _native.parse_compacted_name(name)
                if pair is not None:
                    ids.extend(pair)
        try:
            with open(os.path.join(self.current, "lastId")) as f:
                ids.append(int(f.read().strip(), 16))
        except (OSError, ValueError):
            pass
        active = self.active_log_id()
        if active is not None:
            ids.append(active)
        return max(ids, default=-1) + 1

    def remove_entry_log(self, log_id: int) -> None:
        """Deletes a log file (``removeEntryLog``), its cached reader first."""
        self.reader.refresh([log_id])
        os.remove(os.path.join(self.current, f"{log_id:x}.log"))

    def install_compacted_log(self, compacted_path: str, dst_log_id: int, src_log_id: int, locations: Any) -> int:
        """Phase three of the transactional compactor: ``<dst>.log.<src>.compacted`` becomes
        ``<dst>.log`` (hard link), the copied entries' locations move to it (only those still in the
        source: a ledger deleted meanwhile stays deleted), the index is flushed, then the marker and
        the source log are removed. Safe to repeat after a crash at any point. Returns entries moved."""
        dst = os.path.join(self.current, f"{dst_log_id:x}.log")
        if not os.path.exists(dst):
            os.link(compacted_path, dst)
        # the new name durable before the index points at it and before the source goes: else a crash could
        # keep the index's move and the source's removal and lose the name they depend on
        fsync_dir(self.current)
        batch = key_value_storage.write_batch()
        moved = 0
        lids = locations.column("ledger_id").to_pylist()
        eids = locations.column("entry_id").to_pylist()
        locs = locations.column("location").to_pylist()
        for lid, eid, loc in zip(lids, eids, locs, strict=True):
            ld = self.ledger_data.get(lid)
            if ld is None or not ld.exists:
                continue
            cur = self.locations_db.get(_KEY.pack(lid, eid))
            if cur is not None and _ULONG.unpack(cur)[0] >> 32 == src_log_id:
                batch.put(_KEY.pack(lid, eid), _ULONG.pack(loc))
                moved += 1
        self.locations_db.write(batch)
        self.locations_db.flush()
        os.remove(compacted_path)
        if os.path.exists(os.path.join(self.current, f"{src_log_id:x}.log")):
            self.remove_entry_log(src_log_id)
        fsync_dir(self.current)
        self.reader.refresh([dst_log_id])
        return moved

    def close(self) -> None:
        try:
            if not self.read_only:
                self.flush()
                if self.writer is not None:
                    self.writer.close()
        finally:
            self.reader.close()
            if self._copies:
                for c in self._copies:
                    c.close()
            else:
                self.ledgers_db.close()
                self.locations_db.close()


# --------------------------------------------------------------------------------------- bookie


class DbLedgerStorage:
    """Ledger storage over one or more ledger directories (each laid out as ``<dir>/current/``).

    Entry ids are per ledger; ``add_entry`` takes the stored entry bytes, which start with the ledger
    and entry ids, as ``LedgerStorage.addEntry`` does. Not thread-safe beyond one lock per call.
    """

    def __init__(
        self,
        ledger_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        log_size_limit: int = DEFAULT_LOG_SIZE_LIMIT,
        write_cache_size: int = DEFAULT_WRITE_CACHE_SIZE,
        read_only: bool = False,
        sync: bool = True,
        bookie_id: str = DEFAULT_BOOKIE_ID,
    ) -> None:
        dirs = [ledger_dirs] if isinstance(ledger_dirs, (str, os.PathLike)) else list(ledger_dirs)
        if not dirs:
            raise BookieError("a bookie needs at least one ledger directory")
        if not 0 < log_size_limit <= DEFAULT_LOG_SIZE_LIMIT:
            raise BookieError(f"logSizeLimit must be in (0, 1 GiB], got {log_size_limit}")
        self.read_only = read_only
        self.bookie_id = bookie_id
        self.write_cache_size = write_cache_size
        self._lock = threading.RLock()
        self._closed = False
        self.dirs: list[SingleDirectoryDbLedgerStorage] = []
        try:
            for d in dirs:
                self.dirs.append(SingleDirectoryDbLedgerStorage(os.fspath(d), log_size_limit, read_only, sync))
        except BaseException:
            for s in self.dirs:
                s.close()
            raise

    @classmethod
    def open(cls, ledger_dirs: Any, **kw: Any) -> DbLedgerStorage:
        return cls(ledger_dirs, **kw)

    def _dir(self, ledger_id: int) -> SingleDirectoryDbLedgerStorage:
        if ledger_id < 0:
            raise LedgerNotFoundError(f"invalid ledger id {ledger_id}")
        return self.dirs[ledger_id % len(self.dirs)]

    def _check(self, write: bool = False) -> None:
        if self._closed:
            raise BookieError("bookie is closed")
        if write and self.read_only:
            raise BookieError("bookie was opened read-only")

    @property
    def recovery(self) -> RecoveryReport:
        """Merged recovery report of all ledger directories."""
        rep = RecoveryReport()
        for s in self.dirs:
            rep.torn_tails += s.recovery.torn_tails
            rep.reindexed += s.recovery.reindexed
            rep.reindexed_entries += s.recovery.reindexed_entries
            rep.scanned_logs += s.recovery.scanned_logs
        return rep

    # -- ledgers ------------------------------------------------------------------------------

    def create_ledger(self, ledger_id: int, master_key: bytes = master_key(b"")) -> None:
        """Registers a ledger (``setMasterKey``): ``LedgerData{exists, fenced=false, masterKey}``."""
        with self._lock:
            self._check(True)
            self._dir(ledger_id).set_master_key(ledger_id, bytes(master_key))

    def ledger_exists(self, ledger_id: int) -> bool:
        ld = self._dir(ledger_id).ledger_data.get(ledger_id) if ledger_id >= 0 else None
        return ld is not None and ld.exists

    def ledger_data(self, ledger_id: int) -> Any:
        return self._dir(ledger_id)._ledger(ledger_id)

    def ledgers(self) -> list[int]:
        """Ids of the ledgers this bookie holds, ascending."""
        return sorted(lid for s in self.dirs for lid, ld in s.ledger_data.items() if ld.exists)

    def fence_ledger(self, ledger_id: int) -> bool:
        """Fences the ledger (no more adds). True if it was not fenced before."""
        with self._lock:
            self._check(True)
            return self._dir(ledger_id).set_fenced(ledger_id)

    def delete_ledger(self, ledger_id: int) -> None:
        """``deleteLedger``: drops the ledger from ``ledgers/`` now and its locations at the next
        checkpoint. Entry-log space comes back only through garbage collection."""
        with self._lock:
            self._check(True)
            self._dir(ledger_id).delete_ledger(ledger_id)

    # -- entries ------------------------------------------------------------------------------

    def add_entry(self, data: bytes) -> tuple[int, int]:
        """Adds stored entry bytes (``[ledgerId][entryId]...``); returns ``(ledger_id, entry_id)``."""
        data = bytes(data)
        if len(data) < 16:
            raise CorruptEntryError(f"an entry needs at least 16 bytes (ledger and entry ids), got {len(data)}")
        lid, eid = _KEY.unpack_from(data)
        if eid < 0:
            raise BookieError(f"entry id {eid} is not a data entry")
        with self._lock:
            self._check(True)
            s = self._dir(lid)
            s.add_entry(lid, eid, data)
            if s.write_cache_bytes >= self.write_cache_size:
                s.flush()
        return lid, eid

    def add_entries(self, entries: Sequence[bytes]) -> list[tuple[int, int]]:
        """:meth:`add_entry` for many stored entries under one lock (a bulk import's path); returns
        their ``(ledger_id, entry_id)``. Every entry is checked before any is added."""
        entries = [bytes(d) for d in entries]
        if entries and min(map(len, entries)) < 16:
            i = next(i for i, d in enumerate(entries) if len(d) < 16)
            raise CorruptEntryError(
                f"entry {i} of the batch: needs at least 16 bytes (ledger and entry ids), got {len(entries[i])}"
            )
        keys = list(map(_KEY.unpack_from, entries))
        if keys and min(map(operator.itemgetter(1), keys)) < 0:
            i = next(i for i, k in enumerate(keys) if k[1] < 0)
            raise BookieError(f"entry {i} of the batch: entry id {keys[i][1]} is not a data entry")
        with self._lock:
            self._check(True)
            by_dir: dict[int, tuple[list[tuple[int, int]], list[bytes]]] = {}
            for lid in {k[0] for k in keys}:  # unknown or fenced ledgers refuse the whole batch
                if self._dir(lid)._ledger(lid).fenced:
                    raise BookieError(f"ledger {lid} is fenced")
            n = len(self.dirs)
            if n == 1:
                by_dir[0] = (keys, entries)
            else:
                for k, data in zip(keys, entries):
                    ks, ds = by_dir.setdefault(k[0] % n, ([], []))
                    ks.append(k)
                    ds.append(data)
            for i, (ks, ds) in by_dir.items():
                s = self.dirs[i]
                s.add_entries(ks, ds)
                if s.write_cache_bytes >= self.write_cache_size:  # checked per batch: it may overshoot by one batch
                    s.flush()
        return keys

    def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        """Stored bytes of an entry; ``entry_id=-1`` reads the last one."""
        with self._lock:
            self._check()
            return self._dir(ledger_id).read_entry(ledger_id, entry_id)

    def last_entry_id(self, ledger_id: int) -> int:
        with self._lock:
            self._check()
            return self._dir(ledger_id).last_entry_id(ledger_id)

    def read_last(self, ledger_id: int) -> tuple[int, bytes] | None:
        """``(entry_id, stored bytes)`` of the ledger's last entry, or None if it has none."""
        with self._lock:
            self._check()
            s = self._dir(ledger_id)
            eid = s.last_entry_id(ledger_id)
            return None if eid < 0 else (eid, s.read_entry(ledger_id, eid))

    def entry_ids(self, ledger_id: int) -> list[int]:
        with self._lock:
            self._check()
            return self._dir(ledger_id).entry_ids(ledger_id)

    def entries(self, ledger_id: int, first: int = 0, last: int | None = None) -> Iterator[tuple[int, bytes]]:
        """``(entry_id, stored bytes)`` for the ledger's entries in ``[first, last]``."""
        for eid in self.entry_ids(ledger_id):
            if eid >= first and (last is None or eid <= last):
                yield eid, self.read_entry(ledger_id, eid)

    def location(self, ledger_id: int, entry_id: int) -> int:
        """The indexed ``logId << 32 | offset`` of an entry (0 if not indexed yet)."""
        return self._dir(ledger_id).location(ledger_id, entry_id)

    # -- lifecycle ------------------------------------------------------------------------------

    def flush(self) -> int:
        """Checkpoint every directory; once this returns, every added entry is durable."""
        with self._lock:
            self._check()
            return 0 if self.read_only else sum(s.flush() for s in self.dirs)

    checkpoint = flush

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            errors = []
            for s in self.dirs:
                try:
                    s.close()
                except Exception as e:  # noqa: BLE001 - close every directory, then report
                    errors.append(e)
            if errors:
                raise errors[0]

    def __enter__(self) -> DbLedgerStorage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DbLedgerStorage({[s.ledger_dir for s in self.dirs]!r}{', read_only' if self.read_only else ''})"


__all__ = [
    "DEFAULT_BOOKIE_ID",
    "DEFAULT_LOG_SIZE_LIMIT",
    "LAST_ADD_CONFIRMED",
    "DbLedgerStorage",
    "SingleDirectoryDbLedgerStorage",
    "RecoveryReport",
    "TornTail",
]
