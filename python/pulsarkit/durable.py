"""Files written so that a crash cannot lose them: the data fsynced, then the directory that names them;
and where nothing is written: inside what a command reads.

The orphan cleanup's backups and the export's marks are both only as good as this (a rename or a new
file is durable once its directory is)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def write_durably(path: Path, data: bytes) -> None:
    """``data`` as the new file ``path``, private (0600) and fsynced (its directory still needs
    :func:`fsync_dir` for the name to last). A file or link already there is an error, never
    overwritten or written through."""
    with os.fdopen(
        os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), "wb"
    ) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def fsync_file(path: Path | str) -> None:
    """Makes the data of the existing regular file ``path`` durable (its name still needs :func:`fsync_dir`).
    Opened without following a link: what is synced is the file that will be renamed or linked."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_private_dir(path: Path) -> None:
    """Creates the directory ``path`` (0700) and its missing parents, each new one's name made durable
    (its parent fsynced); an existing ``path`` must be a real directory (not a link to one: what is
    written there would land elsewhere)."""
    new = []
    p = path
    while not os.path.lexists(p) and p.parent != p:
        new.append(p)
        p = p.parent
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.is_symlink() or not path.is_dir():
        raise FileExistsError(f"{path} is not a directory (a symbolic link or a file)")
    # without these, a crash can keep what was done after (an orphan cleanup's deletes) and lose the directory
    for d in new:
        fsync_dir(d.parent)


def fsync_dir(path: Path | str) -> None:
    """Makes the entries of directory ``path`` (files created, renamed or removed in it) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def input_holding(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]]) -> str | None:
    """The first of ``inputs`` that ``path`` is, or lies inside, links resolved; None when it is in none.
    pulsarkit writes nothing there: not into the stores it reads, nor into a directory it did not create."""
    real = os.path.realpath(path)
    for i in inputs:
        ri = os.path.realpath(i)
        if real == ri or _inside(real, ri):
            return os.fspath(i)
    return None


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # one relative, one absolute (realpath makes both absolute), or different drives
        return False
