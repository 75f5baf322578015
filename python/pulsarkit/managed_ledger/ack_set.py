"""Batch-index ack sets: the ``long[]`` words of a ``java.util.BitSet`` over a batch's messages
(a set bit = a message still to acknowledge), as cursors store them."""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import InvalidCursorPositionError

_MASK64 = (1 << 64) - 1


def ack_set_for(batch_size: int, acked_indexes: Iterable[int] = ()) -> list[int]:
    """A batch-index ack set: bits ``[0, batch_size)`` set except the acknowledged indexes, as the
    ``long[]`` words of a ``java.util.BitSet`` (``TxnBatchedPositionImpl.setAckSetByIndex``)."""
    bits = (1 << batch_size) - 1
    for i in acked_indexes:
        if not 0 <= i < batch_size:
            raise InvalidCursorPositionError(f"batch index {i} outside a batch of {batch_size}")
        bits &= ~(1 << i)
    return bitset_words(bits)


def bitset_words(bits: int) -> list[int]:
    """``BitSet.toLongArray()``: little-endian signed 64-bit words, trailing zero words dropped."""
    words = []
    while bits:
        w = bits & _MASK64
        words.append(w - (1 << 64) if w >> 63 else w)
        bits >>= 64
    return words


def bitset_from_words(words: Iterable[int]) -> int:
    bits = 0
    for i, w in enumerate(words):
        bits |= (int(w) & _MASK64) << (64 * i)
    return bits


def lowest_bit(bits: int) -> int:
    """Index of the lowest set bit, -1 for none."""
    return (bits & -bits).bit_length() - 1 if bits else -1


__all__ = ["ack_set_for", "bitset_from_words", "bitset_words", "lowest_bit"]
