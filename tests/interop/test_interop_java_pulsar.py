"""Interop with the real pulsar-common (Java): CRC32C, entry framing, batches, codecs, PIP-70 and SEND frames.

One JVM (``tests/java/pulsar-oracle``, see ``tests/oracle.py``) serves the whole session. Each test runs
pulsar-common's own code on one side and pulsarkit on the other, in both directions, and compares bytes
where the formats are deterministic (framing, metadata, BEM, frames) and decoded content where they are not
(compressed bytes may legitimately differ between codec implementations).
"""

from __future__ import annotations

import zlib
from typing import Any

import pulsarkit as pk
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import JavaError, PulsarOracle
from pulsarkit.proto import MessageMetadata

pytestmark = pytest.mark.interop

H = bytes.fromhex
CODECS = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")
CODEC_NUMBER = {name: i for i, name in enumerate(CODECS)}

# Every example makes JVM round trips; keep counts bounded and drop the per-example deadline.
FEW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SOME = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@pytest.fixture(scope="session")
def pulsar_oracle():
    with PulsarOracle() as oracle:
        yield oracle


# --- MessageMetadata as JSON: the shape the Java harness reads and writes ----------------------------------


def md_from_json(d: dict[str, Any]) -> Any:
    """A pulsarkit MessageMetadata from a description (bytes as bytes or hex, properties as pairs or dict)."""
    md = MessageMetadata()
    for k, v in d.items():
        f = md.DESCRIPTOR.fields_by_name[k]
        if k == "properties":
            for key, value in v.items() if isinstance(v, dict) else v:
                kv = md.properties.add()
                kv.key, kv.value = key, value
        elif k == "encryption_keys":
            for ek in v:
                e = md.encryption_keys.add(key=ek["key"], value=_bytes(ek["value"]))
                for key, value in ek.get("metadata", []):
                    e.metadata.add(key=key, value=value)
        elif k == "compression":
            md.compression = CODEC_NUMBER[v] if isinstance(v, str) else v
        elif f.type == f.TYPE_BYTES:
            setattr(md, k, _bytes(v))
        elif _repeated(f):
            getattr(md, k).extend(v)
        else:
            setattr(md, k, v)
    return md


def _repeated(f: Any) -> bool:
    # protobuf 6+ has is_repeated; older releases only the label.
    return f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED


def _bytes(v: bytes | str) -> bytes:
    return H(v) if isinstance(v, str) else bytes(v)


def _pairs(kvs: Any) -> list[list[str]]:
    return [[kv.key, kv.value] for kv in kvs]


def md_json(md: Any) -> dict[str, Any]:
    """The harness's JSON view of a MessageMetadata: present fields only, bytes as hex, enums as numbers."""
    out: dict[str, Any] = {}
    for f, v in md.ListFields():
        if f.name == "properties":
            out[f.name] = _pairs(v)
        elif f.name == "encryption_keys":
            out[f.name] = [
                {
                    "key": e.key,
                    "value": e.value.hex(),
                    **({"metadata": _pairs(e.metadata)} if len(e.metadata) else {}),
                }
                for e in v
            ]
        elif f.type == f.TYPE_BYTES:
            out[f.name] = v.hex()
        elif _repeated(f):
            out[f.name] = list(v)
        else:
            out[f.name] = int(v) if f.type == f.TYPE_ENUM else v
    return out


# --- messages, normalised to what a consumer sees -----------------------------------------------------------


def norm_pk(m: pk.Message) -> dict[str, Any]:
    return {
        "payload": m.payload,
        "key": m.key,
        "ordering_key": m.ordering_key,
        "properties": dict(m.properties),
        "event_time": m.event_time or None,
        "sequence_id": m.sequence_id,
        "null_value": m.null_value,
        "null_partition_key": m.null_partition_key,
        "b64": m.partition_key_b64_encoded,
        "compacted_out": m.compacted_out,
    }


