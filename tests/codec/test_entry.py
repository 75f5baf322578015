"""The single-entry codec: vectors from the fact sheet, attributes, and every error path."""

import pulsarkit as pk
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulsarkit.proto import BaseCommand, MessageMetadata

H = bytes.fromhex


def worked_md():
    md = MessageMetadata(producer_name="p", sequence_id=0, publish_time=1000, uncompressed_size=2)
    return md


METADATA_AND_PAYLOAD = H("0e01 9be0d6b3 0000000a 0a01701000 18e8074802 6869".replace(" ", ""))


def test_crc32c_vectors_and_resume():
    assert pk.crc32c(b"data") == 0xAED87DD1
    assert pk.crc32c(b"123456789") == 0xE3069283
    assert pk.crc32c(b"datadata") == 0x9E84FA2F
    assert pk.crc32c(b"data", pk.crc32c(b"data")) == 0x9E84FA2F
    assert pk.crc32c(b"") == 0
    big = bytes(range(256)) * 1024
    assert pk.crc32c(big) == pk.crc32c(big[1000:], pk.crc32c(big[:1000]))
    assert pk.crc32c(bytearray(b"data")) == pk.crc32c(memoryview(b"xdatax")[1:5]) == 0xAED87DD1
    with pytest.raises(TypeError):
        pk.crc32c("data")


def test_worked_example_bytes():
    md = worked_md()
    assert md.SerializeToString() == H("0a0170100018e8074802")
    assert pk.encode_entry(md, b"hi") == METADATA_AND_PAYLOAD
    with_bem = pk.add_broker_entry_metadata(METADATA_AND_PAYLOAD, broker_timestamp=1000, index=0)
    assert with_bem == H("0e020000000508e8071000") + METADATA_AND_PAYLOAD
    send = pk.command("SEND", producer_id=1, sequence_id=0)
    assert pk.encode_command(send, METADATA_AND_PAYLOAD) == H("00000022000000080806320408011000") + METADATA_AND_PAYLOAD


def test_entry_parse_attributes():
    e = pk.Entry.parse(pk.add_broker_entry_metadata(METADATA_AND_PAYLOAD, 1000, 0))
    assert e.broker_entry_metadata == pk.BrokerEntryMetadata(1000, 0)
    assert e.checksum == 0x9BE0D6B3
    assert e.metadata.producer_name == "p" and e.metadata.publish_time == 1000
    assert e.payload == b"hi"
    assert e.headers_and_payload == METADATA_AND_PAYLOAD
    assert not e.is_batch and e.num_messages == 1
    assert e.entry_timestamp == 1000
    [m] = e.messages()
    assert (m.payload, m.batch_index, m.key, m.index, m.broker_timestamp) == (b"hi", -1, None, 0, 1000)


def test_optional_prefixes():
    no_crc = pk.encode_entry(worked_md(), b"hi", checksum=False)
    assert no_crc == METADATA_AND_PAYLOAD[6:]
    e = pk.Entry.parse(no_crc)
    assert e.checksum is None and e.broker_entry_metadata is None and e.messages()[0].payload == b"hi"
    only_ts = pk.Entry.parse(pk.add_broker_entry_metadata(no_crc, broker_timestamp=5))
    assert only_ts.broker_entry_metadata == pk.BrokerEntryMetadata(5, None)
    assert only_ts.entry_timestamp == 5
    empty_bem = pk.add_broker_entry_metadata(no_crc)
    assert pk.peek_broker_entry_metadata(empty_bem) == pk.BrokerEntryMetadata(None, None)
    assert pk.peek_broker_entry_metadata(no_crc) is None
    assert pk.strip_broker_entry_metadata(no_crc) == no_crc
    with pytest.raises(pk.CorruptEntryError, match="already"):
        pk.add_broker_entry_metadata(empty_bem, 1, 1)


def test_batch_of_one_is_still_a_batch_and_index_per_message():
    md = pk.message_metadata("prod", 10, 2000)
    one = pk.Entry.parse(pk.encode_batch(md, [b"x"]))
    assert one.is_batch and one.num_messages == 1
    assert one.messages()[0].batch_index == 0
    ten = pk.add_broker_entry_metadata(pk.encode_batch(md, [bytes([i]) for i in range(10)]), index=9)
    msgs = pk.Entry.parse(ten).messages()
    assert [m.index for m in msgs] == list(range(10))
    assert [m.sequence_id for m in msgs] == list(range(10, 20))
    assert pk.Entry.parse(ten).metadata.highest_sequence_id == 19


