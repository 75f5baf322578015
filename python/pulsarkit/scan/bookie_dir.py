"""The bookie side of a data directory, read-only: where a standalone or a bookie keeps its
directories, which bookie a directory belongs to (its cookie), and each ledger directory's entry logs
and ``ledgers``/``locations`` indexes (read through private copies; the ``locations`` copy stays open
and is read by ledger, :class:`LocationIndex`; a missing or unreadable index is rebuilt by scanning the
entry logs)."""

from __future__ import annotations

import os
import struct
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..bookkeeper import cookie as bookie_cookie
from ..bookkeeper import digest as bookie_digest
from ..bookkeeper import entrylog, key_value_storage
from ..bookkeeper.cookie import Cookie
from ..bookkeeper.journal import JournalRecord
from ..errors import BookieError, PulsarkitError
from ..proto import LedgerData
from .records import DataDirError, Issue

PathLike = str | os.PathLike[str]
#: Bookie id -> its directories (a ledger directory, or a standalone's data dir holding one).
BookieMapping = Mapping[str, Sequence[PathLike] | PathLike]

_KEY = struct.Struct(">qq")
_LONG = struct.Struct(">q")


def is_rocksdb(d: Path) -> bool:
    return d.is_dir() and (d / "CURRENT").exists()


#: Where a standalone (or pulsarkit's own store) keeps its bookie's ledger directory, under its root.
_BOOKIE_SUBDIRS = (("bookkeeper",), ("standalone", "bookkeeper"), ("bookie",), ("data", "standalone", "bookkeeper"))


def _bookie_candidates(root: Path) -> list[Path]:
    return [c for c in (root.joinpath(*sub) for sub in _BOOKIE_SUBDIRS) if (c / "current").is_dir()]


def bookie_parts(root: Path) -> tuple[list[Path], list[Path]]:
    """(ledger directories, journal directories) of one bookie whose directories sit under ``root`` (a
    bookie's ``data/bookkeeper`` with ``journal/`` and ``ledgers/``, or several ``ledgers*``). A directory
    holding ``current/``, or a standalone's data directory, is one directory that is both. Each is told by what
    its ``current/`` holds: ``*.txn`` journal files, or entry logs and indexes; by its name when still empty."""
    root = Path(root)
    if (root / "current").is_dir() or root.name == "current" or _bookie_candidates(root):
        d = bookie_ledger_dir(root)
        return [d], [d]
    ledgers: list[Path] = []
    journals: list[Path] = []
    try:
        children = sorted(c for c in root.iterdir() if (c / "current").is_dir())
    except OSError as e:
        raise DataDirError(f"{root}: cannot list the bookie's directories: {e}", str(root)) from None
    for c in children:
        names = {n.name for n in (c / "current").iterdir()}
        journal = any(n.endswith(".txn") for n in names)
        ledger = any(n.endswith(".log") for n in names) or bool(names & {"ledgers", "locations", "lastId"})
        if not (journal or ledger):
            journal = c.name.startswith("journal")
            ledger = not journal
        if ledger:
            ledgers.append(c)
        if journal:
            journals.append(c)
    if not ledgers:
        raise DataDirError(
            f"{root}: no bookie ledger directory under it (a directory with current/ holding entry logs or "
            "the ledgers/locations index)",
            str(root),
        )
    return ledgers, journals


def find_layout(root: Path) -> tuple[Path, list[Path]]:
    """(metadata dir, bookie dirs holding ``current/``) of a standalone or pulsarkit directory."""
    md = next((c for c in (root / "metadata", root) if is_rocksdb(c)), None)
    if md is None:
        raise DataDirError(f"{root}: no RocksDB metadata store (expected {root / 'metadata'}/CURRENT)", str(root))
    bks = _bookie_candidates(root)
    if not bks:
        raise DataDirError(
            f"{root}: no bookie directory (looked for bookkeeper/current, standalone/bookkeeper/current, "
            "bookie/current)",
            str(root),
        )
    return md, bks[:1]


def bookie_ledger_dir(path: Path) -> Path:
    """The ledger directory (the one holding ``current/``) that ``path`` names: the directory itself,
    its parent when it is a ``current/``, or a standalone's bookie directory under it."""
    if path.name == "current" and path.is_dir():
        return path.parent
    if (path / "current").is_dir():
        return path
    found = _bookie_candidates(path)
    if not found:
        raise DataDirError(
            f"{path}: no bookie ledger directory (no current/ in it or in a standalone layout)", str(path)
        )
    return found[0]