def norm_java(m: dict[str, Any], entry_sequence_id: int) -> dict[str, Any]:
    """Java's raw record fields with the consumer's rules applied (absent sequence id -> the entry's)."""
    return {
        "payload": H(m["payload"]),
        "key": m["key"],
        "ordering_key": None if m["ordering_key"] is None else H(m["ordering_key"]),
        "properties": dict(m["properties"]),  # a consumer sees a map: last duplicate wins
        "event_time": m["event_time"] or None,
        "sequence_id": entry_sequence_id if m["sequence_id"] is None else m["sequence_id"],
        "null_value": m["null_value"],
        "null_partition_key": m["null_partition_key"],
        "b64": m["partition_key_b64_encoded"],
        "compacted_out": m["compacted_out"],
    }


def norm_input(m: dict[str, Any], sequence_id: int) -> dict[str, Any]:
    return {
        "payload": m["payload"],
        "key": m.get("key"),
        "ordering_key": m.get("ordering_key"),
        "properties": dict(m.get("properties", {})),
        "event_time": m.get("event_time") or None,
        "sequence_id": sequence_id,
        "null_value": m.get("null_value", False),
        "null_partition_key": m.get("null_partition_key", False),
        "b64": m.get("partition_key_b64_encoded", False),
        "compacted_out": m.get("compacted_out", False),
    }


# --- strategies ---------------------------------------------------------------------------------------------

TEXT = st.text(max_size=10)
BYTES = st.binary(max_size=12)
# LightProto writes uint32 values >= 2^31 sign-extended (10 bytes); see test_uint32_above_2_31.
U32 = st.integers(0, 2**31 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
U64 = st.integers(0, 2**64 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
NON_NEG_LONG = st.integers(0, 2**63 - 1)
PAIRS = st.lists(st.tuples(TEXT, TEXT), max_size=3)

METADATA_OPTIONAL = {
    "properties": PAIRS,
    "replicated_from": TEXT,
    "partition_key": TEXT,
    "replicate_to": st.lists(TEXT, max_size=2),
    "compression": st.integers(0, 4),
    "num_messages_in_batch": I32,
    "event_time": U64,
    "encryption_keys": st.lists(
        st.fixed_dictionaries({"key": TEXT, "value": BYTES}, optional={"metadata": PAIRS}), max_size=2
    ),
    "encryption_algo": TEXT,
    "encryption_param": BYTES,
    "schema_version": BYTES,
    "partition_key_b64_encoded": st.booleans(),
    "ordering_key": BYTES,
    "deliver_at_time": I64,
    "marker_type": I32,
    "txnid_least_bits": U64,
    "txnid_most_bits": U64,
    "highest_sequence_id": U64,
    "null_value": st.booleans(),
    "uuid": TEXT,
    "num_chunks_from_msg": I32,
    "total_chunk_msg_size": I32,
    "chunk_id": I32,
    "null_partition_key": st.booleans(),
    "compacted_batch_indexes": st.lists(I32, max_size=3),
    "schema_id": BYTES,
}
# uncompressed_size is always present: pulsarkit's encode_entry fills it in when absent, as the producer does.
METADATA = st.fixed_dictionaries(
    {"producer_name": TEXT, "sequence_id": U64, "publish_time": U64, "uncompressed_size": U32},
    optional=METADATA_OPTIONAL,
)

# Random bytes and highly repetitive ones, so every codec both stores and really compresses.
PAYLOAD = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda unit, n: unit * n, st.binary(min_size=1, max_size=8), st.integers(1, 400)),
)

