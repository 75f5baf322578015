"""Files written so that a crash cannot lose them: the data fsynced, then the directory that names them.

The orphan cleanup's backups and the export's marks are both only as good as this (a rename or a new
file is durable once its directory is)."""

from __future__ import annotations

import os
from pathlib import Path


def write_durably(path: Path, data: bytes) -> None:
    """``data`` as ``path``, fsynced (its directory still needs :func:`fsync_dir` for the name to last)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
    """Makes the entries of directory ``path`` (files created, renamed or removed in it) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