# ---------------------------------------------------------------------------------- the cookie


def read_cookie(directory: Path) -> Cookie | None:
    """The cookie of a ledger or journal directory (:func:`pulsarkit.bookkeeper.cookie.read_cookie`), or
    None when it has none; :class:`DataDirError` naming the file when it is not a cookie."""
    try:
        return bookie_cookie.read_cookie(directory)
    except BookieError as e:
        raise DataDirError(str(e), getattr(e, "path", None)) from None


def read_rocksdb(src: Path, what: str) -> list[tuple[bytes, bytes]]:
    """All key/value pairs of a RocksDB, read through a private copy (WAL replayed), in key order."""
    try:
        return key_value_storage.read_all(src, what=what)
    except PulsarkitError as e:
        raise DataDirError(str(e), str(src)) from None


class LocationIndex(Mapping[int, dict[int, int]]):
    """A ledger directory's ``locations`` index (DbLedgerStorage: key ledger id + entry id, value the
    entry's location, all big-endian longs), read by ledger: ``index[ledger]`` is its entries' locations,
    looked up with one seek over its key range on first use and cached; iterating the ledgers skips from
    one ledger's keys to the next's (a seek per ledger, not a read of every entry). :meth:`load_all`
    reads the whole index in one pass, for what needs every ledger.

    It holds the index's private read-only copy (:class:`~pulsarkit.bookkeeper.key_value_storage.ReadOnlyCopy`,
    the user's directory never opened) until :meth:`close`, or until it is collected or the process exits
    (no copy is left behind). A lookup after :meth:`close` opens a new copy. A copy whose table files turn out
    damaged at a lookup is an ``unreadable_index`` issue passed to ``on_damage``, which gives the locations
    to use instead (the entry logs scanned)."""

    def __init__(
        self,
        path: Path,
        copy: key_value_storage.ReadOnlyCopy,
        on_damage: Any,
    ) -> None:
        self.path = path
        self._copy: key_value_storage.ReadOnlyCopy | None = None
        self._finalizer: Any = None
        self._hold(copy)
        self._on_damage = on_damage
        self._cache: dict[int, dict[int, int]] = {}
        self._ids: list[int] | None = None
        self._id_set: tuple[list[int], frozenset[int]] | None = None
        self._complete = False
        self._lock = threading.RLock()
        #: ledger ids looked up one by one, in order (a seam for tests: what a read opened of the index)
        self.lookups: list[int] = []
        #: how many times the whole index was read (:meth:`load_all`)
        self.full_reads = 0

    def _hold(self, copy: key_value_storage.ReadOnlyCopy) -> None:
        self._copy = copy
        self._finalizer = weakref.finalize(self, _close_copy, copy, os.getpid())

    def _db(self) -> key_value_storage.ReadOnlyCopy:
        if self._copy is None:
            self._hold(key_value_storage.ReadOnlyCopy(self.path, error=DataDirError, what="locations index"))
        assert self._copy is not None
        return self._copy

    def _read(self, fn: Any) -> Any:
        """``fn(copy)``; on a damaged table file, the locations ``on_damage`` rebuilt instead (whole)."""
        try:
            return fn(self._db())
        except (PulsarkitError, OSError) as e:
            why = e.reason if isinstance(e, DataDirError) else str(e)
            self._cache = self._on_damage(Issue("unreadable_index", str(self.path), None, why))
            self._ids = list(self._cache)
            self._complete = True
            self.close()
            return None

    def close(self) -> None:
        """Removes the private copy (cached ledgers stay readable)."""
        if self._finalizer is not None:
            self._finalizer()
        self._copy = self._finalizer = None

    def __getitem__(self, ledger_id: int) -> dict[int, int]:
        got = self._cache.get(ledger_id)
        if got is None:
            if self._complete or ledger_id not in self._ledger_set():
                raise KeyError(ledger_id)
            with self._lock:
                got = self._cache.get(ledger_id)
                if got is None:
                    self.lookups.append(ledger_id)
                    prefix = _LONG.pack(ledger_id)
                    stop = _after(prefix)
                    if stop is None:  # the last ledger id a long holds: to the end of the index
                        pairs = self._read(lambda db: list(db.range(prefix)))
                        found = None if pairs is None else _locations(pairs).get(ledger_id, {})
                    else:
                        found = self._read(lambda db: _ledger_locations(ledger_id, *db.range_lists(prefix, stop)))
                    if found is None:  # damaged: rebuilt whole
                        return self[ledger_id]
                    got = self._cache[ledger_id] = found
        return got

    def _ledger_ids(self) -> list[int]:
        """The ledgers with at least one well-formed key, in key order (a seek per ledger)."""
        if self._ids is None:
            with self._lock:
                if self._ids is None:
                    got = self._read(_skip_scan)
                    if got is not None:
                        self._ids = got
        assert self._ids is not None
        return self._ids

    def _ledger_set(self) -> frozenset[int]:
        ids = self._ledger_ids()
        if self._id_set is None or self._id_set[0] is not ids:
            self._id_set = (ids, frozenset(ids))
        return self._id_set[1]

    def __contains__(self, ledger_id: object) -> bool:
        return ledger_id in self._cache or ledger_id in self._ledger_set()

    def __iter__(self) -> Iterator[int]:
        return iter(self._ledger_ids())

    def __len__(self) -> int:
        return len(self._ledger_ids())

    def load_all(self) -> None:
        """Reads every ledger's locations in one pass over the index (once)."""
        if self._complete:
            return
        with self._lock:
            if self._complete:
                return
            self.full_reads += 1
            pairs = self._read(lambda db: list(db.items()))
            if pairs is not None:
                self._cache = _locations(pairs)
                self._ids = list(self._cache)
                self._complete = True

    def items(self) -> Any:
        self.load_all()
        return self._cache.items()

    def values(self) -> Any:
        self.load_all()
        return self._cache.values()


