"""Writes that stay inside OUT, and the run journal that lists what a run created.

Every path an export creates, replaces or deletes below OUT is one of pulsarkit's own names
(:data:`OWN_TOP`, ``topic=...``); before a run writes, :func:`audit` walks those without following
links and refuses (:class:`UnsafePath`, naming it) a symbolic link or a non-regular file among them,
so nothing a run writes or deletes can land outside OUT. pulsarkit's own opens add ``O_NOFOLLOW``
(the lock, the JSON files: :mod:`.protocol`), its directories are made one component at a time and
checked (:func:`make_dirs`), and a deletion is of a regular file whose every parent below OUT is a
real directory (:func:`remove_own_file`).

The journal (``OUT/_pulsarkit_journal.json``) is written when a run begins, naming the staging
directories it is about to create (``_staging/<run>``, and ``_staging`` when there is none), and again,
with the files and directories the commit is about to create, just before the commit; the commit removes
its staging, then the journal. A run that did not commit leaves it, and the next run deletes exactly what
it lists (:func:`undo`, :func:`drop_staging`), never "whatever looks like a data file": a foreign file in
OUT (a ``_staging`` of someone else's too) is never touched, with ``--force`` or not."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .protocol import DELTA_LOG, ICEBERG_CATALOG, LOCK_FILE, MARKS_FILE, STAGING, ExportRefused, write_json_atomically

JOURNAL_FILE = "_pulsarkit_journal.json"
JOURNAL_FORMAT = "pulsarkit-export-journal"
#: the names directly in OUT that are pulsarkit's (besides ``topic=...`` partition directories)
#: the files directly in OUT that outlive a run (never a run's leftovers)
OWN_FILES = (LOCK_FILE, MARKS_FILE, JOURNAL_FILE)
OWN_TOP = (LOCK_FILE, MARKS_FILE, JOURNAL_FILE, STAGING, ICEBERG_CATALOG, DELTA_LOG, "data", "metadata")
#: the longest file name the usual file systems take (bytes)
NAME_MAX = 255
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


class UnsafePath(ExportRefused):
    """A symbolic link, or a file of the wrong kind, where an export writes: refused, naming the path."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(f"{path}: {what}; pulsarkit never writes through links or over what is not its own", str(path))


def own_top(name: str) -> bool:
    """Whether ``name`` directly in OUT is one of the names an export writes."""
    return name in OWN_TOP or name.startswith("topic=") or name.startswith(ICEBERG_CATALOG)


def audit(out: Path) -> None:
    """Refuses OUT if any of pulsarkit's names in it (and anything under them) is a symbolic link, or
    a device, FIFO or socket: what a run would write through or delete; or if a file it writes in place
    has another name. Follows no link. (Data files are replaced and deleted, never written in place:
    a hard link to one keeps its content.)"""
    try:
        entries = list(os.scandir(out))
    except FileNotFoundError:
        return
    for e in entries:
        if not own_top(e.name):
            continue
        _check_mode(Path(e.path), e.stat(follow_symlinks=False).st_mode)
        if e.name == LOCK_FILE or e.name.startswith(ICEBERG_CATALOG):
            # written in place (the lock's pid, SQLite's pages): another name of the same file would change too
            if e.stat(follow_symlinks=False).st_nlink > 1:
                raise UnsafePath(Path(e.path), "a file with other names (a hard link), which an export writes in place")
        if e.is_dir(follow_symlinks=False):
            for d, dirs, files in os.walk(e.path, followlinks=False):
                for n in dirs + files:
                    p = os.path.join(d, n)
                    _check_mode(Path(p), os.lstat(p).st_mode)


def _check_mode(path: Path, mode: int) -> None:
    if stat.S_ISLNK(mode):
        raise UnsafePath(path, "a symbolic link where an export writes")
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise UnsafePath(path, "not a regular file or directory")


