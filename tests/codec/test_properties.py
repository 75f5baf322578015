"""Property-based tests (hypothesis): every encoder/decoder pair round-trips, the bulk kernels agree
with the single-entry API row by row, and arbitrary or mutated bytes only ever raise PulsarkitError."""

from __future__ import annotations

import os
import struct
import zlib

import crc32c as crc32c_ref
import pulsarkit as pk
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulsarkit import _native
from pulsarkit.proto import BaseCommand, BrokerEntryMetadata

CODECS = ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"]
U64 = 2**64

# These counts keep the file around ten seconds on two shared cores (the limit is a minute);
# PULSARKIT_PROPERTY_SCALE=N multiplies them for a deeper local run.
SCALE = int(os.environ.get("PULSARKIT_PROPERTY_SCALE", "1"))
_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large]
FAST = settings(max_examples=400 * SCALE, deadline=None, suppress_health_check=_CHECKS)
MEDIUM = settings(max_examples=150 * SCALE, deadline=None, suppress_health_check=_CHECKS)

u64 = st.integers(0, U64 - 1)
texts = st.text(max_size=10)
payloads = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=8), st.integers(0, 80)),
)
props = st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3)

message_dicts = st.fixed_dictionaries(
    {"payload": payloads},
    optional={
        "key": st.none() | texts,
        "ordering_key": st.none() | st.binary(max_size=8),
        "properties": props,
        "event_time": st.none() | st.integers(1, U64 - 1),
        "sequence_id": st.none() | st.integers(0, 2**63),
        "null_value": st.booleans(),
        "compacted_out": st.booleans(),
        "partition_key_b64_encoded": st.booleans(),
        "null_partition_key": st.booleans(),
    },
)
batch_messages = st.lists(st.one_of(payloads, message_dicts), min_size=1, max_size=6)


@st.composite
def metadatas(draw):
    fields = {}
    if draw(st.booleans()):
        fields["partition_key"] = draw(texts)
    if draw(st.booleans()):
        fields["properties"] = draw(props)
    if draw(st.booleans()):
        fields["event_time"] = draw(st.integers(1, U64 - 1))
    if draw(st.booleans()):
        fields["ordering_key"] = draw(st.binary(max_size=8))
    return pk.message_metadata(draw(texts), draw(st.integers(0, 2**63)), draw(st.integers(1, U64 - 1)), **fields)


@st.composite
def entries(draw):
    """A valid entry: single or batched, any codec, with or without checksum and broker entry metadata."""
    md = draw(metadatas())
    checksum = draw(st.booleans())
    if draw(st.booleans()):
        e = pk.encode_batch(md, draw(batch_messages), compression=draw(st.sampled_from(CODECS)), checksum=checksum)
    else:
        e = pk.encode_entry(
            md, draw(payloads), checksum=checksum, compression=draw(st.none() | st.sampled_from(CODECS))
        )
    if draw(st.booleans()):
        e = pk.add_broker_entry_metadata(e, draw(st.none() | u64), draw(st.none() | u64))
    return e