def _close_copy(copy: key_value_storage.ReadOnlyCopy, pid: int) -> None:
    # only in the process that made it: a forked child exiting must not remove its parent's copy
    if os.getpid() == pid:
        copy.close()


def _after(prefix: bytes) -> bytes | None:
    """The first key past every key starting with ``prefix`` (None: no such key, the prefix is all 0xff)."""
    n = int.from_bytes(prefix, "big") + 1
    return n.to_bytes(len(prefix), "big") if n < 1 << (8 * len(prefix)) else None


def _ledger_locations(ledger_id: int, keys: list[bytes], values: list[bytes]) -> dict[int, int]:
    """entry -> location of one ledger's index keys and values, decoded column-wise; keys that are not
    ledger + entry or values that are not a long are skipped (as :func:`_locations` does)."""
    n = len(keys)
    kb, vb = b"".join(keys), b"".join(values)
    if len(kb) != 16 * n or len(vb) != 8 * n:
        return _locations(list(zip(keys, values, strict=True))).get(ledger_id, {})
    ids = np.frombuffer(kb, ">i8").reshape(n, 2)
    return dict(zip(ids[:, 1].tolist(), np.frombuffer(vb, ">i8").tolist(), strict=True))


def _locations(pairs: Sequence[tuple[bytes, bytes]]) -> dict[int, dict[int, int]]:
    """ledger -> entry -> location of an index's pairs (keys that are not ledger + entry skipped)."""
    out: dict[int, dict[int, int]] = {}
    for k, v in pairs:
        if len(k) != 16 or len(v) != 8:
            continue
        lid, eid = _KEY.unpack(k)
        out.setdefault(lid, {})[eid] = _LONG.unpack(v)[0]
    return out


def _skip_scan(db: key_value_storage.ReadOnlyCopy) -> list[int]:
    """The ledger ids of a locations index: from each ledger's first well-formed key, a seek past its keys."""
    out: list[int] = []
    start: bytes | None = b""
    while start is not None:
        nxt = None
        for k, v in db.range(start):
            if len(k) == 16 and len(v) == 8:
                out.append(_LONG.unpack(k[:8])[0])
                nxt = _after(k[:8])
                break
        start = nxt
    return out


@dataclass(frozen=True)
class LogRead:
    """What opening a bookie directory reads of one entry log (:func:`read_log`)."""

    log_id: int
    #: Its ``EntryLogMetadata`` (total and remaining size, bytes per ledger); None when unreadable.
    metadata: Any
    #: A zero-length file: the preallocated next log (``lastId`` names it), not counted as a log.
    empty: bool
    issues: tuple[Issue, ...] = ()