@pytest.mark.parametrize("codec", pk.COMPRESSION_TYPES)
def test_batch_fields_survive_every_codec(codec):
    msgs = [
        {"payload": b"", "key": "k0", "properties": {"a": "1", "b": "2"}, "event_time": 77},
        {"payload": bytes(range(256)) * 3, "ordering_key": b"\x00ok", "null_value": False},
        {"payload": b"z" * 5000, "key": "k2", "partition_key_b64_encoded": True, "sequence_id": 99},
        {"payload": b"", "null_value": True},
    ]
    e = pk.Entry.parse(pk.encode_batch(pk.message_metadata("p", 5, 3000), msgs, compression=codec))
    assert e.compression == codec
    assert e.metadata.uncompressed_size > 0
    out = e.messages()
    assert [m.payload for m in out] == [m["payload"] for m in msgs]
    assert out[0].key == "k0" and out[0].properties == {"a": "1", "b": "2"} and out[0].event_time == 77
    assert out[1].ordering_key == b"\x00ok" and out[1].key is None and out[1].event_time is None
    assert out[2].partition_key_b64_encoded and out[2].sequence_id == 99
    assert out[3].null_value
    assert all(m.publish_time == 3000 and m.producer_name == "p" and m.batch_size == 4 for m in out)


def test_compacted_out_is_dropped_like_the_consumer():
    e = pk.Entry.parse(
        pk.encode_batch(pk.message_metadata("p", 0, 1), [b"keep", {"payload": b"", "compacted_out": True}, b"also"])
    )
    assert [m.payload for m in e.messages()] == [b"keep", b"also"]
    assert [m.batch_index for m in e.messages()] == [0, 2]
    assert [m.compacted_out for m in e.messages(include_compacted_out=True)] == [False, True, False]


def test_single_message_compression():
    body = b"hello pulsar " * 1000
    for codec in pk.COMPRESSION_TYPES:
        e = pk.Entry.parse(pk.encode_entry(pk.message_metadata("p", 1, 1), body, compression=codec))
        assert e.metadata.uncompressed_size == len(body)
        assert e.messages()[0].payload == body
        assert (codec == "NONE") == (len(e.payload) == len(body))


def test_truncation_at_every_offset_is_a_typed_error_with_offset():
    full = pk.add_broker_entry_metadata(pk.encode_batch(pk.message_metadata("p", 0, 1), [b"abc", b"def"], "LZ4"), 1, 1)
    for cut in range(len(full)):
        with pytest.raises(pk.CorruptEntryError) as ei:
            pk.Entry.parse(full[:cut]).messages()
        assert ei.value.offset is None or 0 <= ei.value.offset <= len(full)


def test_checksum_mismatch():
    bad = bytearray(METADATA_AND_PAYLOAD)
    bad[-1] ^= 0xFF
    with pytest.raises(pk.ChecksumMismatchError) as ei:
        pk.Entry.parse(bytes(bad))
    assert ei.value.offset == 2 and ei.value.stored == 0x9BE0D6B3 and ei.value.computed != ei.value.stored
    assert isinstance(ei.value, pk.PulsarkitError) and isinstance(ei.value, ValueError)
    assert pk.Entry.parse(bytes(bad), verify_checksum=False).payload == b"hj"[:1] + bytes([ord("i") ^ 0xFF])


def test_missing_required_metadata_field():
    md = MessageMetadata(producer_name="p", sequence_id=1)  # no publish_time
    raw = pk._native.encode_metadata_and_payload(md.SerializePartialToString(), b"x", True)
    with pytest.raises(pk.CorruptEntryError, match="publish_time"):
        pk.Entry.parse(raw)
    with pytest.raises(pk.PulsarkitError, match="publish_time"):
        pk.encode_entry(md, b"x")


