"""A bookie's cookie (``current/VERSION`` in each of its ledger and journal directories): which bookie
and which cluster a directory belongs to. The read path groups directories by it; bookie GC refuses a
directory whose cluster is not the metadata's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_encoding

from ..errors import BookieError


class CookieError(BookieError):
    """A ``current/VERSION`` that is not a bookie cookie; ``path`` names the file."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class Cookie:
    """A bookie's cookie (``current/VERSION`` of each of its ledger and journal directories): the
    bookie a directory belongs to. ``bookie_id`` is the cookie's ``bookieHost``, the name ledger
    metadata puts in its ensembles (a ``host:port`` or a custom ``bookieId``)."""

    layout_version: int
    bookie_id: str
    journal_dirs: str
    ledger_dirs: str
    instance_id: str | None
    path: str


def read_cookie(directory: Path) -> Cookie | None:
    """The cookie of a ledger or journal directory, or None when it has no ``current/VERSION``.

    BookKeeper's ``Cookie.parse``: the first line is the layout version; version 3 has the bookie
    host, journal dirs and ledger dirs on the next three lines; version 4 and later (real bookies
    write 4 or 5) have a ``CookieFormat`` protobuf in text format, each string C-escaped
    (``ledgerDirs: "1\\tdata/bookkeeper"``). :class:`CookieError` when the file is not a cookie."""
    cur = directory if directory.name == "current" else directory / "current"
    f = cur / "VERSION"
    try:
        text = f.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise CookieError(f"{f}: unreadable cookie: {e}", str(f)) from None
    lines = text.splitlines()
    try:
        version = int(lines[0].strip()) if lines else -1
    except ValueError:
        version = -1
    if version < 3:
        raise CookieError(f"{f}: not a bookie cookie (layout version line {lines[:1]!r})", str(f))
    if version == 3:
        if len(lines) < 4:
            raise CookieError(f"{f}: cookie of layout version 3 has {len(lines) - 1} of its 3 lines", str(f))
        return Cookie(3, lines[1], lines[2], lines[3], None, str(f))
    fields: dict[str, str] = {}
    for n, line in enumerate(lines[1:], 2):
        key, sep, value = line.strip().partition(":")
        value = value.strip()
        if not line.strip():
            continue
        if not sep or len(value) < 2 or value[0] != value[-1] or value[0] not in "\"'":
            raise CookieError(f"{f}: line {n} of the cookie is not a text-format string field: {line!r}", str(f))
        fields[key.strip()] = text_encoding.CUnescape(value[1:-1]).decode("utf-8", "replace")
    if not fields.get("bookieHost"):
        raise CookieError(f"{f}: the cookie names no bookieHost", str(f))
    return Cookie(
        version,
        fields["bookieHost"],
        fields.get("journalDir", ""),
        fields.get("ledgerDirs", ""),
        fields.get("instanceId") or None,
        str(f),
    )