def read_log(reader: entrylog.EntryLogReader, log_id: int) -> LogRead:
    """One entry log's ledger accounting, from its ledgers map or, when it has none, a scan of the
    whole log, with the issues met: the per-log work of opening a bookie directory (one Spark task
    per log in :mod:`pulsarkit.spark.storage`). An unreadable log is an issue, not an error."""
    path = str(reader.path_of(log_id))
    try:
        md = reader.metadata(log_id)
    except (PulsarkitError, OSError) as e:
        return LogRead(log_id, None, False, (Issue("unreadable_entry_log", path, None, str(e)),))
    empty = reader.file_size(log_id) == 0
    kept = () if empty else tuple(Issue(i.kind, path, i.offset, i.message) for i in md.issues if i.kind != "zero_tail")
    return LogRead(log_id, md, empty, kept)


class LogsBehind:
    """:func:`read_log` of every entry log of each ``current/`` directory, made by a thread: a log without its
    ledgers map is scanned whole (0.1 s for the benchmark's 750 MB log), a native scan that releases the GIL, so
    opening a directory reads its metadata and indexes meanwhile. A directory whose logs cannot be listed is
    left out (:class:`BookieDir` reads it and fails as it would); a directory given twice is read once."""

    def __init__(self, currents: Sequence[Path]) -> None:
        self._got: dict[str, dict[int, LogRead]] = {}
        self._failed: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(list(currents),), name="pulsarkit-entry-logs", daemon=True
        )
        self._thread.start()

    def _run(self, currents: list[Path]) -> None:
        try:
            for cur in currents:
                real = os.path.realpath(cur)
                if real in self._got:
                    continue
                try:
                    if not cur.is_dir():
                        continue
                    reader = entrylog.EntryLogReader(str(cur))
                    ids = reader.log_ids()
                except (PulsarkitError, OSError):
                    continue
                reads: dict[int, LogRead] = {}
                for log_id in ids:
                    if self._stop.is_set():  # the open failed: nobody will ask
                        return
                    reads[log_id] = read_log(reader, log_id)
                self._got[real] = reads
        except BaseException as e:  # noqa: BLE001 - raised again by wait()
            self._failed.append(e)

    def wait(self) -> dict[str, dict[int, LogRead]]:
        """``{real path of the directory: {log id: LogRead}}`` (:class:`BookieDir`'s ``log_reads``)."""
        self._thread.join()
        if self._failed:
            raise self._failed[0]
        return self._got

    def cancel(self) -> None:
        """Stops the thread after the log it is reading, and waits for it."""
        self._stop.set()
        self._thread.join()