def check_below(out: Path, rel: str | Path) -> Path:
    """``out / rel``, after checking that ``rel`` stays below ``out`` and that no existing component of
    it is a link (the last may be absent); the path to use."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts:
        raise UnsafePath(out / rel, "not a path below the export")
    p = out
    for i, part in enumerate(parts):
        p = p / part
        try:
            mode = os.lstat(p).st_mode
        except FileNotFoundError:
            break
        if stat.S_ISLNK(mode) or (i < len(parts) - 1 and not stat.S_ISDIR(mode)):
            raise UnsafePath(p, "a symbolic link where an export writes" if stat.S_ISLNK(mode) else "not a directory")
    return out / rel


def make_dirs(out: Path, rel: str | Path) -> list[str]:
    """Creates ``out/rel`` one component at a time (private), refusing a link on the way; returns the
    directories it created (relative to ``out``, outermost first)."""
    created = []
    p = out
    for part in Path(rel).parts:
        p = p / part
        try:
            os.mkdir(p, PRIVATE_DIR)
            created.append(str(p.relative_to(out)))
        except FileExistsError:
            pass
        mode = os.lstat(p).st_mode
        if not stat.S_ISDIR(mode):
            raise UnsafePath(p, "a symbolic link where an export writes" if stat.S_ISLNK(mode) else "not a directory")
    return created


def remove_own_file(out: Path, rel: str) -> bool:
    """Deletes ``out/rel`` if it is a regular file reached through real directories only; ``False`` if
    it is not there. A link or anything else in the way is refused."""
    p = check_below(out, rel)
    if not _regular_file_there(p, "a regular file pulsarkit wrote"):
        return False
    p.unlink()
    return True


def _regular_file_there(p: Path, what: str) -> bool:
    """Whether ``p`` is there, as a regular file (``lstat``: a link is not followed); anything else in its place
    is refused as not ``what``."""
    try:
        mode = os.lstat(p).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(mode):
        raise UnsafePath(p, f"not {what}")
    return True


def remove_own_empty_dir(out: Path, rel: str) -> None:
    """Removes the directory ``out/rel`` a run created if it is empty now: a file someone put there since
    keeps it (and stays)."""
    p = check_below(out, rel)
    try:
        mode = os.lstat(p).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        raise UnsafePath(p, "not the directory pulsarkit created")
    with contextlib.suppress(OSError):  # not empty
        p.rmdir()


def short_name(prefix: str, value: str) -> str:
    """``prefix + value`` as a directory name, or, when that is longer than a file name may be, the
    longest prefix of it that fits with ``~`` and a hash of ``value``: deterministic (a rerun maps the
    topic to the same directory) and, by the hash, without collisions."""
    name = prefix + value
    if len(name.encode()) <= NAME_MAX:
        return name
    digest = "~" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    head = name.encode()[: NAME_MAX - len(digest)].decode("utf-8", "ignore")
    while head.endswith("%") or head[-2:-1] == "%":  # never cut an escape in two
        head = head[:-1]
    return head + digest


@dataclass
class Journal:
    """A run in progress: its id and pid, and what its commit creates in OUT (relative paths)."""

    run: str
    pid: int
    files: list[str] = field(default_factory=list)
    #: directories the run created: everything in them is the run's
    dirs: list[str] = field(default_factory=list)
    #: for a writer that names its files itself (delta-rs, pyiceberg): every file and directory under
    #: pulsarkit's names in OUT before the commit (:func:`tree`); what appears besides is the run's
    before: list[str] | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "format": JOURNAL_FORMAT,
            "run": self.run,
            "pid": self.pid,
            "files": self.files,
            "dirs": self.dirs,
            "before": self.before,
        }

    def new_paths(self, out: Path) -> list[str]:
        """What is under pulsarkit's names in OUT now and was not before the commit (see :attr:`before`)."""
        if self.before is None:
            return []
        before = set(self.before)
        return [p for p in tree(out) if p not in before]

    def owned_top(self, out: Path) -> set[str]:
        """The names directly in OUT this run's journal says it created. A name it only wrote below (a
        ``_staging`` or ``topic=...`` that was there before) is not the run's: what else is in it may not be."""
        listed = [*self.files, *self.dirs, *self.new_paths(out)]
        return {p for p in listed if len(Path(p).parts) == 1}