BOUNDARY_U32 = [0, 1, 4, 0x7F, 0x80, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


@st.composite
def corrupted(draw, base=entries()):
    """A valid entry with 0-3 mutations: bit flips, byte sets, truncations, extensions, boundary lengths."""
    e = bytearray(draw(base))
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["flip", "set", "truncate", "extend", "length", "varint"]))
        pos = draw(st.integers(0, max(len(e) - 1, 0)))
        if op == "flip" and e:
            e[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and e:
            e[pos] = draw(st.integers(0, 255))
        elif op == "truncate":
            del e[pos:]
        elif op == "extend":
            e += draw(st.binary(min_size=1, max_size=16))
        elif op == "length":
            e[pos : pos + 4] = struct.pack(">I", draw(st.sampled_from(BOUNDARY_U32)))
        elif op == "varint":
            e[pos : pos + 5] = draw(
                st.sampled_from([b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x08", b"\x00", b"\x7f"])
            )
    return bytes(e)


def expect_typed(fn, *args, **kw):
    """Runs fn; returns its result, or the PulsarkitError it raised (anything else fails the test)."""
    try:
        return fn(*args, **kw)
    except pk.PulsarkitError as e:
        if isinstance(e, pk.ChecksumMismatchError):
            assert isinstance(e.stored, int) and isinstance(e.computed, int) and e.stored != e.computed
        if isinstance(e, pk.CorruptEntryError) and not isinstance(e, pk.DecompressionError):
            assert isinstance(e.offset, int), f"{type(e).__name__} without an offset: {e}"
            if args and isinstance(args[0], (bytes, bytearray)):
                assert 0 <= e.offset <= len(args[0]), (e.offset, len(args[0]), str(e))
        return e


# --------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------


@FAST
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_crc32c_resume_and_reference(a, b):
    assert pk.crc32c(a + b) == pk.crc32c(b, pk.crc32c(a))
    assert pk.crc32c(a + b) == crc32c_ref.crc32c(a + b)


@FAST
@given(st.sampled_from(CODECS), payloads)
def test_codecs_round_trip(codec, data):
    z = pk.compress(codec, data)
    assert pk.decompress(codec, z, len(data)) == data
    if codec == "NONE":
        assert z == data
        return
    with pytest.raises(pk.DecompressionError):
        pk.decompress(codec, z, len(data) + 1)
    if data:
        with pytest.raises(pk.DecompressionError):
            pk.decompress(codec, z, len(data) - 1)
        with pytest.raises(pk.LimitExceededError):
            pk.decompress(codec, z, len(data), limit=len(data) - 1)
    if codec == "ZLIB":
        # A complete zlib stream (C++ client form) that the standard library also reads ...
        assert zlib.decompress(z) == data
        # ... and the Java client's form: sync-flushed, no final block, no Adler-32.
        c = zlib.compressobj()
        java = c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)
        assert java.endswith(b"\x00\x00\xff\xff")
        assert pk.decompress("ZLIB", java, len(data)) == data


@FAST
@given(metadatas(), payloads, st.booleans(), st.none() | st.sampled_from(CODECS))
def test_single_entry_round_trip(md, data, checksum, compression):
    e = pk.Entry.parse(pk.encode_entry(md, data, checksum=checksum, compression=compression))
    assert (e.checksum is not None) == checksum
    assert not e.is_batch and e.num_messages == 1
    assert e.metadata.producer_name == md.producer_name
    assert e.metadata.sequence_id == md.sequence_id and e.metadata.publish_time == md.publish_time
    assert e.metadata.uncompressed_size == len(data)
    assert e.compression == (compression or "NONE")
    (m,) = e.messages()
    assert m.payload == data and m.batch_index == -1
    assert m.key == (md.partition_key if md.HasField("partition_key") else None)
    assert m.properties == {kv.key: kv.value for kv in md.properties}
    assert m.event_time == (md.event_time or None)
    assert m.ordering_key == (md.ordering_key if md.HasField("ordering_key") else None)
    if compression in (None, "NONE"):
        assert e.payload == data


@MEDIUM
@given(metadatas(), batch_messages, st.sampled_from(CODECS), st.booleans())
def test_batch_round_trip(md, msgs, compression, checksum):
    e = pk.Entry.parse(pk.encode_batch(md, msgs, compression=compression, checksum=checksum))
    assert e.is_batch and e.num_messages == len(msgs) and e.compression == compression
    got = e.messages(include_compacted_out=True)
    assert len(got) == len(msgs)
    for i, (m, spec) in enumerate(zip(got, msgs)):
        spec = {"payload": spec} if isinstance(spec, bytes) else spec
        assert m.batch_index == i and m.batch_size == len(msgs)
        assert m.payload == spec["payload"]
        assert m.key == spec.get("key")
        assert m.ordering_key == spec.get("ordering_key")
        assert m.properties == (spec.get("properties") or {})
        # encode_batch writes no zero event time; a message without one keeps the entry's (MessageImpl.create)
        assert m.event_time == (spec.get("event_time") or md.event_time or None)
        seq = spec.get("sequence_id")
        assert m.sequence_id == (seq if seq is not None else md.sequence_id + i)
        for flag in ("null_value", "compacted_out", "partition_key_b64_encoded", "null_partition_key"):
            assert getattr(m, flag) == bool(spec.get(flag))
        assert m.producer_name == md.producer_name and m.publish_time == md.publish_time
    # The consumer's view drops compacted-out records and keeps the order.
    assert e.messages() == [m for m in got if not m.compacted_out]


def _java_long(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


@FAST
@given(entries(), st.none() | u64, st.none() | u64)
def test_broker_entry_metadata_add_peek_strip(entry, ts, index):
    base = pk.strip_broker_entry_metadata(entry)
    added = pk.add_broker_entry_metadata(base, ts, index)
    bem = BrokerEntryMetadata()
    if ts is not None:
        bem.broker_timestamp = ts
    if index is not None:
        bem.index = index
    assert len(added) == len(base) + 6 + bem.ByteSize()
    assert pk.strip_broker_entry_metadata(added) == base
    assert pk.peek_broker_entry_metadata(added) == pk.BrokerEntryMetadata(ts, index)
    assert pk.peek_broker_entry_metadata(base) is None
    with pytest.raises(pk.CorruptEntryError):
        pk.add_broker_entry_metadata(added, ts, index)
    e, b = pk.Entry.parse(added), pk.Entry.parse(base)
    assert e.metadata == b.metadata and e.headers_and_payload == base
    assert e.entry_timestamp == (ts if ts is not None else b.metadata.publish_time)
    msgs = e.messages(include_compacted_out=True)
    for m in msgs:
        assert m.broker_timestamp == ts
        if index is None:
            assert m.index is None
        elif e.is_batch:  # PIP-70, in Java's long arithmetic (the stored uint64 read as a signed long)
            assert m.index == _java_long(index - e.num_messages + m.batch_index + 1)
        else:
            assert m.index == _java_long(index)


frame_specs = st.lists(
    st.one_of(
        st.builds(lambda: ("PING", {}, None)),
        st.builds(
            lambda p, s, hp: ("SEND", {"producer_id": p, "sequence_id": s}, hp),
            u64,
            u64,
            st.none() | st.binary(min_size=1, max_size=200),
        ),
        st.builds(
            lambda c, n: ("FLOW", {"consumer_id": c, "messagePermits": n}, None),
            u64,
            st.integers(0, 2**32 - 1),
        ),
    ),
    max_size=6,
)


@FAST
@given(frame_specs, st.lists(st.integers(0, 10**6), max_size=8))
def test_frames_survive_any_split(specs, cuts):
    cmds = [(pk.command(t, **f), hp) for t, f, hp in specs]
    stream = b"".join(pk.encode_command(c, hp) for c, hp in cmds)
    points = sorted(c % (len(stream) + 1) for c in cuts) + [len(stream)]
    d, got, prev = pk.FrameDecoder(), [], 0
    for p in points:
        got += d.feed(stream[prev:p])
        prev = p
    assert d.buffered == 0
    assert [(c.SerializeToString(), hp) for c, hp in got] == [(c.SerializeToString(), hp) for c, hp in cmds]


# --------------------------------------------------------------------------------------------
# Bulk kernels agree with the single-entry API, row by row
# --------------------------------------------------------------------------------------------

ARROW_TYPES = [pa.binary(), pa.large_binary(), pa.binary_view()]


def _single_messages(row, include, verify):
    try:
        return pk.Entry.parse(row, verify_checksum=verify).messages(include_compacted_out=include)
    except pk.PulsarkitError as e:
        return e


def _framing_fails(row):
    """True when the native framing/metadata scan (what decode_metadata shares with Entry.parse) refuses."""
    try:
        _native.parse_entry_layout(row, False)
        return False
    except pk.PulsarkitError:
        return True


@MEDIUM
@given(
    st.lists(st.none() | entries() | corrupted(), max_size=5),
    st.sampled_from(ARROW_TYPES),
    st.booleans(),
    st.booleans(),
)
def test_bulk_kernels_agree_with_single_entry(rows, typ, include, verify):
    arr = pa.array(rows, typ)
    n = len(rows)

    ex = pk.bulk.explode_messages(arr, include_compacted_out=include, verify_checksum=verify).to_pydict()
    by_entry: dict[int, list[int]] = {}
    for r, i in enumerate(ex["entry_index"]):
        by_entry.setdefault(i, []).append(r)
    # Rows come out in input order; an entry may have no messages left (all compacted out, or an
    # empty batch), but a null or corrupt entry always keeps exactly one row.
    assert ex["entry_index"] == sorted(ex["entry_index"]) and set(by_entry) <= set(range(n))
    for i, row in enumerate(rows):
        out = by_entry.get(i, [])
        if row is None:
            assert len(out) == 1 and ex["error"][out[0]] is None and ex["payload"][out[0]] is None
            continue
        single = _single_messages(row, include, verify)
        if isinstance(single, Exception):
            assert len(out) == 1 and ex["error"][out[0]] is not None and ex["batch_index"][out[0]] is None, (
                single,
                ex["error"][out[0]],
            )
            continue
        assert len(out) == len(single), (row.hex(), single, [ex["error"][r] for r in out])
        for r, m in zip(out, single):
            assert ex["error"][r] is None
            assert ex["payload"][r] == m.payload and ex["batch_index"][r] == m.batch_index
            assert ex["key"][r] == m.key and ex["ordering_key"][r] == m.ordering_key
            assert dict(ex["properties"][r]) == m.properties
            assert ex["event_time"][r] == (
                None if m.event_time is None else m.event_time - (U64 if m.event_time >= 2**63 else 0)
            )
            assert ex["sequence_id"][r] % U64 == m.sequence_id and ex["publish_time"][r] % U64 == m.publish_time
            assert ex["null_value"][r] == m.null_value and ex["compacted_out"][r] == m.compacted_out
            assert (ex["index"][r] is None) == (m.index is None)
            if m.index is not None:
                assert ex["index"][r] % U64 == m.index % U64
            assert (ex["broker_timestamp"][r] is None) == (m.broker_timestamp is None)

    dm = pk.bulk.decode_metadata(arr).to_pydict()
    assert len(dm["error"]) == n
    for i, row in enumerate(rows):
        if row is None:
            assert dm["error"][i] is None and dm["sequence_id"][i] is None
            continue
        if dm["error"][i] is not None:
            continue
        assert not _framing_fails(row)
        e = expect_typed(pk.Entry.parse, row, verify_checksum=False)
        if isinstance(e, Exception):
            continue  # the lazy scan does not descend into nested messages Entry.parse decodes
        assert dm["producer_name"][i] == e.metadata.producer_name
        assert dm["sequence_id"][i] % U64 == e.metadata.sequence_id
        assert dm["publish_time"][i] % U64 == e.metadata.publish_time
        assert dm["num_messages"][i] == e.num_messages and dm["is_batch"][i] == e.is_batch
        assert dm["compression"][i] == e.compression
        assert dm["uncompressed_size"][i] == e.metadata.uncompressed_size
        assert dm["payload_size"][i] == len(e.payload)
        assert dm["has_checksum"][i] == (e.checksum is not None)
        bem = e.broker_entry_metadata
        assert (dm["broker_timestamp"][i] is None) == (bem is None or bem.broker_timestamp is None)
    for i, row in enumerate(rows):
        if row is not None and _framing_fails(row):
            assert dm["error"][i] is not None

    vc = pk.bulk.verify_checksums(arr).to_pydict()
    pb = pk.bulk.peek_broker_entry_metadata(arr).to_pydict()
    sb = pk.bulk.strip_broker_entry_metadata(arr).to_pydict()
    for i, row in enumerate(rows):
        if row is None:
            assert vc["error"][i] is None and pb["error"][i] is None and sb["entry"][i] is None
            continue
        # strip only locates the prefix; peek also decodes it, so it can fail where strip does not.
        stripped = expect_typed(pk.strip_broker_entry_metadata, row)
        if isinstance(stripped, Exception):
            assert sb["error"][i] == str(stripped) and sb["entry"][i] is None
        else:
            assert sb["error"][i] is None and sb["entry"][i] == stripped
        peek = expect_typed(pk.peek_broker_entry_metadata, row)
        if isinstance(peek, Exception):
            assert pb["error"][i] == str(peek)
        else:
            assert pb["error"][i] is None
            ts = None if peek is None else peek.broker_timestamp
            assert (pb["broker_timestamp"][i] is None and ts is None) or pb["broker_timestamp"][i] % U64 == ts
        parsed = expect_typed(pk.Entry.parse, row, verify_checksum=True)
        if isinstance(parsed, pk.ChecksumMismatchError):
            assert vc["has_checksum"][i] is True and vc["checksum_ok"][i] is False
        elif not isinstance(parsed, Exception):
            assert vc["error"][i] is None and vc["has_checksum"][i] == (parsed.checksum is not None)
            assert vc["checksum_ok"][i] == (True if parsed.checksum is not None else None)


# --------------------------------------------------------------------------------------------
# Garbage: success or a PulsarkitError subclass, nothing else, never a crash
# --------------------------------------------------------------------------------------------


def _exercise_entry(data):
    e = expect_typed(pk.Entry.parse, data)
    if not isinstance(e, Exception):
        repr(e)
        _ = (e.payload, e.headers_and_payload, e.is_batch, e.num_messages, e.compression, e.entry_timestamp)
        for include in (False, True):
            msgs = expect_typed(e.messages, include_compacted_out=include)
            if not isinstance(msgs, Exception):
                assert all(isinstance(m.payload, bytes) for m in msgs)
    expect_typed(pk.Entry.parse, data, verify_checksum=False)
    expect_typed(pk.peek_broker_entry_metadata, data)
    expect_typed(pk.strip_broker_entry_metadata, data)
    for codec in CODECS:
        for size in (0, 1, len(data), 4 * len(data) + 7):
            expect_typed(pk.decompress, codec, data, size, limit=1 << 16)
    arr = pa.array([data, None, data[: len(data) // 2]], pa.binary())
    for kernel in (
        pk.bulk.verify_checksums,
        pk.bulk.peek_broker_entry_metadata,
        pk.bulk.strip_broker_entry_metadata,
    ):
        assert kernel(arr).num_rows == 3
    assert pk.bulk.decode_metadata(arr, verify_checksum=True).num_rows == 3
    assert pk.bulk.explode_messages(arr, include_compacted_out=True).num_rows >= 3


@FAST
@given(st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_typed_errors(data):
    _exercise_entry(data)


@MEDIUM
@given(corrupted())
def test_mutated_entries_raise_only_typed_errors(data):
    _exercise_entry(data)


@FAST
@given(st.lists(st.binary(max_size=64), max_size=6), st.integers(8, 1 << 12))
def test_frame_decoder_garbage_raises_only_typed_errors(chunks, max_frame):
    d = pk.FrameDecoder(max_frame_size=max_frame)
    failed = None
    for c in chunks + [b""]:
        try:
            for cmd, hp in d.feed(c):
                assert isinstance(cmd, BaseCommand) and (hp is None or isinstance(hp, bytes))
            assert failed is None, "a failed decoder must stay failed"
        except pk.PulsarkitError as e:
            assert failed is None or type(e) is type(failed)
            failed = e


def _sample_stream() -> bytes:
    md = pk.message_metadata("prod", 1, 1000)
    return b"".join(
        [
            pk.encode_command(pk.command("PING")),
            pk.encode_command(pk.command("SEND", producer_id=1, sequence_id=1), pk.encode_entry(md, b"hello")),
            pk.encode_command(pk.command("FLOW", consumer_id=2, messagePermits=10)),
            pk.encode_command(
                pk.command("SEND", producer_id=1, sequence_id=2), pk.encode_batch(md, [b"a", b"bb"], "LZ4")
            ),
            pk.encode_command(pk.command("PONG")),
        ]
    )


_SAMPLE_STREAM = _sample_stream()


@MEDIUM
@given(corrupted(st.just(_SAMPLE_STREAM)), st.lists(st.integers(0, 10**6), max_size=6))
def test_corrupted_streams_give_the_same_result_for_any_split(stream, cuts):
    """Whole or in pieces, a (possibly corrupt) stream yields the same frames and the same error."""
    whole = _drain(pk.FrameDecoder(max_frame_size=1 << 16), [stream])
    points = sorted(c % (len(stream) + 1) for c in cuts)
    pieces, prev = [], 0
    for p in points + [len(stream)]:
        pieces.append(stream[prev:p])
        prev = p
    split = _drain(pk.FrameDecoder(max_frame_size=1 << 16), pieces)
    assert whole == split


def _drain(d, pieces):
    frames = []
    for p in pieces + [b""]:
        try:
            frames += [(c.SerializeToString(), hp) for c, hp in d.feed(p)]
        except pk.PulsarkitError as e:
            return frames, type(e).__name__, getattr(e, "offset", None)
    return frames, None, None