class BookieDir:
    """A ledger directory's ``current/`` (entry logs) and its index directory (``ledgers``/``locations``)."""

    def __init__(
        self,
        current: Path,
        index_current: Path,
        issues: list[Issue],
        log_reads: Mapping[int, LogRead] | Callable[[], Mapping[int, LogRead] | None] | None = None,
        report: Any = None,
    ) -> None:
        """``log_reads``: what :func:`read_log` gave for some of its logs, read elsewhere (Spark tasks; a
        thread: then the call that waits for it, made once the indexes are open); the other logs are read
        here. ``report``: where an issue met after opening goes (a damaged index found at a lookup); default
        ``issues.append``."""
        self.current = current
        self.index_current = index_current
        self.reader = entrylog.EntryLogReader(str(current))
        self.ledger_data: dict[int, Any] = {}
        #: ledger -> entry -> location: the index read lazily (:class:`LocationIndex`), or, without a
        #: readable index, what scanning the entry logs found
        self.locations: Mapping[int, dict[int, int]] = {}
        self._report = report or issues.append
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
        self.scanned = False
        index = self._open_index(loc, issues)
        if index is not None:
            self.locations = index
        else:
            issues.append(
                Issue(
                    "missing_index",
                    str(loc),
                    None,
                    "no readable locations/ RocksDB; entry locations rebuilt by scanning the entry logs",
                )
            )
            self.locations = self._scan_all()
            self.scanned = True
        given = (log_reads() if callable(log_reads) else log_reads) or {}
        for log_id in self.log_ids:
            r = given.get(log_id) or read_log(self.reader, log_id)
            issues.extend(r.issues)
            if r.metadata is None:
                continue
            if not r.empty:
                self.log_metadata[log_id] = r.metadata
            for lid, size in r.metadata.ledgers.items():
                self.log_ledger_bytes[lid] = self.log_ledger_bytes.get(lid, 0) + size

    def read_raw(self, ledger_id: int, entry_id: int) -> tuple[bytes, str, int] | None:
        """``(stored bytes, entry log, offset of the record)`` of an entry the index names; None when
        it names none. :class:`DataDirError` (file and offset) when the log is missing or the record
        there is not that entry."""
        loc = self.locations.get(ledger_id, {}).get(entry_id)
        if loc is None:
            return None
        log_id, pos = loc >> 32, loc & 0xFFFFFFFF
        path = str(self.reader.path_of(log_id))
        try:
            return self.reader.read(loc, ledger_id, entry_id), path, pos - 4
        except OSError as e:
            raise DataDirError(
                f"{path}: entry log missing or unreadable for ledger {ledger_id} entry {entry_id}: {e}",
                path,
                pos - 4,
                f"entry log missing or unreadable: {e}",
            ) from None
        except PulsarkitError as e:
            raise DataDirError(
                f"{path} at offset {pos - 4}: ledger {ledger_id} entry {entry_id}: {e}",
                path,
                pos - 4,
                str(e),
            ) from None

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

    def _open_index(self, path: Path, issues: list[Issue]) -> LocationIndex | None:
        """The locations index kept open for lookups by ledger, or None (with an issue) when it is missing
        or cannot be opened; its ledger ids are read now, so that damage met there is found at open."""
        if not is_rocksdb(path):
            return None
        try:
            copy = key_value_storage.ReadOnlyCopy(path, error=DataDirError, what="locations index")
        except DataDirError as e:
            issues.append(Issue("unreadable_index", str(path), None, e.reason))
            return None
        index = LocationIndex(path, copy, self._index_damaged)
        len(index)  # the ledger ids (a damaged copy falls back to the scan here, at open)
        return index

    def _index_damaged(self, issue: Issue) -> dict[int, dict[int, int]]:
        """A table file of the index turned out damaged at a lookup: the entry logs scanned instead."""
        self._report(issue)
        self._report(
            Issue(
                "missing_index",
                issue.path,
                None,
                "no readable locations/ RocksDB; entry locations rebuilt by scanning the entry logs",
            )
        )
        self.scanned = True
        return self._scan_all()

    def _scan_all(self) -> dict[int, dict[int, int]]:
        # Later logs win: compaction copies live entries forward into newer logs.
        out: dict[int, dict[int, int]] = {}
        for log_id in self.log_ids:
            scan = self.reader.scan(log_id, resync=False)
            for r in scan:
                if r.ledger_id >= 0:
                    out.setdefault(r.ledger_id, {})[r.entry_id] = r.location
        return out

    def load_locations(self) -> None:
        """Every ledger's locations read at once (one pass over the index), for what reads them all."""
        if isinstance(self.locations, LocationIndex):
            self.locations.load_all()

    def close(self) -> None:
        """Removes the index's private copy (ledgers already looked up stay known)."""
        if isinstance(self.locations, LocationIndex):
            self.locations.close()


# ------------------------------------------------------------------------ several bookies


@dataclass(eq=False)
class Bookie:
    """One bookie: its id, its ledger directories and the entries its journal would replay."""

    bookie_id: str
    dirs: list[BookieDir]
    ledger_dirs: list[Path]
    journal_dirs: list[Path] = field(default_factory=list)
    #: Journal records after the bookie's ``lastMark`` (ledger -> entry -> record).
    journal: dict[int, dict[int, JournalRecord]] = field(default_factory=dict)
    _held: dict[int, frozenset[int]] = field(default_factory=dict, repr=False)

    def entry_ids(self, ledger_id: int) -> frozenset[int]:
        """Entries of a ledger this bookie holds: in a location index or only in its journal."""
        got = self._held.get(ledger_id)
        if got is None:
            ids: set[int] = set(self.journal.get(ledger_id, ()))
            for d in self.dirs:
                ids.update(d.locations.get(ledger_id, ()))
            got = self._held[ledger_id] = frozenset(ids)
        return got

    def indexed(self, ledger_id: int) -> set[int]:
        return {e for d in self.dirs for e in d.locations.get(ledger_id, ())}

    def read_raw(self, ledger_id: int, entry_id: int) -> tuple[bytes, str, int | None] | None:
        """``(stored bytes, file, offset of the record)`` of this bookie's copy; None when it has none."""
        for d in self.dirs:
            got = d.read_raw(ledger_id, entry_id)
            if got is not None:
                return got
        j = self.journal.get(ledger_id, {}).get(entry_id)
        return (j.data, j.path, j.offset) if j is not None else None


