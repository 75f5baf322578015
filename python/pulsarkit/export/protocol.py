"""The commit protocol every target shares: the output's lock, its staging directory, the checks on
the output path, the durable JSON write, and the warnings about what an export cannot get back."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from ..durable import fsync_dir, input_holding
from ..scan.records import DataDirError
from .marks import Mark

#: the marks file of a Parquet export (files starting with ``_`` are skipped by Spark and pyarrow readers)
MARKS_FILE = "_pulsarkit_export.json"
LOCK_FILE = "_pulsarkit_export.lock"
#: where a run's data files are written before its commit (one folder per run)
STAGING = "_staging"
#: the Iceberg export's SQL catalog (SQLite), inside OUT
ICEBERG_CATALOG = "_pulsarkit_iceberg_catalog.db"
DELTA_LOG = "_delta_log"


class ExportRefused(DataDirError):
    """The output is not a pulsarkit export of this data directory (or is in use)."""


def now_ms() -> int:
    return int(time.time() * 1000)


def new_run_id() -> str:
    """A run's id: its UTC start second and a random suffix (data file names carry it)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def write_json_atomically(path: Path, obj: object) -> None:
    """``obj`` as ``path``, durably and all or nothing: a temporary file, fsynced, renamed into place."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    # a new private file, never through a link (O_EXCL: a planted name makes it fail, not redirect it)
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """One run at a time per output: a non-blocking exclusive lock on ``OUT/_pulsarkit_export.lock``,
    which holds the pid of the run that has it. The kernel releases the lock of a process that died,
    so a lock file naming a dead pid is taken over as it is; a live holder is named in the refusal."""
    path = out / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ExportRefused(f"{path} is a symbolic link; pulsarkit never writes through one", str(path)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ExportRefused(f"{path} is not a regular file; pulsarkit's lock file is", str(path))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise ExportRefused(
                f"{out}: another pulsarkit export (pid {holder}) holds its lock and is writing it; "
                "run again when it has finished"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def check_output(inputs: list[str], out: str, root: Path) -> None:
    """Refuses an output pulsarkit must not write: inside one of the directories read (``inputs``: the data
    directory, or a cluster's metadata and bookie directories), a symbolic link, a file."""
    for given in inputs:
        real = Path(os.path.realpath(given))
        if not real.is_dir():
            why = "not a directory" if real.exists() else "no such directory"
            raise DataDirError(f"{given}: {why}", given)
    held = input_holding(root, inputs)
    if held is not None:
        raise ExportRefused(f"{out} is inside the data directory {held}; export elsewhere")
    if root.is_symlink():
        raise ExportRefused(f"{out} is a symbolic link; pulsarkit never writes through one")
    if root.exists() and not root.is_dir():
        raise ExportRefused(f"{out} exists and is not a directory")


#: what each format's own file in OUT says the directory is (:func:`export_format`)
_FORMAT_FILES = (
    ("parquet", MARKS_FILE, "a pulsarkit parquet export"),
    ("delta", DELTA_LOG, "a Delta table"),
    ("iceberg", ICEBERG_CATALOG, "a pulsarkit iceberg export"),
)


def export_format(out: Path) -> tuple[str, str] | None:
    """The format of the export (or Delta table) in ``out`` and what to call it, by the file that format keeps
    there; None when there is none of them."""
    return next(((to, what) for to, name, what in _FORMAT_FILES if (out / name).exists()), None)


def refuse_other_format(out: Path, to: str) -> None:
    """An export (or table) of another format is never written into, ``--force`` or not: its readers would read
    the other format's files as their own (a Parquet dataset's readers, Delta's data files; a run of one format
    could clean up the other's)."""
    found = export_format(out)
    if found is not None and found[0] != to:
        article = "an" if to[0] in "aeiou" else "a"
        raise ExportRefused(
            f"{out} is {found[1]}, not {article} {to} export; pulsarkit never writes another format into it "
            "(--force or not): export elsewhere"
        )


def refuse_foreign(out: Path, force: bool, own: frozenset[str] | set[str] = frozenset()) -> None:
    """A directory with anything in it that is not an export is written into only with ``force``. ``own``:
    the names a run of pulsarkit's left there (its journal, what its journal lists: its staging among them)."""
    if out.exists() and any(p.name != LOCK_FILE and p.name not in own for p in out.iterdir()) and not force:
        raise ExportRefused(f"{out} exists and is not a pulsarkit export; pass --force to write into it")


def gaps(before: dict[str, Mark], ledgers: dict[str, list[int]]) -> list[str]:
    """Topics whose mark is in a ledger the topic no longer has: retention (or a deletion) removed
    entries since the last run, and those after the mark were never exported."""
    out = []
    for t, (lid, eid) in sorted(before.items()):
        have = ledgers.get(t)
        if have is None:
            out.append(f"{t} is gone since the last run (mark {lid}:{eid}); nothing more of it to export")
        elif lid not in have and (not have or have[0] > lid):
            out.append(
                f"{t}: ledger {lid} of the last mark ({lid}:{eid}) was trimmed since the last run; messages "
                f"after the mark in it, or in ledgers trimmed before {have[0] if have else 'now'}, were not exported"
            )
    return out
