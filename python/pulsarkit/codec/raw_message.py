"""Entries of a compacted ledger: ``RawMessage`` as the compactor writes it (``RawMessageImpl.serialize``)."""

from __future__ import annotations

import struct
from typing import Any

from ..errors import PulsarkitError
from ..proto import MessageIdData


def decode_compacted_entry(data: bytes) -> tuple[Any, bytes]:
    """A compacted-ledger entry (``RawMessage.serialize``): ``[int idSize][MessageIdData][int size][entry]``;
    returns ``(MessageIdData, entry bytes)``."""

    if len(data) < 4:
        raise PulsarkitError(f"compacted entry of {len(data)} bytes has no id size")
    n = struct.unpack_from(">i", data)[0]
    if n < 0 or 4 + n + 4 > len(data):
        raise PulsarkitError(f"compacted entry: id size {n} at offset 0 exceeds the {len(data)} bytes")
    mid = MessageIdData()
    mid.ParseFromString(data[4 : 4 + n])
    size = struct.unpack_from(">i", data, 4 + n)[0]
    start = 8 + n
    if size < 0 or start + size > len(data):
        raise PulsarkitError(
            f"compacted entry: size {size} at offset {4 + n} exceeds the {len(data) - start} bytes left"
        )
    return mid, data[start : start + size]


__all__ = ["decode_compacted_entry"]
