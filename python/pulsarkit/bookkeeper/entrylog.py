"""BookKeeper entry logs (``DefaultEntryLogger``).

A bookie keeps ledger entries in *entry logs*: ``<hex id>.log`` files in each ledger directory's
``current/``, a 1024-byte ``BKLO`` header followed by ``[int32 len][ledgerId][entryId]...`` records,
and, once a log is rotated, a *ledgers map* (ledger id → bytes) whose offset and count are patched
into the header. An entry's *location* is ``(log_id << 32) | position after the length field``;
a bookie's ``locations`` index stores it. Each record holds the entry as the BookKeeper client
packed it: ``[ledgerId][entryId][lastAddConfirmed][length][digest][payload]``, where the payload is
what Pulsar stored (its ``headersAndPayload``); :mod:`pulsarkit.bookkeeper.digest` packs and checks it.

Writing::

    from pulsarkit.bookkeeper import BookieEntryPacker, EntryLogWriter
    packer = BookieEntryPacker(ledger_id=7)                 # CRC32C, as Pulsar uses by default
    with EntryLogWriter("data/bookie/current", log_size_limit=64 << 20) as w:
        loc = w.append(7, packer.pack(pulsar_entry_bytes))  # rotates at log_size_limit
        w.flush()                                           # fsync: everything appended is durable

Reading::

    r = EntryLogReader("data/bookie/current")               # or one .log file
    r.read(loc, ledger_id=7, entry_id=0)                    # by location, ids checked
    for rec in r.scan(0): ...                               # sequential, issues in .summary
    r.metadata(0)                                           # ledgers map, or a scan when missing

In bulk (one native pass per batch, GIL released, digests verified)::

    for batch in pulsarkit.bookkeeper.scan_entry_logs(["data/bookie"]):   # files or directories
        pulsarkit.bulk.explode_messages(batch.column("payload"))

Corruption never raises from a scan and never hides data: torn tails, zeroed or lying headers and
bad lengths come back as :class:`ScanIssue` entries (and ``issue``/``error`` rows in Arrow batches)
with their offsets, and the scan resumes at the next valid record.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Self, Union

import pyarrow as pa

from .. import _native
from ..errors import BookieError, DigestMismatchError

__all__ = [
    "DEFAULT_LOG_SIZE_LIMIT",
    "DEFAULT_MAX_RECORD_SIZE",
    "DigestMismatchError",
    "EntryLogMetadata",
    "EntryLogReader",
    "EntryLogScan",
    "EntryLogWriter",
    "LogHeader",
    "LogRecord",
    "RecordScan",
    "ScanIssue",
    "ScanSummary",
    "entry_log_schema",
    "find_entry_logs",
    "log_file_name",
    "make_location",
    "parse_log_file_name",
    "read_entry_log_metadata",
    "scan_entry_logs",
    "split_location",
]

PathLike = Union[str, "os.PathLike[str]"]
_log = logging.getLogger("pulsarkit")

#: BookKeeper's default and maximum ``logSizeLimit`` (1 GiB).
DEFAULT_LOG_SIZE_LIMIT: int = _native.ENTRY_LOG_DEFAULT_SIZE_LIMIT
#: Records longer than this are treated as corrupt lengths by scans (BookKeeper's frame limit is 5 MiB).
DEFAULT_MAX_RECORD_SIZE: int = _native.ENTRY_LOG_DEFAULT_MAX_RECORD_SIZE
HEADER_SIZE = 1024
BOOKIE_HEADER_SIZE = 32


# ------------------------------------------------------------------------------------------------
# Locations and file names


def make_location(log_id: int, position: int) -> int:
    """``(log_id << 32) | position``, the value a bookie's ``locations`` index stores."""
    return (log_id << 32) | (position & 0xFFFFFFFF)


def split_location(location: int) -> tuple[int, int]:
    """``(log_id, position after the length field)`` of a location."""
    return location >> 32, location & 0xFFFFFFFF


def log_file_name(log_id: int) -> str:
    """``Long.toHexString(log_id) + ".log"``, e.g. ``1f4.log``."""
    return f"{log_id:x}.log"


def parse_log_file_name(name: str) -> int | None:
    """The log id of a ``<hex>.log`` name, or ``None``."""
    if not name.endswith(".log"):
        return None
    stem = name[:-4]
    if not stem or len(stem) > 16 or any(c not in "0123456789abcdefABCDEF" for c in stem):
        return None
    # Long.toHexString never pads; zero-padded names are RocksDB write-ahead logs (000008.log).
    if len(stem) > 1 and stem[0] == "0":
        return None
    return int(stem, 16)


