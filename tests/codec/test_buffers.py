"""Byte arguments of the native module: one conversion borrows any C-contiguous buffer, wherever a
binding takes bytes (alone, in a list, in a pair)."""

import pulsarkit as pk
import pytest
from pulsarkit.codec.txn import pack_batched_entry, split_entry


def test_byte_arguments_borrow_any_contiguous_buffer_alone_in_lists_and_in_pairs() -> None:
    records = [b"first", b"second record"]
    want = pack_batched_entry(records)
    assert pack_batched_entry([bytearray(records[0]), memoryview(records[1])]) == want
    assert split_entry(bytearray(want)) == (True, records)
    assert pk.encode_entry(pk.message_metadata("p", 0, 1), memoryview(b"xv")[1:]) == pk.encode_entry(
        pk.message_metadata("p", 0, 1), b"v"
    )
    with pytest.raises(TypeError, match="C-contiguous"):
        pk.crc32c(memoryview(b"abcdef")[::2])
    with pytest.raises(TypeError, match="byte buffer"):
        pack_batched_entry([b"ok", 3])  # type: ignore[list-item]