def _dir_key(d: Path) -> Path:
    return (d.parent if d.name == "current" else d).resolve()


def bookie_ids(dirs: Sequence[Path], mapping: BookieMapping | None) -> tuple[list[str | None], list[str]]:
    """The bookie id of each directory (``mapping`` names it, else its cookie), None when neither does;
    and why a cookie could not be read, per unreadable cookie."""
    named: dict[Path, str] = {}
    for bookie, ds in (mapping or {}).items():
        for d in [ds] if isinstance(ds, (str, os.PathLike)) else ds:
            named[_dir_key(bookie_ledger_dir(Path(d)))] = bookie
    ids: list[str | None] = []
    bad: list[str] = []
    for d in dirs:
        bid = named.get(_dir_key(d))
        if bid is None:
            try:
                cookie = read_cookie(d)
            except DataDirError as e:
                bad.append(str(e))
                cookie = None
            bid = cookie.bookie_id if cookie is not None else None
        ids.append(bid)
    return ids, bad


def mapping_dirs(mapping: BookieMapping) -> list[Path]:
    """The ledger directories a ``bookies`` mapping names, in its order."""
    out = []
    for ds in mapping.values():
        out += [bookie_ledger_dir(Path(d)) for d in ([ds] if isinstance(ds, (str, os.PathLike)) else ds)]
    return out


def group_bookies(
    dirs: Sequence[BookieDir],
    ledger_dirs: Sequence[Path],
    ids: Sequence[str | None],
    journal_dirs: Sequence[Path],
    journal_ids: Sequence[str | None],
    cookie_errors: Sequence[str] = (),
) -> list[Bookie] | None:
    """The bookies the directories belong to, or None when they are one bookie's (fewer than two
    distinct ids: the directories are read as one bookie, as before cookies were read)."""
    if len({i for i in ids if i}) < 2:
        return None
    why = f" ({'; '.join(cookie_errors)})" if cookie_errors else ""
    for what, paths, pids in (("ledger", ledger_dirs, ids), ("journal", journal_dirs, journal_ids)):
        unknown = [str(p) for p, i in zip(paths, pids, strict=True) if i is None]
        if unknown:
            raise DataDirError(
                f"{what} directories of several bookies, and no cookie (current/VERSION) says whose "
                f"{', '.join(unknown)} is{why}: name each bookie's directories with bookies={{id: [dir, ...]}}"
            )
    bookies = {
        bid: Bookie(bid, [], [])
        for bid in dict.fromkeys(i for i in ids if i is not None)  # first-seen order
    }
    for d, p, bid in zip(dirs, ledger_dirs, ids, strict=False):
        bookies[bid].dirs.append(d)  # type: ignore[index]
        bookies[bid].ledger_dirs.append(p)  # type: ignore[index]
    for p, bid in zip(journal_dirs, journal_ids, strict=True):
        if bid not in bookies:
            raise DataDirError(
                f"journal directory {p} belongs to bookie {bid}, whose ledger directories were not given"
            )
        bookies[bid].journal_dirs.append(p)
    return list(bookies.values())


def entry_payload(
    raw: bytes, digest: str | None, password: bytes, ledger_id: int, entry_id: int, path: str, offset: int | None
) -> bytes:
    """What the client wrote, from a stored entry whose digest verifies (``digest`` None: the type
    the bytes verify with, else CRC32C); :class:`DataDirError` naming the record's file and offset."""
    try:
        if digest is None:
            digest = bookie_digest.detect_digest_type(raw, password) or "CRC32C"
        return bookie_digest.unpack_entry(raw, digest, password, ledger_id=ledger_id, entry_id=entry_id).payload
    except PulsarkitError as e:
        raise DataDirError(
            f"{path} at offset {offset}: ledger {ledger_id} entry {entry_id}: {e}", path, offset, str(e)
        ) from None


__all__ = [
    "Bookie",
    "BookieDir",
    "BookieMapping",
    "Cookie",
    "LocationIndex",
    "LogRead",
    "bookie_ids",
    "bookie_ledger_dir",
    "entry_payload",
    "find_layout",
    "group_bookies",
    "is_rocksdb",
    "mapping_dirs",
    "read_cookie",
    "read_log",
    "read_rocksdb",
]
