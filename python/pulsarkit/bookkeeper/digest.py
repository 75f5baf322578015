"""BookKeeper entry digests: how a client packs an entry for a bookie and how a reader checks it.

The stored bytes are ``[ledgerId][entryId][lastAddConfirmed][length]`` (four big-endian longs),
the digest of those 32 bytes and the payload, then the payload (``DigestManager``). This module is
the one table of digest types and the one stored-entry type (:class:`BookieEntry`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .. import _native
from ..errors import BookieError, CorruptEntryError

#: BookKeeper's digest types, in the order :func:`detect_digest_type` and ``AUTO`` scans try them
#: (``MAC`` is HMAC-SHA1 keyed with SHA-1("mac" + password)).
DIGEST_TYPES = ("CRC32C", "CRC32", "MAC", "DUMMY")
#: ``LedgerMetadataFormat.DigestType`` values, as ledger metadata stores them.
_DIGEST_TYPE_VALUES = {"CRC32": 1, "MAC": 2, "CRC32C": 3, "DUMMY": 4}
_DIGEST_TYPE_NAMES = {v: k for k, v in _DIGEST_TYPE_VALUES.items()}


def digest_type_name(name_or_value: str | int) -> str:
    """The canonical digest name for a name (``HMAC`` is ``MAC``) or a ledger-metadata enum value."""
    if isinstance(name_or_value, int):
        name = _DIGEST_TYPE_NAMES.get(name_or_value)
    else:
        name = "MAC" if name_or_value == "HMAC" else name_or_value
        name = name if name in _DIGEST_TYPE_VALUES else None
    if name is None:
        raise BookieError(f"unknown digest type {name_or_value!r}; expected one of {DIGEST_TYPES}")
    return name


def digest_type_value(name: str) -> int:
    """The ``LedgerMetadataFormat.DigestType`` value of a digest name."""
    return _DIGEST_TYPE_VALUES[digest_type_name(name)]


class BookieEntry(NamedTuple):
    """A stored bookie entry: ``payload`` is what the client wrote (for Pulsar, the entry bytes)."""

    ledger_id: int
    entry_id: int
    last_add_confirmed: int
    #: Cumulative ledger length including this entry.
    length: int
    payload: bytes


def digest_length(digest_type: str = "CRC32C") -> int:
    """Bytes the digest occupies after the 32-byte header: CRC32C 4, CRC32 8, MAC 20, DUMMY 0."""
    return _native.bookie_digest_len(digest_type)


def pack_entry(
    ledger_id: int,
    entry_id: int,
    payload: bytes,
    *,
    last_add_confirmed: int = -1,
    length: int | None = None,
    digest_type: str = "CRC32C",
    password: bytes = b"",
) -> bytes:
    """The bytes a bookie stores for one entry, as BookKeeper's ``DigestManager`` packs them.

    ``length`` is the ledger's cumulative length including this entry (default: ``len(payload)``,
    right for a ledger's first entry); ``password`` only matters for ``MAC``.
    """
    if length is None:
        length = len(payload)
    digest_type = digest_type_name(digest_type)
    return _native.bookie_pack(digest_type, password, ledger_id, entry_id, last_add_confirmed, length, payload)


def _entry(data: Any, h: Any) -> BookieEntry:
    return BookieEntry(
        h.ledger_id, h.entry_id, h.last_add_confirmed, h.length, bytes(memoryview(data)[h.payload_offset :])
    )


def _parse_entry(data: bytes, digest_type: str = "CRC32C") -> BookieEntry:
    """Splits stored bytes without checking the digest."""
    return _entry(data, _native.bookie_parse(data, digest_type))


def _verify_entry(
    data: bytes,
    digest_type: str = "CRC32C",
    password: bytes = b"",
    *,
    ledger_id: int | None = None,
    entry_id: int | None = None,
) -> BookieEntry:
    """Checks the digest (and the ids, when given) like ``verifyDigestAndReturnData``.

    Raises :class:`DigestMismatchError` (a ``ChecksumMismatchError``; ``stored``/``computed`` are the
    digest bytes) or ``CorruptEntryError`` for wrong ids or bytes too short for the header.
    """
    return _entry(data, _native.bookie_verify(data, digest_type, password, ledger_id, entry_id))


def detect_digest_type(data: bytes, password: bytes | None = None) -> str | None:
    """The digest type stored bytes verify with: CRC32C, CRC32, or MAC when ``password`` is given."""
    return _native.bookie_detect_digest(data, password)


def mac_key(password: bytes) -> bytes:
    """SHA-1("mac" + password): the HMAC key of ``MAC`` digests."""
    return _native.bookie_mac_key(password)


def master_key(password: bytes = b"") -> bytes:
    """SHA-1("ledger" + password): the master key a bookie records per ledger."""
    return _native.bookie_master_key(password)


class BookieEntryPacker:
    """Packs consecutive entries of one ledger like a ``LedgerHandle``: entry ids count up from
    ``next_entry_id``, each entry's LAC is the previous entry id and ``length`` accumulates."""

    def __init__(
        self,
        ledger_id: int,
        digest_type: str = "CRC32C",
        password: bytes = b"",
        *,
        next_entry_id: int = 0,
        last_add_confirmed: int = -1,
        length: int = 0,
    ) -> None:
        digest_length(digest_type)  # validates the name
        self.ledger_id = ledger_id
        self.digest_type = digest_type
        self.password = password
        self.next_entry_id = next_entry_id
        self.last_add_confirmed = last_add_confirmed
        self.length = length

    def pack(self, payload: bytes) -> bytes:
        out = self.pack_many([payload])
        return out[0]

    def pack_many(self, payloads: Sequence[bytes]) -> list[bytes]:
        out = _native.bookie_pack_many(
            self.digest_type,
            self.password,
            self.ledger_id,
            self.next_entry_id,
            self.last_add_confirmed,
            self.length,
            list(payloads),  # buffers are borrowed, not copied
        )
        if payloads:
            self.next_entry_id += len(payloads)
            self.last_add_confirmed = self.next_entry_id - 1
            self.length += sum(map(len, payloads))
        return out


# ------------------------------------------------------------------------------------------------
# Reports


def unpack_entry(
    data: bytes,
    digest_type: str = "CRC32C",
    password: bytes = b"",
    *,
    verify: bool = True,
    ledger_id: int | None = None,
    entry_id: int | None = None,
) -> BookieEntry:
    """Splits stored entry bytes. With ``verify`` (the default) checks the digest like
    ``verifyDigestAndReturnData``: :class:`~pulsarkit.errors.DigestMismatchError` (a
    ``ChecksumMismatchError``; ``stored``/``computed`` are the digest bytes). Ledger and entry ids,
    when given, are checked either way (``CorruptEntryError``, as are bytes too short for the header)."""
    digest_type = digest_type_name(digest_type)
    if verify:
        return _verify_entry(data, digest_type, password, ledger_id=ledger_id, entry_id=entry_id)
    e = _parse_entry(data, digest_type)
    if ledger_id is not None and e.ledger_id != ledger_id or entry_id is not None and e.entry_id != entry_id:
        raise CorruptEntryError(f"stored entry is ({e.ledger_id}, {e.entry_id}), expected ({ledger_id}, {entry_id})")
    return e


__all__ = [
    "DIGEST_TYPES",
    "BookieEntry",
    "BookieEntryPacker",
    "detect_digest_type",
    "digest_length",
    "digest_type_name",
    "digest_type_value",
    "mac_key",
    "master_key",
    "pack_entry",
    "unpack_entry",
]
