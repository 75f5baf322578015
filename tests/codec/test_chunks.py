"""ChunkAssembler follows ConsumerImpl.processMessageChunk: order, duplicates, gaps, restarts, expiry."""

import pulsarkit as pk
import pytest


def chunks(body: bytes, n: int, uuid="prod-7", codec="NONE", publish_time=1000):
    z = pk.compress(codec, body)
    size = -(-len(z) // n)
    out = []
    for i in range(n):
        md = pk.message_metadata(
            "prod",
            7,
            publish_time,
            uuid=uuid,
            chunk_id=i,
            num_chunks_from_msg=n,
            total_chunk_msg_size=len(z),
            uncompressed_size=len(body),
            partition_key="k",
        )
        if codec != "NONE":
            md.compression = pk.COMPRESSION_TYPES.index(codec)
        out.append(pk.encode_entry(md, z[i * size : (i + 1) * size]))
    return out


@pytest.mark.parametrize("codec", pk.COMPRESSION_TYPES)
def test_in_order(codec):
    body = bytes(range(256)) * 100
    a = pk.codec.ChunkAssembler()
    parts = chunks(body, 4, codec=codec)
    assert [a.add(p, message_id=i) for i, p in enumerate(parts[:-1])] == [None] * 3
    done = a.add(parts[-1], message_id=3)
    assert done.message.payload == body and done.message.key == "k" and done.message.sequence_id == 7
    assert done.chunk_message_ids == [0, 1, 2, 3] and done.uuid == "prod-7"
    assert a.pending == [] and a.discarded == []


def test_duplicates_are_dropped_and_context_kept():
    a = pk.codec.ChunkAssembler()
    p = chunks(b"x" * 100, 3)
    a.add(p[0])
    a.add(p[1])
    a.add(p[1])
    a.add(p[0 + 1])
    assert a.duplicates == 2
    assert a.add(p[2]).message.payload == b"x" * 100


def test_gap_discards_and_late_chunks_are_discarded_too():
    a = pk.codec.ChunkAssembler()
    p = chunks(b"y" * 100, 4)
    a.add(p[0])
    assert a.add(p[2]) is None
    assert a.pending == [] and a.discarded[0][0] == "prod-7" and "gap" in a.discarded[0][1]
    assert a.add(p[3]) is None and "without chunk 0" in a.discarded[1][1]


def test_new_first_chunk_restarts():
    a = pk.codec.ChunkAssembler()
    p = chunks(b"z" * 90, 3)
    a.add(p[0])
    a.add(p[1])
    a.add(p[0])
    assert "restarted" in a.discarded[0][1]
    a.add(p[1])
    assert a.add(p[2]).message.payload == b"z" * 90


def test_interleaved_messages_and_eviction():
    a = pk.codec.ChunkAssembler(max_pending_chunked_messages=2)
    x, y, z = chunks(b"1" * 30, 2, uuid="x"), chunks(b"2" * 30, 2, uuid="y"), chunks(b"3" * 30, 2, uuid="z")
    a.add(x[0])
    a.add(y[0])
    a.add(z[0])
    assert a.pending == ["y", "z"] and a.discarded == [("x", "evicted: too many pending chunked messages")]
    assert a.add(y[1]).message.payload == b"2" * 30
    assert a.add(z[1]).message.payload == b"3" * 30


def test_expiry():
    now = [0.0]
    a = pk.codec.ChunkAssembler(expire_incomplete_after_ms=1000, clock=lambda: now[0])
    p = chunks(b"q" * 40, 2)
    a.add(p[0])
    now[0] = 999
    assert a.expire() == []
    now[0] = 2500
    assert a.expire() == ["prod-7"] and a.pending == []


def test_oversized_chunk_and_inconsistent_metadata():
    a = pk.codec.ChunkAssembler()
    p = chunks(b"w" * 40, 2)
    a.add(p[0])
    big = pk.encode_entry(
        pk.message_metadata("prod", 7, 1, uuid="prod-7", chunk_id=1, num_chunks_from_msg=2, total_chunk_msg_size=40),
        b"w" * 100,
    )
    assert a.add(big) is None and "exceed" in a.discarded[-1][1]
    with pytest.raises(pk.CorruptEntryError):
        a.add(pk.encode_entry(pk.message_metadata("p", 1, 1), b"not a chunk"))
    bad = pk.encode_entry(
        pk.message_metadata("p", 1, 1, uuid="u", chunk_id=5, num_chunks_from_msg=2, total_chunk_msg_size=1),
        b"x",
    )
    with pytest.raises(pk.CorruptEntryError):
        a.add(bad)