def test_unknown_compression_and_bombs():
    md = pk.message_metadata("p", 0, 1, compression=1, uncompressed_size=3)
    md.compression = 1
    lz4 = pk.Entry.parse(pk.encode_entry(md, pk.compress("LZ4", b"abc")))
    assert lz4.messages()[0].payload == b"abc"
    md_bad = MessageMetadata()
    md_bad.CopyFrom(md)
    md_bad.ParseFromString(md.SerializeToString() + b"\x40\x09")  # compression = 9
    e = pk.Entry.parse(pk._native.encode_metadata_and_payload(md_bad.SerializeToString(), b"abc", True))
    with pytest.raises(pk.UnsupportedCompressionError):
        e.messages()
    with pytest.raises(pk.UnsupportedCompressionError):
        pk.compress("BROTLI", b"")
    # A declared size above the limit is refused before any allocation.
    with pytest.raises(pk.LimitExceededError):
        pk.decompress("ZSTD", pk.compress("ZSTD", b"a"), 10**12)
    # A real bomb: 64 MiB of zeros compresses to a few KiB; the declared size lies.
    bomb = pk.compress("ZLIB", bytes(64 << 20))
    with pytest.raises(pk.DecompressionError):
        pk.decompress("ZLIB", bomb, 1000)
    with pytest.raises(pk.LimitExceededError):
        pk.decompress("ZLIB", bomb, 64 << 20)
    assert len(pk.decompress("ZLIB", bomb, 64 << 20, limit=64 << 20)) == 64 << 20


def test_zlib_accepts_java_style_sync_flush():
    import zlib

    data = b"pulsar zlib " * 500
    c = zlib.compressobj()
    java_like = c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)
    assert java_like.endswith(b"\x00\x00\xff\xff")
    assert pk.decompress("ZLIB", java_like, len(data)) == data
    assert pk.decompress("ZLIB", zlib.compress(data), len(data)) == data
    with pytest.raises(pk.DecompressionError):
        pk.decompress("ZLIB", java_like, len(data) + 1)


def test_batch_with_trailing_garbage_or_missing_records():
    md = pk.message_metadata("p", 0, 1)
    good = pk.Entry.parse(pk.encode_batch(md, [b"a", b"b"]))
    md2 = MessageMetadata()
    md2.CopyFrom(good.metadata)
    md2.num_messages_in_batch = 3
    lying = pk.Entry.parse(pk._native.encode_metadata_and_payload(md2.SerializeToString(), good.payload, True))
    with pytest.raises(pk.CorruptEntryError, match="message 2 of 3"):
        lying.messages()
    md2.num_messages_in_batch = 1
    md2.uncompressed_size = len(good.payload)
    short = pk.Entry.parse(pk._native.encode_metadata_and_payload(md2.SerializeToString(), good.payload, True))
    with pytest.raises(pk.CorruptEntryError, match="follow the last"):
        short.messages()


def test_command_builder_and_frame_decoder():
    frames = [
        pk.encode_command(pk.command("PING")),
        pk.encode_command(pk.command("SEND", producer_id=3, sequence_id=7, num_messages=2), METADATA_AND_PAYLOAD),
        pk.encode_command(pk.command("FLOW", consumer_id=1, messagePermits=1000)),
    ]
    stream = b"".join(frames)
    for split in range(0, len(stream) + 1, 3):
        d = pk.FrameDecoder()
        got = d.feed(stream[:split]) + d.feed(stream[split:])
        assert [c.type for c, _ in got] == [BaseCommand.PING, BaseCommand.SEND, BaseCommand.FLOW]
        assert got[1][1] == METADATA_AND_PAYLOAD and got[0][1] is None
        assert got[1][0].send.num_messages == 2 and got[2][0].flow.messagePermits == 1000
        assert d.buffered == 0


def test_frame_decoder_errors():
    d = pk.FrameDecoder(max_frame_size=1024)
    with pytest.raises(pk.LimitExceededError):
        d.feed((2048).to_bytes(4, "big"))
    with pytest.raises(pk.LimitExceededError):
        d.feed(b"")  # stays failed
    d = pk.FrameDecoder()
    with pytest.raises(pk.CorruptFrameError) as ei:
        d.feed((6).to_bytes(4, "big") + (9).to_bytes(4, "big") + b"\x08\x12")
    assert ei.value.offset == 4
    d = pk.FrameDecoder()
    with pytest.raises(pk.CorruptFrameError):
        d.feed((6).to_bytes(4, "big") + (2).to_bytes(4, "big") + b"\xff\xff")


def test_invalid_utf8_in_metadata_strings_is_corruption():
    # producer_name "p" replaced by the invalid sequence C3 28 (same length framing rebuilt by hand).
    md = bytes.fromhex("0a02c328100018e807")
    raw = pk._native.encode_metadata_and_payload(md, b"x", True)
    with pytest.raises(pk.CorruptEntryError, match="UTF-8") as ei:
        pk.Entry.parse(raw)
    assert ei.value.offset == 10


