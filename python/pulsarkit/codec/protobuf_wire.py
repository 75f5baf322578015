"""The protobuf wire format by hand, for the few places that read protobuf without a schema class:
varints and the (field number, value) pairs of a message."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from ..errors import PulsarkitError


def encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_varint(buf: bytes, pos: int, max_bits: int = 64) -> tuple[int, int]:
    """``(value, next offset)`` of the varint at ``pos``; :class:`PulsarkitError` when it is cut
    short or longer than ``max_bits``."""
    result = shift = 0
    while True:
        if pos >= len(buf) or shift >= max_bits:
            raise PulsarkitError(f"truncated or oversized varint at offset {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def fields(buf: bytes) -> Iterator[tuple[int, Any]]:
    """(field number, value) of a protobuf message: ints for varints/fixed, bytes for length-delimited."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        fno, wt = key >> 3, key & 7
        v: int | bytes
        if wt == 0:
            v, pos = read_varint(buf, pos)
        elif wt == 2:
            n, pos = read_varint(buf, pos)
            if pos + n > len(buf):
                raise PulsarkitError(f"field {fno}: {n} bytes at offset {pos} exceed the message")
            v, pos = buf[pos : pos + n], pos + n
        elif wt == 1:
            v, pos = struct.unpack_from("<q", buf, pos)[0], pos + 8
        elif wt == 5:
            v, pos = struct.unpack_from("<i", buf, pos)[0], pos + 4
        else:
            raise PulsarkitError(f"unsupported wire type {wt} at offset {pos}")
        yield fno, v


__all__ = ["encode_varint", "fields", "read_varint"]