def _is_rocksdb_dir(d: Path) -> bool:
    """DbLedgerStorage's ledgers/ and locations/ are RocksDB databases, whose WALs are also *.log."""
    return (d / "CURRENT").is_file() and any(f.name.startswith("MANIFEST-") for f in d.iterdir())


def find_entry_logs(paths: PathLike | Iterable[PathLike | tuple[PathLike, int]]) -> list[tuple[Path, int]]:
    """Entry-log files under ``paths`` as ``(path, log_id)`` pairs.

    Each path may be a ``.log`` file, a directory (searched recursively, so a ledger directory or a
    whole bookie data directory works; RocksDB index directories are skipped), or a
    ``(path, log_id)`` pair for a file under another name.
    Directories yield their logs in log-id order; duplicates are dropped.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[tuple[Path, int]] = []
    seen: set[Path] = set()

    def add(p: Path, log_id: int) -> None:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            out.append((p, log_id))

    for item in paths:
        if isinstance(item, tuple):
            add(Path(item[0]), int(item[1]))
            continue
        p = Path(item)
        if p.is_dir():
            found = []

            def unreadable(e: OSError, top: Path = p) -> None:
                # the directory given is an error naming it; an unreadable one below it (lost+found
                # on a ledger disk) is skipped with a warning, never silently
                if os.path.abspath(e.filename or "") == os.path.abspath(top):
                    raise BookieError(f"{top}: directory cannot be read: {e.strerror or e}")
                _log.warning("%s: directory cannot be read (%s), skipped", e.filename, e.strerror or e)

            for root, dirs, files in os.walk(p, onerror=unreadable):
                dirs[:] = sorted(d for d in dirs if not _is_rocksdb_dir(Path(root) / d))
                if _is_rocksdb_dir(Path(root)):
                    continue
                for name in files:
                    lid = parse_log_file_name(name)
                    f = Path(root) / name
                    if lid is None:
                        continue
                    if f.is_file():
                        found.append((root, lid, f))
                    else:  # a FIFO or a device: reading it could block forever
                        _log.warning("%s: not a regular file, skipped", f)
            for _, lid, f in sorted(found, key=lambda t: (t[0], t[1])):
                add(f, lid)
        elif p.exists():
            if not p.is_file():
                raise BookieError(f"{p}: not a regular file (a FIFO or a device); give an entry log or a directory")
            lid = parse_log_file_name(p.name)
            if lid is None:
                raise BookieError(
                    f"{p}: not an entry log name (<lowercase hex id>.log, as a bookie names them); "
                    "pass (path, log_id) to read it anyway"
                )
            add(p, lid)
        else:
            raise FileNotFoundError(2, "No such file or directory", str(p))
    return out


@dataclass(frozen=True)
class LogHeader:
    """The header fields as stored (``format`` is ``"default"`` or ``"direct"``)."""

    fingerprint: bytes
    fingerprint_ok: bool
    version: int
    ledgers_map_offset: int
    ledgers_count: int
    format: str

    @classmethod
    def _from(cls, d: dict[str, Any] | None) -> LogHeader | None:
        return None if d is None else cls(**d)


@dataclass(frozen=True)
class ScanIssue:
    """Bytes of a log that are not a readable record.

    ``kind``: ``truncated_header``, ``bad_header`` (wrong fingerprint, zeroed, unknown version, header
    fields that contradict the ledgers map, or name one the file does not hold; not a map offset no map could
    have in a log without one: BookKeeper 4.16 leaves those fields uninitialised until it closes the log),
    ``torn_tail`` (last record cut by the end of the file), ``zero_tail`` (zero-filled tail of a default
    log), ``corrupt_record`` (bad length or zeroed
    region; ``length`` bytes skipped up to the next valid record), ``skipped_record`` (framed but not
    an entry) or ``bad_ledgers_map``.
    """

    kind: str
    offset: int
    length: int
    message: str

    def __str__(self) -> str:
        return f"{self.kind} at offset {self.offset} ({self.length} bytes): {self.message}"


@dataclass(frozen=True)
class ScanSummary:
    """What a scan of one log saw."""

    log_id: int
    file_size: int
    format: str
    header: LogHeader | None
    records: int
    record_bytes: int
    #: Offset just after the last good record or ledgers-map record.
    data_end: int
    ledgers_map_offset: int | None
    ledgers_map: list[tuple[int, int]]
    zero_tail_offset: int | None
    issues: list[ScanIssue]
    path: str | None = None

    @property
    def ok(self) -> bool:
        return not self.issues

    @classmethod
    def _from(cls, d: dict[str, Any]) -> ScanSummary:
        d = dict(d)
        d["header"] = LogHeader._from(d["header"])
        d["issues"] = [ScanIssue(**i) for i in d["issues"]]
        d["ledgers_map"] = [tuple(x) for x in d["ledgers_map"]]
        return cls(**d)


@dataclass
class EntryLogMetadata:
    """A log's ledger accounting, as BookKeeper's ``EntryLogMetadata`` (bytes count ``len + 4``)."""

    log_id: int
    total_size: int
    remaining_size: int
    ledgers: dict[int, int]
    #: Read from the ledgers map (True) or built by a scan (False).
    from_index: bool = False
    #: Why the ledgers map was not used, when it was not.
    fallback_reason: str | None = None
    #: Issues met by the fallback scan.
    issues: list[ScanIssue] = field(default_factory=list)
    path: str | None = None

    @property
    def usage(self) -> float:
        """``remaining_size / total_size`` (0 for an empty log), what compaction thresholds compare."""
        return self.remaining_size / self.total_size if self.total_size else 0.0

    def remove_ledger(self, ledger_id: int) -> int | None:
        """Drops a deleted ledger from ``remaining_size``; returns its bytes."""
        size = self.ledgers.pop(ledger_id, None)
        if size is not None:
            self.remaining_size -= size
        return size

    @classmethod
    def _from(cls, d: dict[str, Any]) -> EntryLogMetadata:
        return cls(
            log_id=d["log_id"],
            total_size=d["total_size"],
            remaining_size=d["remaining_size"],
            ledgers=dict(d["ledgers"]),
            from_index=d["from_index"],
            fallback_reason=d["fallback_reason"],
            issues=[ScanIssue(**i) for i in d["issues"]],
            path=d.get("path"),
        )


class LogRecord(NamedTuple):
    """One entry record: ``offset`` is where its length field starts (BookKeeper's scan offset)."""

    log_id: int
    offset: int
    ledger_id: int
    entry_id: int
    data: bytes

    @property
    def location(self) -> int:
        return make_location(self.log_id, self.offset + 4)

    @property
    def size(self) -> int:
        return len(self.data)


# ------------------------------------------------------------------------------------------------
# Writer and reader


class EntryLogWriter:
    """Writes DefaultEntryLogger-format logs into ``directory`` (a ledger dir's ``current/``).

    * :meth:`append` buffers ``[len][entry]`` and returns the entry's location;
    * :meth:`flush` writes the buffer and fsyncs: entries appended before it survive a crash;
    * when a record would take the log past ``log_size_limit`` (BookKeeper's ``logSizeLimit``) the
      log is rotated: ledgers map appended, header patched, fsync, close; :meth:`rotate` forces it;
    * :meth:`close` flushes and, with ``seal_on_close``, writes the ledgers map (BookKeeper leaves
      the active log without one; readers then scan it).

    A writer never appends to an existing log: it starts a new id above every ``*.log`` and the
    ``lastId`` file (which it keeps up to date), so a crash's torn tail stays in an old log. One
    writer per directory.
    """

    def __init__(
        self,
        directory: PathLike,
        *,
        log_size_limit: int = DEFAULT_LOG_SIZE_LIMIT,
        write_buffer_size: int = 64 * 1024,
        fsync: bool = True,
        seal_on_close: bool = True,
        header_version: int = 1,
    ) -> None:
        self._w = _native.RawEntryLogWriter(
            os.fspath(directory), log_size_limit, write_buffer_size, fsync, seal_on_close, header_version
        )

    def append(self, ledger_id: int, entry: bytes) -> int:
        """Appends stored entry bytes (starting with ``ledger_id`` and the entry id); returns the location."""
        return self._w.append(ledger_id, entry)

    def append_many(self, entries: Iterable[tuple[int, bytes]]) -> list[int]:
        """Appends ``(ledger_id, entry)`` pairs in one native call; returns their locations."""
        return self._w.append_many(list(entries))

    def append_entries(self, entries: Sequence[bytes]) -> list[int]:
        """Appends stored entries, each starting with its ledger id, in one native call; returns
        their locations (:meth:`append_many` without the pairs)."""
        return self._w.append_entries(entries if isinstance(entries, list) else list(entries))

    def flush(self) -> None:
        """Writes buffered records and fsyncs the active log."""
        self._w.flush()

    def rotate(self) -> int | None:
        """Finishes the active log now; returns its id (``None`` if nothing was written)."""
        return self._w.rotate()

    def read(self, location: int, ledger_id: int | None = None, entry_id: int | None = None) -> bytes:
        """The entry at ``location`` (buffered ones included), ids checked when given."""
        return self._w.read(location, ledger_id, entry_id)

    def close(self) -> None:
        self._w.close()

    @property
    def closed(self) -> bool:
        return self._w.closed

    @property
    def directory(self) -> Path:
        return Path(self._w.directory)

    @property
    def current_log_id(self) -> int | None:
        """The log being written (``None`` before the first append or after a rotation)."""
        return self._w.current_log_id

    @property
    def current_log_size(self) -> int:
        return self._w.current_log_size

    @property
    def rotated_log_ids(self) -> list[int]:
        """Logs this writer finished (each has its ledgers map)."""
        return self._w.rotated_log_ids

    @property
    def current_ledgers(self) -> dict[int, int]:
        """Bytes per ledger in the active log so far."""
        return dict(self._w.current_ledgers)

    @property
    def log_size_limit(self) -> int:
        return self._w.log_size_limit

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RecordScan:
    """Iterator over the records of one log; :attr:`summary` (issues included) once exhausted."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._log_id = raw.log_id

    def __iter__(self) -> Iterator[LogRecord]:
        lid = self._log_id
        while True:
            chunk = self._raw.next_chunk(1024)
            if not chunk:
                return
            for r in chunk:
                yield LogRecord(lid, r.offset, r.ledger_id, r.entry_id, r.data)

    @property
    def done(self) -> bool:
        return self._raw.done

    @property
    def summary(self) -> ScanSummary:
        return ScanSummary._from(self._raw.summary())


class EntryLogReader:
    """Reads entry logs of a directory (a ledger dir's ``current/``) or a single ``.log`` file.

    Handles DefaultEntryLogger (V0 and V1 headers) and DirectEntryLogger files alike.
    """

    def __init__(self, path: PathLike, log_id: int | None = None) -> None:
        self._r = _native.RawEntryLogReader(os.fspath(path), log_id)

    def log_ids(self) -> list[int]:
        """Ids of the logs present, ascending."""
        return self._r.log_ids()

    def path_of(self, log_id: int) -> Path:
        return Path(self._r.path_of(log_id))

    def read(self, location: int, ledger_id: int | None = None, entry_id: int | None = None) -> bytes:
        """The stored entry at ``location``, checking its length and, when given, its ids.

        Raises ``CorruptEntryError`` (with ``offset``) when the location does not hold a valid record
        or holds another entry; ``OSError`` when the log is missing.
        """
        return self._r.read(location, ledger_id, entry_id)

    def read_payloads(
        self,
        locations: Sequence[int],
        ledger_id: int,
        first_entry_id: int,
        digest_type: str = "CRC32C",
        password: bytes = b"",
        max_bytes: int | None = None,
    ) -> list[bytes | tuple[str, int | None] | None]:
        """The payloads of entries ``first_entry_id, first_entry_id + 1, ...`` of one ledger at
        ``locations``, in one native call: each read, its ids checked and its digest verified as
        :meth:`read` and :func:`~pulsarkit.bookkeeper.digest.unpack_entry` would. Per entry the
        payload; for a bad entry ``(message, stored length)``, the length None when the entry could
        not be read at all; or None where the location is negative (not read). A missing or
        unreadable log raises ``OSError``. With ``max_bytes`` the read stops after the entry that
        brings what it read to that many bytes (it always takes one location): the list is then
        shorter than ``locations``, and the caller goes on from where it ends."""
        locs = list(locations)
        if max_bytes is None:
            return self._r.read_payloads(locs, ledger_id, first_entry_id, digest_type, password)
        return self._r.read_payloads(locs, ledger_id, first_entry_id, digest_type, password, max_bytes)

    def header(self, log_id: int) -> LogHeader:
        h = LogHeader._from(self._r.header(log_id))
        assert h is not None
        return h

    def file_size(self, log_id: int) -> int:
        return self._r.file_size(log_id)

    def metadata(self, log_id: int, *, use_index: bool = True) -> EntryLogMetadata:
        """Ledger accounting from the ledgers map, or from a scan when the map is missing, empty or
        inconsistent with the file (``from_index``/``fallback_reason`` say which and why)."""
        return EntryLogMetadata._from(self._r.metadata(log_id, use_index))

    def scan(
        self,
        log_id: int,
        *,
        start: int | None = None,
        stop: int | None = None,
        max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
        resync: bool = True,
    ) -> RecordScan:
        """Sequential records of a log. ``start`` must be a record boundary (default 1024); no record
        starting at or after ``stop`` is returned."""
        return RecordScan(self._r.scan(log_id, start, stop, max_record_size, resync))

    def evict(self, log_id: int) -> None:
        """Closes a cached file handle (after the log was deleted or replaced)."""
        self._r.evict(log_id)


def read_entry_log_metadata(path: PathLike, log_id: int | None = None, *, use_index: bool = True) -> EntryLogMetadata:
    """:meth:`EntryLogReader.metadata` for one file."""
    p = Path(path)
    if log_id is None:
        log_id = parse_log_file_name(p.name)
        if log_id is None:
            raise ValueError(f"{p}: not an entry log name (<hex id>.log); pass log_id")
    return EntryLogMetadata._from(_native.entry_log_metadata(os.fspath(p), log_id, use_index))


# ------------------------------------------------------------------------------------------------
# Bulk scan to Arrow


def entry_log_schema(payload_type: str = "binary") -> Any:
    """The ``pyarrow.Schema`` of :func:`scan_entry_logs` batches."""
    return _native.entry_log_schema(payload_type)


class EntryLogScan:
    """Iterator of ``pyarrow.RecordBatch`` over many logs; see :func:`scan_entry_logs`."""

    def __init__(self, logs: list[tuple[Path, int]], raw: Any, payload_type: str = "binary") -> None:
        self.logs = logs
        self._raw = raw
        self.payload_type = payload_type

    def __iter__(self) -> EntryLogScan:
        return self

    def __next__(self) -> Any:
        return next(self._raw)

    @property
    def schema(self) -> Any:
        return entry_log_schema(self.payload_type)

    @property
    def summaries(self) -> list[ScanSummary]:
        """Summaries of the logs finished so far (all of them once the iterator is exhausted)."""
        return [ScanSummary._from(d) for d in self._raw.summaries()]

    def read_all(self) -> Any:
        """Everything as one ``pyarrow.Table``."""
        return pa.Table.from_batches(list(self), schema=self.schema)


def scan_entry_logs(
    paths: PathLike | Iterable[PathLike | tuple[PathLike, int]],
    digest_type: str = "CRC32C",
    password: bytes = b"",
    *,
    batch_rows: int = 8192,
    batch_bytes: int | None = None,
    include_issues: bool = True,
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
    resync: bool = True,
    payload_type: str = "binary",
) -> EntryLogScan:
    """Scans entry logs (files, directories, or ``(path, log_id)`` pairs) into Arrow record batches.

    One row per entry record, with columns ``log_id``, ``offset`` (of the length field, as
    BookKeeper's scanner and ``readlog`` report it), ``location``, ``ledger_id``, ``entry_id``,
    ``last_add_confirmed``, ``ledger_length``, ``size`` (record length), ``digest_type``,
    ``digest_ok`` (verified in the same native pass; null for DUMMY), ``payload`` (the Pulsar entry
    bytes after the bookie header and digest), ``issue`` and ``error``. With ``include_issues``,
    each scan issue (torn tail, corrupt region, bad header...) adds a row whose ``issue`` names its
    kind, ``offset``/``size`` locate it and the entry columns are null.

    ``digest_type`` is one of :data:`~pulsarkit.bookkeeper.digest.DIGEST_TYPES` or ``"AUTO"`` (per ledger,
    the first of CRC32C,
    CRC32 and MAC with ``password`` that verifies). Batches hold at most ``batch_rows`` rows and
    are cut once their payloads reach ``batch_bytes`` (None or 0: 1 MiB for ``"binary"``, whose
    output memory is then reused from batch to batch while still in cache, 8 MiB for ``"binary_view"``).

    ``payload_type="binary_view"`` maps each file and returns payloads as views into the mapping:
    nothing is copied, so a scan runs at about the speed of the digest check (several times faster
    than ``"binary"``, which copies every payload). The batches then keep the mappings alive, and a
    log must not be truncated while they exist (BookKeeper and pulsarkit only append to logs or
    delete them). The bulk kernels take either type; ``.cast(pa.binary())`` makes a copy.
    """
    logs = find_entry_logs(paths)
    raw = _native.RawArrowLogScan(
        [(os.fspath(p), i) for p, i in logs],
        digest_type,
        password,
        batch_rows,
        batch_bytes or 0,  # 0: the native default for the payload type
        include_issues,
        max_record_size,
        resync,
        payload_type,
    )
    return EntryLogScan(logs, raw, payload_type)