# Flags only when set: both producers omit a false flag, so records stay byte-comparable.
MESSAGE = st.fixed_dictionaries(
    {"payload": PAYLOAD},
    optional={
        "key": TEXT,
        "ordering_key": BYTES,
        "properties": st.dictionaries(TEXT, TEXT, max_size=3),
        "event_time": st.integers(1, 2**64 - 1),
        "null_value": st.just(True),
        "partition_key_b64_encoded": st.just(True),
        "null_partition_key": st.just(True),
        "compacted_out": st.just(True),
    },
)
BATCH_METADATA = st.fixed_dictionaries(
    {"producer_name": TEXT, "sequence_id": st.integers(0, 2**63), "publish_time": U64},
    optional={"partition_key": TEXT, "ordering_key": BYTES, "schema_version": BYTES, "replicated_from": TEXT},
)
BATCH = st.tuples(BATCH_METADATA, st.lists(MESSAGE, min_size=1, max_size=8))
BEM = st.tuples(st.none() | U64, st.none() | U64).filter(lambda b: b != (None, None))


def expected_messages(md_desc: dict[str, Any], msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [norm_input(m, md_desc["sequence_id"] + i) for i, m in enumerate(msgs)]


# --- CRC32C -------------------------------------------------------------------------------------------------


def test_oracle_is_pulsar_common_4(pulsar_oracle):
    info = pulsar_oracle.call("info")
    assert info["pulsar_common_version"].startswith("4.")
    with pytest.raises(JavaError, match="unknown op"):
        pulsar_oracle.call("noSuchOp")


def test_crc32c_vectors(pulsar_oracle):
    for data, want in [
        (b"data", 0xAED87DD1),
        (b"123456789", 0xE3069283),
        (b"datadata", 0x9E84FA2F),
        (b"", 0),
    ]:
        assert pulsar_oracle.call("crc32c", parts=[data])["crc"] == want == pk.crc32c(data)
    resumed = pulsar_oracle.call("crc32c", parts=[b"data", b"data"])
    assert resumed["steps"] == [0xAED87DD1, 0x9E84FA2F]
    assert pk.crc32c(b"data", pk.crc32c(b"data")) == 0x9E84FA2F
    big = bytes(range(256)) * 4096 + b"tail"  # 1 MiB: the wide SIMD paths on both sides
    assert pulsar_oracle.call("crc32c", parts=[big])["crc"] == pk.crc32c(big)


@SOME
@given(parts=st.lists(st.binary(max_size=2048), min_size=1, max_size=4))
def test_crc32c_resume_matches(pulsar_oracle, parts):
    steps = pulsar_oracle.call("crc32c", parts=parts)["steps"]
    crc = 0
    ours = []
    for i, p in enumerate(parts):
        crc = pk.crc32c(p) if i == 0 else pk.crc32c(p, crc)
        ours.append(crc)
    assert steps == ours
    assert steps[-1] == pk.crc32c(b"".join(parts))


# --- [0x0e01][crc][size][MessageMetadata][payload] ------------------------------------------------------------


def test_worked_example_matches_java(pulsar_oracle):
    desc = {"producer_name": "p", "sequence_id": 0, "publish_time": 1000, "uncompressed_size": 2}
    want = H("0e019be0d6b30000000a0a0170100018e80748026869")
    assert H(pulsar_oracle.call("serializeMetadataAndPayload", metadata=desc, payload=b"hi")) == want
    assert pk.encode_entry(md_from_json(desc), b"hi") == want
    frame = H(pulsar_oracle.call("newSend", producer_id=1, sequence_id=0, metadata=desc, payload=b"hi"))
    assert frame == H("00000022000000080806320408011000") + want
    assert pk.encode_command(pk.command("SEND", producer_id=1, sequence_id=0), want) == frame


@SOME
@given(desc=METADATA, payload=st.binary(max_size=200), checksum=st.booleans())
def test_serialize_metadata_and_payload_byte_identical(pulsar_oracle, desc, payload, checksum):
    java = H(pulsar_oracle.call("serializeMetadataAndPayload", metadata=desc, payload=payload, checksum=checksum))
    ours = pk.encode_entry(md_from_json(desc), payload, checksum=checksum)
    assert ours == java
    want = md_json(md_from_json(desc))
    back = pulsar_oracle.call("decodeEntry", data=ours, metadata_only=True)
    assert back["metadata"] == want
    assert back["has_checksum"] is checksum
    assert back.get("checksum_ok", True)
    e = pk.Entry.parse(java)
    assert md_json(e.metadata) == want
    assert e.payload == payload
    assert (e.checksum is not None) is checksum


def test_checksum_mismatch_seen_by_both(pulsar_oracle):
    md = {"producer_name": "p", "sequence_id": 3, "publish_time": 1000, "uncompressed_size": 5}
    good = H(pulsar_oracle.call("serializeMetadataAndPayload", metadata=md, payload=b"hello"))
    bad = good[:-1] + bytes([good[-1] ^ 1])
    assert pulsar_oracle.call("decodeEntry", data=good)["checksum_ok"] is True
    assert pulsar_oracle.call("decodeEntry", data=bad)["checksum_ok"] is False
    pk.Entry.parse(good)
    with pytest.raises(pk.ChecksumMismatchError):
        pk.Entry.parse(bad)
    assert pk.Entry.parse(bad, verify_checksum=False).messages()[0].payload == b"helln"


def test_uint32_above_2_31(pulsar_oracle):
    """LightProto writes a uint32 >= 2^31 sign-extended as a 10-byte varint; protobuf writes 5 bytes. Both read
    either form as the same value, so entries stay interchangeable (the byte tests keep below 2^31)."""
    desc = {"producer_name": "p", "sequence_id": 0, "publish_time": 0, "uncompressed_size": 2**31}
    java = H(pulsar_oracle.call("serializeMetadataAndPayload", metadata=desc, payload=b"", checksum=False))
    assert java.endswith(bytes.fromhex("48 80 80 80 80 f8 ff ff ff ff 01"))
    ours = pk.encode_entry(md_from_json(desc), b"", checksum=False)
    assert ours.endswith(bytes.fromhex("48 80 80 80 80 08"))
    assert pk.Entry.parse(java).metadata.uncompressed_size == 2**31
    assert pulsar_oracle.call("decodeEntry", data=ours, metadata_only=True)["metadata"]["uncompressed_size"] == 2**31


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_batch_rejected_by_both(pulsar_oracle, codec):
    md = {"producer_name": "p", "sequence_id": 0, "publish_time": 1000}
    msgs = [{"payload": b"payload-%d " % i * 30} for i in range(6)]
    r = pulsar_oracle.call("encodeBatch", metadata=md, messages=msgs, compression=codec, checksum=False)
    cut = H(r["entry"])[:-7]
    with pytest.raises(JavaError):
        pulsar_oracle.call("decodeEntry", data=cut)
    with pytest.raises(pk.PulsarkitError) as err:
        pk.Entry.parse(cut).messages()
    assert isinstance(err.value, (pk.CorruptEntryError, pk.DecompressionError))


# --- single (non-batched) messages, every codec, both directions --------------------------------------------


SINGLE_METADATA = st.fixed_dictionaries(
    {"producer_name": TEXT, "sequence_id": U64, "publish_time": U64},
    optional={
        "partition_key": TEXT,
        "ordering_key": BYTES,
        "properties": PAIRS,
        "event_time": st.integers(1, 2**64 - 1),
        "null_value": st.booleans(),
        "partition_key_b64_encoded": st.booleans(),
        "null_partition_key": st.booleans(),
    },
)


def _single_expected(desc: dict[str, Any], payload: bytes) -> dict[str, Any]:
    return {
        "payload": payload,
        "key": desc.get("partition_key"),
        "ordering_key": desc.get("ordering_key"),
        "properties": dict(desc.get("properties", [])),
        "event_time": desc.get("event_time"),
        "sequence_id": desc["sequence_id"],
        "null_value": desc.get("null_value", False),
        "null_partition_key": desc.get("null_partition_key", False),
        "b64": desc.get("partition_key_b64_encoded", False),
        "compacted_out": False,
    }


@pytest.mark.parametrize("codec", CODECS)
@FEW
@given(desc=SINGLE_METADATA, payload=PAYLOAD, bem=st.none() | BEM)
def test_java_single_message_decodes_in_pulsarkit(pulsar_oracle, codec, desc, payload, bem):
    body = H(pulsar_oracle.call("compress", codec=codec, data=payload))
    desc = {**desc, "uncompressed_size": len(payload), **({"compression": codec} if codec != "NONE" else {})}
    entry = H(pulsar_oracle.call("serializeMetadataAndPayload", metadata=desc, payload=body))
    if bem:
        entry = H(pulsar_oracle.call("addBrokerEntryMetadata", data=entry, broker_timestamp=bem[0], index=bem[1]))
    e = pk.Entry.parse(entry)
    assert not e.is_batch and e.compression == codec
    assert e.broker_entry_metadata == (pk.BrokerEntryMetadata(*bem) if bem else None)
    (m,) = e.messages()
    assert norm_pk(m) == _single_expected(desc, payload)
    # a message's index is Java's long (MessageImpl.getIndex): the stored uint64 read as signed
    assert m.index == (None if not bem or bem[1] is None else (bem[1] + 2**63) % 2**64 - 2**63)
    assert m.broker_timestamp == (bem[0] if bem else None)


@pytest.mark.parametrize("codec", CODECS)
@FEW
@given(desc=SINGLE_METADATA, payload=PAYLOAD, bem=st.none() | BEM)
def test_pulsarkit_single_message_decodes_in_java(pulsar_oracle, codec, desc, payload, bem):
    entry = pk.encode_entry(md_from_json(desc), payload, compression=codec)
    if bem:
        entry = pk.add_broker_entry_metadata(entry, broker_timestamp=bem[0], index=bem[1])
    j = pulsar_oracle.call("decodeEntry", data=entry)
    assert j["checksum_ok"] is True and j["peek_agrees"] is True
    assert j["broker_entry_metadata"] == ({"broker_timestamp": bem[0], "index": bem[1]} if bem else None)
    assert j["metadata"] == md_json(pk.Entry.parse(entry).metadata)
    assert j["metadata"]["uncompressed_size"] == len(payload)
    assert j["metadata"].get("compression", 0) == CODEC_NUMBER[codec]
    (m,) = j["messages"]
    assert norm_java(m, desc["sequence_id"]) == _single_expected(desc, payload)


# --- batches, every codec, with and without broker entry metadata, both directions -----------------------------


@pytest.mark.parametrize("with_bem", [False, True], ids=["plain", "bem"])
@pytest.mark.parametrize("codec", CODECS)
@FEW
@given(batch=BATCH, checksum=st.booleans(), bem=BEM)
def test_java_batch_decodes_in_pulsarkit(pulsar_oracle, codec, with_bem, batch, checksum, bem):
    md_desc, msgs = batch
    r = pulsar_oracle.call("encodeBatch", metadata=md_desc, messages=msgs, compression=codec, checksum=checksum)
    entry = H(r["entry"])
    if with_bem:
        entry = H(
            pulsar_oracle.call(
                "addBrokerEntryMetadata",
                data=entry,
                broker_timestamp=bem[0],
                index=bem[1],
                num_messages=len(msgs),
            )
        )
    e = pk.Entry.parse(entry)
    assert md_json(e.metadata) == r["metadata"]
    assert e.is_batch and e.num_messages == len(msgs) and e.compression == codec
    assert (e.checksum is not None) is checksum
    got = [norm_pk(m) for m in e.messages(include_compacted_out=True)]
    assert got == expected_messages(md_desc, msgs)
    # The consumer drops compacted-out records.
    assert [norm_pk(m) for m in e.messages()] == [m for m in got if not m["compacted_out"]]
    if with_bem:
        assert e.broker_entry_metadata == pk.BrokerEntryMetadata(*bem)
        if bem[1] is not None:
            n = len(msgs)
            want = [(bem[1] - n + i + 1 + 2**63) % 2**64 - 2**63 for i in range(n)]  # Java's long arithmetic
            assert [m.index for m in e.messages(include_compacted_out=True)] == want
    else:
        assert e.broker_entry_metadata is None
    # Java reading the same bytes agrees with pulsarkit.
    j = pulsar_oracle.call("decodeEntry", data=entry)
    assert [norm_java(m, md_desc["sequence_id"]) for m in j["messages"]] == got
    assert j["trailing_bytes"] == 0


@pytest.mark.parametrize("with_bem", [False, True], ids=["plain", "bem"])
@pytest.mark.parametrize("codec", CODECS)
@FEW
@given(batch=BATCH, checksum=st.booleans(), bem=BEM)
def test_pulsarkit_batch_decodes_in_java(pulsar_oracle, codec, with_bem, batch, checksum, bem):
    md_desc, msgs = batch
    entry = pk.encode_batch(md_from_json(md_desc), msgs, compression=codec, checksum=checksum)
    if with_bem:
        entry = pk.add_broker_entry_metadata(entry, broker_timestamp=bem[0], index=bem[1])
    j = pulsar_oracle.call("decodeEntry", data=entry)
    assert j["has_checksum"] is checksum and j.get("checksum_ok", True) is True
    assert j["broker_entry_metadata"] == ({"broker_timestamp": bem[0], "index": bem[1]} if with_bem else None)
    assert j["metadata"] == md_json(pk.Entry.parse(entry).metadata)
    assert j["metadata"]["num_messages_in_batch"] == len(msgs)
    assert j["metadata"]["highest_sequence_id"] == md_desc["sequence_id"] + len(msgs) - 1
    assert [norm_java(m, md_desc["sequence_id"]) for m in j["messages"]] == expected_messages(md_desc, msgs)
    assert j["trailing_bytes"] == 0


@pytest.mark.parametrize("codec", CODECS)
@FEW
@given(batch=BATCH)
def test_batch_records_byte_identical(pulsar_oracle, codec, batch):
    """The uncompressed batch (every [size][SingleMessageMetadata][payload] record) is byte-identical, and with
    no compression so is the whole entry, once the metadata carries the same fields."""
    md_desc, msgs = batch
    r = pulsar_oracle.call(
        "encodeBatch", metadata=md_desc, messages=msgs, compression=codec, always_uncompressed_size=True
    )
    ours = pk.encode_batch(md_from_json(md_desc), msgs, compression=codec)
    e = pk.Entry.parse(ours)
    assert pk.decompress(codec, e.payload, e.metadata.uncompressed_size) == H(r["uncompressed"])
    assert md_json(e.metadata) == r["metadata"]
    if codec == "NONE":
        assert ours == H(r["entry"])


def test_java_uncompressed_batch_without_uncompressed_size(pulsar_oracle):
    """The Java producer leaves uncompressed_size unset on uncompressed batches; pulsarkit must still read them."""
    md = {"producer_name": "prod", "sequence_id": 10, "publish_time": 1700000000000}
    msgs = [
        {"payload": b"a", "key": "k1"},
        {"payload": b"", "properties": {"x": "y"}},
        {"payload": b"ccc" * 50},
    ]
    r = pulsar_oracle.call("encodeBatch", metadata=md, messages=msgs, compression="NONE")
    assert "uncompressed_size" not in r["metadata"] and "compression" not in r["metadata"]
    e = pk.Entry.parse(H(r["entry"]))
    assert [m.payload for m in e.messages()] == [b"a", b"", b"ccc" * 50]
    assert [m.sequence_id for m in e.messages()] == [10, 11, 12]


# --- codecs -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@SOME
@given(data=st.one_of(PAYLOAD, st.binary(min_size=1000, max_size=20000)))
def test_codec_round_trip_across(pulsar_oracle, codec, data):
    java_z = H(pulsar_oracle.call("compress", codec=codec, data=data))
    assert pk.decompress(codec, java_z, len(data)) == data
    ours_z = pk.compress(codec, data)
    assert H(pulsar_oracle.call("decompress", codec=codec, data=ours_z, size=len(data))) == data


@pytest.mark.parametrize("codec", CODECS)
def test_codec_large_and_empty(pulsar_oracle, codec):
    big = (bytes(range(256)) * 2048) + b"pulsar " * 100_000  # ~1.2 MiB, part compressible
    for data in (b"", big):
        java_z = H(pulsar_oracle.call("compress", codec=codec, data=data))
        assert pk.decompress(codec, java_z, len(data)) == data
        assert H(pulsar_oracle.call("decompress", codec=codec, data=pk.compress(codec, data), size=len(data))) == data


def test_java_zlib_stream_is_sync_flushed_and_accepted(pulsar_oracle):
    data = b"The quick brown fox jumps over the lazy dog. " * 40
    z = H(pulsar_oracle.call("compress", codec="ZLIB", data=data))
    assert z[:2] == b"\x78\x9c" and z.endswith(b"\x00\x00\xff\xff")  # zlib header, SYNC_FLUSH, no final block
    with pytest.raises(zlib.error):
        zlib.decompress(z)  # no Adler-32 trailer: a strict one-shot reader refuses it
    assert zlib.decompressobj().decompress(z) == data
    assert pk.decompress("ZLIB", z, len(data)) == data


# --- PIP-70 broker entry metadata ---------------------------------------------------------------------------


@SOME
@given(payload=st.binary(max_size=64), bem=BEM, checksum=st.booleans())
def test_broker_entry_metadata_byte_identical(pulsar_oracle, payload, bem, checksum):
    entry = pk.encode_entry(pk.message_metadata("p", 1, 1000), payload, checksum=checksum)
    ts, idx = bem
    java = H(pulsar_oracle.call("addBrokerEntryMetadata", data=entry, broker_timestamp=ts, index=idx))
    ours = pk.add_broker_entry_metadata(entry, broker_timestamp=ts, index=idx)
    assert ours == java
    assert java.endswith(entry) and java[:2] == b"\x0e\x02"
    peek = pulsar_oracle.call("peekBrokerEntryMetadata", data=ours)
    assert peek == {
        "broker_entry_metadata": {"broker_timestamp": ts, "index": idx},
        "reader_index": 0,
        "headers_and_payload": entry.hex(),
    }
    assert pk.peek_broker_entry_metadata(java) == pk.BrokerEntryMetadata(ts, idx)
    assert pk.strip_broker_entry_metadata(java) == entry


def test_empty_broker_entry_metadata_from_java(pulsar_oracle):
    """A broker whose interceptors set nothing still writes the 0x0e02 prefix with a 0-byte message."""
    entry = pk.encode_entry(pk.message_metadata("p", 1, 1000), b"x")
    java = H(pulsar_oracle.call("addBrokerEntryMetadata", data=entry))
    assert java == b"\x0e\x02\x00\x00\x00\x00" + entry
    assert pk.peek_broker_entry_metadata(java) == pk.BrokerEntryMetadata(None, None)
    assert pk.strip_broker_entry_metadata(java) == entry
    assert pk.Entry.parse(java).messages()[0].payload == b"x"


def test_no_broker_entry_metadata(pulsar_oracle):
    entry = pk.encode_entry(pk.message_metadata("p", 1, 1000), b"x")
    peek = pulsar_oracle.call("peekBrokerEntryMetadata", data=entry)
    assert peek["broker_entry_metadata"] is None and H(peek["headers_and_payload"]) == entry
    assert pk.peek_broker_entry_metadata(entry) is None


def test_index_interceptor_over_a_topic(pulsar_oracle):
    """pulsar-common's AppendIndexMetadataInterceptor starts at -1 and adds each entry's message count; pulsarkit
    writes the same bytes for the same values and derives consecutive per-message indexes from them."""
    sizes = [1, 10, 3, 1, 5, 2]
    md = pk.message_metadata("prod", 0, 1700000000000)
    entries = [
        pk.encode_entry(md, b"solo")
        if n == 1
        else pk.encode_batch(md, [b"m%d" % i for i in range(n)], compression="LZ4")
        for n in sizes
    ]
    stored = [
        H(x) for x in pulsar_oracle.call("appendIndex", entries=entries, num_messages=sizes, broker_timestamp=1234)
    ]
    last = -1
    indexes = []
    for raw, stored_entry, n in zip(entries, stored, sizes):
        last += n
        assert pk.peek_broker_entry_metadata(stored_entry) == pk.BrokerEntryMetadata(1234, last)
        assert pk.add_broker_entry_metadata(raw, broker_timestamp=1234, index=last) == stored_entry
        indexes += [m.index for m in pk.Entry.parse(stored_entry).messages()]
    assert indexes == list(range(sum(sizes)))


# --- SEND frames --------------------------------------------------------------------------------------------


@SOME
@given(
    desc=METADATA,
    payload=st.binary(max_size=100),
    producer_id=U64,
    sequence_id=U64,
    num_messages=st.integers(0, 1000),
    highest=st.none() | NON_NEG_LONG,
    txn=st.tuples(st.none() | NON_NEG_LONG, st.none() | NON_NEG_LONG),
    checksum=st.booleans(),
)
def test_send_frame_byte_identical(
    pulsar_oracle, desc, payload, producer_id, sequence_id, num_messages, highest, txn, checksum
):
    args: dict[str, Any] = {
        "producer_id": producer_id,
        "sequence_id": sequence_id,
        "num_messages": num_messages,
    }
    fields: dict[str, Any] = {"producer_id": producer_id, "sequence_id": sequence_id}
    # Commands.newSend's rules for which CommandSend fields to write.
    if highest is not None:
        args["highest_sequence_id"] = fields["highest_sequence_id"] = highest
    if num_messages > 1:
        fields["num_messages"] = num_messages
    if txn[0] is not None:
        args["txnid_least_bits"] = fields["txnid_least_bits"] = txn[0]
    if txn[1] is not None:
        args["txnid_most_bits"] = fields["txnid_most_bits"] = txn[1]
    md = md_from_json(desc)
    if md.HasField("total_chunk_msg_size") and md.total_chunk_msg_size > 1:
        fields["is_chunk"] = True
    if md.HasField("marker_type"):
        fields["marker"] = True
    java = H(pulsar_oracle.call("newSend", metadata=desc, payload=payload, checksum=checksum, **args))
    entry = pk.encode_entry(md, payload, checksum=checksum)
    assert pk.encode_command(pk.command("SEND", **fields), entry) == java
    ((cmd, hp),) = pk.FrameDecoder().feed(java)
    assert cmd.send.producer_id == producer_id and cmd.send.sequence_id == sequence_id
    assert hp == entry


@pytest.mark.parametrize("codec", CODECS)
def test_send_frame_for_a_java_batch(pulsar_oracle, codec):
    """A producer's batch SEND: the frame around a Java-built batch entry is what pulsarkit frames around it."""
    md = {"producer_name": "prod", "sequence_id": 100, "publish_time": 1700000000000}
    msgs = [{"payload": b"v%d" % i * 20, "key": f"k{i}"} for i in range(7)]
    r = pulsar_oracle.call("encodeBatch", metadata=md, messages=msgs, compression=codec)
    entry = H(r["entry"])
    e = pk.Entry.parse(entry)
    java = H(
        pulsar_oracle.call(
            "newSend",
            producer_id=3,
            sequence_id=100,
            highest_sequence_id=106,
            num_messages=7,
            metadata=r["metadata"],
            payload=e.payload,
        )
    )
    ours = pk.encode_command(
        pk.command("SEND", producer_id=3, sequence_id=100, highest_sequence_id=106, num_messages=7), entry
    )
    assert ours == java