def tree(out: Path) -> list[str]:
    """Every file and directory under pulsarkit's names in OUT (relative, no link followed), but the files
    that outlive runs (lock, marks, journal, the Iceberg catalog) and the staging directory."""
    found = []
    for name in sorted(os.listdir(out)) if out.is_dir() else []:
        if not own_top(name) or name in OWN_FILES or name == STAGING or name.startswith(ICEBERG_CATALOG):
            continue
        found.append(name)
        if os.path.isdir(out / name) and not os.path.islink(out / name):
            for d, dirs, files in os.walk(out / name, followlinks=False):
                found.extend(str((Path(d) / n).relative_to(out)) for n in sorted(dirs + files))
    return found


def read_journal(out: Path) -> Journal | None:
    """The journal a run left (``None``: none); one that is not a journal is refused, naming it."""
    path = out / JOURNAL_FILE
    if not _regular_file_there(path, "the regular file pulsarkit's run journal is"):
        return None
    try:
        doc = json.loads(path.read_text())
        if doc.get("format") != JOURNAL_FORMAT:
            raise ValueError("not a journal")
        before = doc.get("before")
        return Journal(
            str(doc["run"]),
            int(doc["pid"]),
            [str(f) for f in doc["files"]],
            [str(d) for d in doc["dirs"]],
            None if before is None else [str(n) for n in before],
        )
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ExportRefused(f"{path} is not a pulsarkit run journal ({e}); move it away if it is yours") from None


def write_journal(out: Path, journal: Journal) -> None:
    write_json_atomically(out / JOURNAL_FILE, journal.to_json())


def drop_journal(out: Path) -> None:
    remove_own_file(out, JOURNAL_FILE)


def staging_dirs(out: Path, run: str) -> list[str]:
    """The staging directories run ``run`` creates (relative to OUT, outermost first): ``_staging`` if it is
    not there yet, and its own ``_staging/<run>``; one already there is refused: its content is not the run's."""
    mine = str(Path(STAGING) / run)
    if os.path.lexists(check_below(out, mine)):
        raise ExportRefused(f"{out / mine} exists; a run's staging directory is its own, never one found there")
    return [d for d in (STAGING, mine) if not os.path.lexists(out / d)]


def drop_staging(out: Path, journal: Journal) -> None:
    """Deletes the staging directories the journal says its run created (:func:`staging_dirs`): its
    ``_staging/<run>`` and all in it, then ``_staging`` if the run made it and it is empty now. Nothing else
    of a ``_staging`` is the run's: a journal that names none (an older one) leaves it all."""
    mine = str(Path(STAGING) / journal.run)
    if mine in journal.dirs:
        # the path checked (no link on the way), then removed fd-based (rmtree follows no link inside on Linux)
        shutil.rmtree(check_below(out, mine), ignore_errors=True)
    if STAGING in journal.dirs:
        remove_own_empty_dir(out, STAGING)


def undo(out: Path, journal: Journal) -> list[str]:
    """Deletes what the journal's uncommitted run created: the files it lists (or, for a writer that names
    its files, that appeared since), then its directories that are empty then, deepest first; returns the
    files removed, relative to ``out``. A file put into such a directory since is kept, and so is the
    directory; for a writer that names its files, one put under pulsarkit's names after the run died is
    taken for the run's (Delta, Iceberg: those names are the table's own)."""
    new = journal.new_paths(out)
    new_dirs = [d for d in new if os.path.isdir(check_below(out, d))]
    removed = [f for f in [*journal.files, *new] if f not in new_dirs and remove_own_file(out, f)]
    for d in sorted({*journal.dirs, *new_dirs}, key=lambda d: -len(Path(d).parts)):
        remove_own_empty_dir(out, d)
    return sorted(set(removed))