def test_sequence_ids_beyond_u64_are_refused():
    with pytest.raises(pk.PulsarkitError, match="64-bit"):
        pk.encode_batch(pk.message_metadata("p", 2**64 - 1, 1), [b"a", b"b"])


def test_pip70_message_index_is_one_rule_wrapping_like_java_long() -> None:
    """The per-message index (``index - batch_size + batch_index + 1``) comes from the core for both
    Entry.messages() and the bulk kernel, wrapping at 64 bits as Java's long arithmetic does."""
    batch = pk.encode_batch(pk.message_metadata("p", 0, 1), [b"a", b"b", b"c"])
    for index, want in [(9, [7, 8, 9]), (2**64 - 1, [-3, -2, -1]), (1, [-1, 0, 1])]:
        stored = pk.add_broker_entry_metadata(batch, index=index)
        assert [m.index for m in pk.Entry.parse(stored).messages()] == want
        bulk = pk.bulk.explode_messages(pa.array([stored]))
        assert bulk.column("index").to_pylist() == want


def test_a_raised_decompression_limit_never_allocates_what_the_input_cannot_hold() -> None:
    """A corrupt or hostile entry declaring 4 GiB (the most the uint32 field holds), read with the limit
    raised far above it, is a DecompressionError: nothing is allocated beyond what the compressed
    bytes can really inflate to."""
    for codec in ("LZ4", "ZLIB", "ZSTD", "SNAPPY"):
        md = pk.message_metadata("p", 0, 1)
        entry = pk.encode_entry(md, b"x" * 100, compression=codec)
        e = pk.Entry.parse(entry)
        md.CopyFrom(e.metadata)
        md.uncompressed_size = 2**32 - 1
        forged = pk.encode_entry(md, pk.compress(codec, b"x" * 100))  # metadata as given
        with pytest.raises(pk.DecompressionError):
            pk.Entry.parse(forged).messages(max_uncompressed_size=1 << 62)


@settings(max_examples=200, deadline=None)
@given(
    codec=st.sampled_from(["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"]),
    size=st.integers(min_value=-(2**70), max_value=2**70),
    limit=st.one_of(st.just(pk.codec.entry.DEFAULT_DECOMPRESSION_LIMIT), st.integers(-(2**70), 2**70)),
)
def test_decompress_takes_any_integer_size_or_limit_with_a_typed_error(codec: str, size: int, limit: int) -> None:
    """Issue 21 item 6: a negative or huge size or limit was an OverflowError from the conversion."""
    try:
        out = pk.decompress(codec, pk.compress(codec, b"abc"), size, limit)
    except pk.PulsarkitError:
        return
    assert out == b"abc" and (size == 3 or codec == "NONE")  # NONE has no declared size to check


def test_an_encrypted_entry_never_passes_its_ciphertext_for_clear_text() -> None:
    """Issue 21 item 9: messages() of an encrypted batch returned the ciphertext as message payloads."""
    md = pk.message_metadata("p", 5, 1_700_000_000_000, partition_key="k1", encryption_algo="RSA")
    ek = md.encryption_keys.add(key="myapp.key", value=b"\x01" * 32)
    ek.metadata.add(key="v", value="1")
    md.encryption_param = b"\x02" * 12
    md.properties.add(key="a", value="b")
    ciphertext = b"\x9f" * 40  # stands for the encrypted, then compressed, batch
    md.num_messages_in_batch = 3
    md.compression = 1  # LZ4: not decompressible before decryption
    md.uncompressed_size = 999
    raw = pk.add_broker_entry_metadata(pk.encode_entry(md, ciphertext), broker_timestamp=7, index=12)
    e = pk.Entry.parse(raw)
    assert e.is_encrypted
    with pytest.raises(pk.errors.EncryptedMessageError, match=r"myapp.key.*RSA.*ciphertext=True") as err:
        e.messages()
    assert isinstance(err.value, pk.PulsarkitError)
    (m,) = e.messages(ciphertext=True)
    assert (m.encrypted, m.encryption_keys, m.encryption_algo) == (True, ("myapp.key",), "RSA")
    assert (m.payload, m.key, m.batch_index, m.batch_size, m.sequence_id) == (ciphertext, "k1", -1, 3, 5)
    assert (m.properties, m.index, m.broker_timestamp) == ({"a": "b"}, 12, 7)
    clear = pk.Entry.parse(pk.encode_batch(pk.message_metadata("p", 0, 1), [b"x"]))
    assert not clear.is_encrypted and not clear.messages()[0].encrypted
