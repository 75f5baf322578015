"""A data directory pulsarkit did not create (a standalone's ``metadata/`` + ``bookkeeper/current``), as
``Store.open`` meets it: opened by the read-only reader, which :mod:`pulsarkit.scan.datadir` (a higher layer)
registers here, never written to. Apart from the factory so that registering does not import the factory and
the bookie GC it runs (a message read's start)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

#: opens such a directory read-only; None until :mod:`pulsarkit.scan.datadir` is imported
opener: Callable[[str], Any] | None = None


def register(open_read_only: Callable[[str], Any]) -> None:
    """Sets :data:`opener`."""
    global opener
    opener = open_read_only


def accepts(path: str) -> bool:
    """A standalone's layout (``metadata/`` + ``bookkeeper/current``), not pulsarkit's ``bookie/``."""
    if not os.path.isdir(os.path.join(path, "metadata")) or os.path.isdir(os.path.join(path, "bookie")):
        return False
    bookies = (("bookkeeper",), ("standalone", "bookkeeper"))
    return any(os.path.isdir(os.path.join(path, *d, "current")) for d in bookies)
