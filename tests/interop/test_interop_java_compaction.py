"""Interop with Pulsar 4.0.7's own topic-compaction byte code (Java): the batches pulsarkit rewrites in phase two
of compaction, and the compacted ledger's entry framing.

One JVM (``tests/java/compaction-oracle``, see ``tests/oracle.py``) serves the module, with the jars Maven resolves
for ``pulsar-broker:4.0.7`` (the release of the standalone data-directory oracle), straight from the local
repository. It runs

* ``Commands.peekBrokerEntryMetadataIfExist`` / ``skipBrokerEntryMetadataIfExist`` / ``hasChecksum`` /
  ``readChecksum`` with ``Crc32cIntChecksum`` (the consumer's checksum check), ``Commands.parseMessageMetadata``,
  the codec's ``decode`` and ``Commands.deSerializeSingleMessageInBatch`` for every record (4.0.7 has no
  ``Commands.processBatch``); the messages a consumer delivers, as ``ConsumerImpl.newSingleMessage`` makes them
  (compacted-out records skipped, the rest through ``MessageImpl.create`` with a ``BatchMessageIdImpl``); and phase
  one's view, ``RawBatchConverter.extractIdsAndKeysAndSize``;
* ``RawBatchConverter.rebatchMessage(RawMessage, MessageMetadata, BiPredicate<String, MessageId>, boolean
  retainNullKey)`` on a ``RawMessageImpl(MessageIdData, ByteBuf)``, with the filter
  ``keep contains ((BatchMessageIdImpl) id).getBatchIndex()``, both as ``AbstractTwoPhaseCompactor`` calls it
  (metadata parsed beforehand) and with ``null`` metadata (the path that keeps broker entry metadata);
* ``RawMessageImpl.serialize`` and ``RawMessageImpl.deserializeFrom``.

For seeded batches (every codec; 1 to 20 messages with repeated and odd keys, keyless messages, empty payloads,
properties, event times, ordering keys; with and without broker entry metadata) and seeded subsets of batch indexes
to keep, the tests check that

* Pulsar reads pulsarkit's rebatched entries (placeholders format: every index present, dropped ones
  ``SingleMessageMetadata{payload_size=0, compacted_out=true}``, MessageMetadata field 31 ``compacted_batch_indexes``
  listing the retained ones) as exactly the retained messages pulsarkit reports and a plain model predicts; 4.0.7's
  LightProto ``MessageMetadata`` does not know field 31 and skips it, and what it parsed re-serializes to pulsarkit's
  metadata bytes without field 31;
* Pulsar's ``rebatchMessage`` on the same input keeps the same messages, and its entry is pulsarkit's with field 31
  removed (CRC32C recomputed) byte for byte for NONE; with a codec the broker entry metadata, the metadata bytes and
  the uncompressed batch are identical while the compressed payload (and hence the CRC32C) may differ: Pulsar 4.0.7
  compresses with aircompressor (LZ4, ZSTD, Snappy) and ``java.util.zip.Deflater`` with ``SYNC_FLUSH`` (ZLIB),
  pulsarkit with lz4_flex, libzstd, snap and zlib-rs (ZLIB and ZSTD always differ, LZ4 nearly always, Snappy in
  some batches; see the ``*_compressed_bytes`` tests). Pulsar's own run on a ``RawMessageImpl`` can fail with
  ``IndexOutOfBoundsException`` on compressed batches (apache/pulsar#26290, see ``check_issue_26290``); the oracle
  then also runs the same code with room in the input buffer, which is what the bytes are compared with;
* ``RawMessageImpl.serialize`` is ``_native.encode_raw_message`` byte for byte, and each side reads the other's.
"""

from __future__ import annotations

import os
import random
import zlib
from pathlib import Path
from typing import Any

import pulsarkit as pk
import pytest
from oracle import TESTS, JavaError, JavaOracle
from pulsarkit import _native

pytestmark = pytest.mark.interop

CODECS = ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"]
#: Codecs whose compressed bytes pulsarkit and Pulsar 4.0.7 always produce identically.
SAME_COMPRESSED_BYTES = {"NONE"}
CASES = 16
#: Repeated keys, the empty key (a key: hasPartitionKey), non-ASCII and long ones.
KEYS = ["a", "b", "c", "user-17", "", "ключ-☃", "k" * 300]
PUBLISH_TIME = 1_700_000_000_000
#: The placeholder of a dropped message: payload_size = 0, compacted_out = true.
PLACEHOLDER_METADATA = "18002001"
FIELD_COMPACTED_BATCH_INDEXES = 31


@pytest.fixture(scope="module")
def oracle():
    o = JavaOracle(TESTS / "java" / "compaction-oracle", "io.pulsarkit.oracle.CompactionOracle")
    o.build()
    listing = o.build_dir / "classpath.txt"
    jars = listing.read_text().strip().split(os.pathsep)
    if not all(Path(j).is_file() for j in jars):  # the local repository lost jars since the last build
        (o.build_dir / ".oracle-build-stamp").unlink(missing_ok=True)
        o.build()
        jars = listing.read_text().strip().split(os.pathsep)
    o.classpath = jars
    with o:
        info = o.call("info")
        for cls in ("RawBatchConverter", "RawMessageImpl"):
            assert info[cls].endswith("pulsar-broker-4.0.7.jar"), info
        for cls in ("Commands", "MessageMetadata"):
            assert info[cls].endswith("pulsar-common-4.0.7.jar"), info
        assert info["MessageImpl"].endswith("pulsar-client-original-4.0.7.jar"), info
        assert info["knows_compacted_batch_indexes"] is False, info
        yield o


# --- wire helpers: framing and protobuf walked by hand (CRC32C: pulsarkit's, checked against Pulsar's elsewhere) --


def split_entry(entry: bytes) -> tuple[bytes, bytes, bytes]:
    """(broker entry metadata prefix, MessageMetadata bytes, payload) of ``[0e02..][0e01][crc][size][md][payload]``;
    checks the CRC32C."""
    prefix = b""
    if entry[:2] == b"\x0e\x02":
        n = int.from_bytes(entry[2:6], "big")
        prefix, entry = entry[: 6 + n], entry[6 + n :]
    assert entry[:2] == b"\x0e\x01", entry[:2].hex()
    size = int.from_bytes(entry[6:10], "big")
    assert int.from_bytes(entry[2:6], "big") == pk.crc32c(entry[6:])
    return prefix, entry[10 : 10 + size], entry[10 + size :]


def join_entry(prefix: bytes, metadata: bytes, payload: bytes) -> bytes:
    body = len(metadata).to_bytes(4, "big") + metadata + payload
    return prefix + b"\x0e\x01" + pk.crc32c(body).to_bytes(4, "big") + body


def _varint(b: bytes, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def proto_fields(b: bytes) -> list[tuple[int, int, bytes]]:
    """Every field of a protobuf message: (number, wire type, the field's bytes with its tag)."""
    out, i = [], 0
    while i < len(b):
        start = i
        tag, i = _varint(b, i)
        wire = tag & 7
        if wire == 0:
            _, i = _varint(b, i)
        elif wire == 1:
            i += 8
        elif wire == 2:
            n, i = _varint(b, i)
            i += n
        elif wire == 5:
            i += 4
        else:
            raise AssertionError(f"wire type {wire}")
        out.append((tag >> 3, wire, b[start:i]))
    assert i == len(b)
    return out


def without_field(b: bytes, number: int) -> bytes:
    return b"".join(raw for n, _, raw in proto_fields(b) if n != number)


def _value(raw: bytes) -> int:
    """The value of a varint field (tag included in ``raw``)."""
    _, i = _varint(raw, 0)
    return _varint(raw, i)[0]


def without_compacted_batch_indexes(entry: bytes) -> bytes:
    """pulsarkit's rebatched entry as Pulsar 4.0.7 would write it: field 31 gone, CRC32C recomputed."""
    prefix, md, payload = split_entry(entry)
    return join_entry(prefix, without_field(md, FIELD_COMPACTED_BATCH_INDEXES), payload)


# --- seeded batches ---------------------------------------------------------------------------------------------


def _payload(rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.15:
        return b""  # a tombstone
    n = rng.choice([1, 3, 16, 40, 200])
    if r < 0.55:
        return (b"pulsar-%d-" % rng.randrange(5)) * (n // 8 + 1)  # compressible
    return rng.randbytes(n)


def make_messages(rng: random.Random, n: int) -> list[dict[str, Any]]:
    msgs = []
    for _ in range(n):
        d: dict[str, Any] = {"payload": _payload(rng)}
        if rng.random() < 0.8:
            d["key"] = rng.choice(KEYS)
        if rng.random() < 0.2:
            d["properties"] = {f"p{j}": rng.choice(["", "v", "wert-ü"]) for j in range(rng.randint(1, 3))}
        if rng.random() < 0.2:
            d["event_time"] = rng.randrange(1, 2**41)
        if rng.random() < 0.1:
            d["ordering_key"] = rng.randbytes(rng.randint(1, 4))
        msgs.append(d)
    return msgs


class Case:
    """One input batch, the indexes to keep and the message id it is read under."""

    def __init__(self, codec: str, case: int) -> None:
        rng = random.Random(f"compaction-{codec}-{case}")
        self.codec = codec
        self.n = [1, 2, 20][case] if case < 3 else rng.randint(1, 20)
        self.msgs = make_messages(rng, self.n)
        md = pk.message_metadata("producer-☃", rng.randrange(2**40), PUBLISH_TIME + case)
        entry = pk.encode_batch(md, self.msgs, compression=codec)
        self.bem = None
        if case % 2 == 1:
            self.bem = (PUBLISH_TIME + 7 * case, rng.randrange(2**50))
            entry = pk.add_broker_entry_metadata(entry, broker_timestamp=self.bem[0], index=self.bem[1])
        self.entry = entry
        self.keep = sorted(rng.sample(range(self.n), rng.randint(1, self.n)))
        if case == 4:
            self.keep = []  # nothing kept unless keyless messages are retained
        self.retain_null_key = case % 3 == 0
        self.id = {"ledger": rng.randrange(2**40), "entry": rng.randrange(2**30), "partition": rng.choice([-1, 0, 7])}

    def retained(self) -> list[tuple[int, str | None, bytes]]:
        """The model of ``rebatchMessage``: keyless messages by retain_null_key, keyed ones when kept and not
        empty."""
        out = []
        for i, d in enumerate(self.msgs):
            key = d.get("key")
            if key is None:
                ok = self.retain_null_key
            else:
                ok = i in self.keep and len(d["payload"]) > 0
            if ok:
                out.append((i, key, d["payload"]))
        return out

    def rebatch(self) -> bytes | None:
        return _native.rebatch_entry(self.entry, self.keep, retain_null_key=self.retain_null_key)


ALL = [(codec, case) for codec in CODECS for case in range(CASES)]


def _pk_messages(entry: bytes) -> list[tuple[int, str | None, bytes]]:
    return [(m.batch_index, m.key, m.payload) for m in pk.Entry.parse(entry).messages()]


def check_java_reads(j: dict[str, Any], c: Case, retained: list[tuple[int, str | None, bytes]]) -> None:
    """Pulsar's reading of a rebatched entry of ``c`` is the input batch with only ``retained`` left."""
    assert j["checksum_ok"] is True
    if c.bem is None:
        assert j["broker_entry_metadata"] is None
    else:
        assert j["broker_entry_metadata"] == {"broker_timestamp": c.bem[0], "index": c.bem[1]}
    md = j["metadata"]
    assert md["num_messages_in_batch"] == c.n
    assert md["compression"] == c.codec
    assert md["uncompressed_size"] == len(bytes.fromhex(j["uncompressed"]))
    assert md["producer_name"] == "producer-☃" and md["publish_time"] >= PUBLISH_TIME
    kept = {i for i, _, _ in retained}
    assert [r["index"] for r in j["records"]] == list(range(c.n))
    for r, d in zip(j["records"], c.msgs, strict=True):
        if r["index"] in kept:
            assert not r["compacted_out"]
            assert r["key"] == d.get("key")
            assert bytes.fromhex(r["payload"]) == d["payload"] and r["payload_size"] == len(d["payload"])
            assert dict(r["properties"]) == d.get("properties", {})
            assert r["event_time"] == d.get("event_time")
            assert r["ordering_key"] == (d["ordering_key"].hex() if "ordering_key" in d else None)
        else:
            assert r["compacted_out"] and r["key"] is None and r["payload"] == "" and r["payload_size"] == 0
            assert r["properties"] == [] and r["metadata_reserialized"] == PLACEHOLDER_METADATA
    # What a consumer receives.
    got = [(m["batch_index"], m["key"], bytes.fromhex(m["payload"])) for m in j["messages"]]
    assert got == retained
    for m in j["messages"]:
        d = c.msgs[m["batch_index"]]
        assert m["batch_size"] == c.n
        assert m["properties"] == d.get("properties", {})
        assert m["event_time"] == d.get("event_time", 0)
        assert m["ordering_key"] == (d["ordering_key"].hex() if "ordering_key" in d else None)
        assert m["publish_time"] == md["publish_time"] and m["producer_name"] == "producer-☃"
    # Phase one of a later compaction.
    assert j["readable_batch"] is True
    assert j["compaction_view"] == [[i, k, len(p)] for i, k, p in retained]


# --- Pulsar reads pulsarkit's rebatched entries ---------------------------------------------------------------


@pytest.mark.parametrize(("codec", "case"), ALL)
def test_pulsar_reads_pulsarkit_rebatched_entries(oracle, codec, case):
    c = Case(codec, case)
    want = c.retained()
    ours = c.rebatch()
    if not want:
        assert ours is None
        return
    assert ours is not None
    assert _pk_messages(ours) == want
    prefix, md, _ = split_entry(ours)
    assert pk.Entry.parse(ours).metadata.compacted_batch_indexes == [i for i, _, _ in want]
    # Field 31 as PIP-429 writes it: unpacked varints, after every other field.
    fields = proto_fields(md)
    assert all(w == 0 for n, w, _ in fields if n == FIELD_COMPACTED_BATCH_INDEXES)
    assert [_value(raw) for n, _, raw in fields if n == FIELD_COMPACTED_BATCH_INDEXES] == [i for i, _, _ in want]
    assert [n for n, _, _ in fields] == sorted(n for n, _, _ in fields)

    j = oracle.call("parse_batch", data=ours, **c.id)
    check_java_reads(j, c, want)
    assert j["headers_start"] == len(prefix)
    # LightProto skipped field 31 and holds every other field: it writes back pulsarkit's bytes without it.
    assert bytes.fromhex(j["metadata_reserialized"]) == without_field(md, FIELD_COMPACTED_BATCH_INDEXES)
    # The input batch itself reads the same on both sides (sanity of the generated input).
    src = oracle.call("parse_batch", data=c.entry, **c.id)
    assert [(m["batch_index"], m["key"], bytes.fromhex(m["payload"])) for m in src["messages"]] == _pk_messages(c.entry)


# --- Pulsar's RawBatchConverter.rebatchMessage on the same input ----------------------------------------------


def java_rebatch(oracle, data: bytes, keep: list[int], retain_null_key: bool = False, **kw: Any) -> dict[str, Any]:
    """Pulsar's ``rebatchMessage`` of the entry ``data`` (the oracle's run with room in the input buffer). The run on a
    plain ``RawMessageImpl`` must give the same answer, or fail only as apache/pulsar#26290 does."""
    kw.setdefault("ledger", 1)
    kw.setdefault("entry", 2)
    kw.setdefault("partition", -1)
    r = oracle.call("rebatch", data=data, keep=keep, retain_null_key=retain_null_key, **kw)
    plain = r.pop("plain")
    if "error" in plain:
        check_issue_26290(plain, data, r)
    else:
        assert plain == r
    return r


def check_issue_26290(plain: dict[str, Any], entry: bytes, r: dict[str, Any]) -> None:
    """RawBatchConverter sizes its output batch by the input buffer's capacity (the entry's length) and
    LightProto's ``SingleMessageMetadata.writeTo`` copies a parsed key with ``ByteBuf.getBytes``, which does not
    grow the buffer: a rebatched batch larger than the compressed entry can fail there."""
    assert plain["error"] == "java.lang.IndexOutOfBoundsException", plain
    stack = plain["stack"].splitlines()
    at = stack.index("org.apache.pulsar.common.api.proto.SingleMessageMetadata.writeTo")
    assert stack[at + 1 : at + 3] == [
        "org.apache.pulsar.common.protocol.Commands.serializeSingleMessageInBatchWithPayload",
        "org.apache.pulsar.client.impl.RawBatchConverter.rebatchMessage",
    ], stack
    assert r["data"] is not None
    assert pk.Entry.parse(bytes.fromhex(r["data"])).metadata.uncompressed_size > len(entry)


@pytest.mark.parametrize(("codec", "case"), ALL)
def test_pulsar_rebatch_keeps_the_same_messages_and_writes_the_same_bytes(oracle, codec, case):
    c = Case(codec, case)
    want = c.retained()
    ours = c.rebatch()
    r = java_rebatch(oracle, c.entry, c.keep, c.retain_null_key, **c.id)
    # The filter sees every keyed message (tombstones included: Pulsar tests the payload after the filter).
    assert [tuple(a) for a in r["asked"]] == [(i, d["key"]) for i, d in enumerate(c.msgs) if "key" in d]
    if c.bem is None:  # AbstractTwoPhaseCompactor's call, metadata parsed beforehand: the same answer
        assert java_rebatch(oracle, c.entry, c.keep, c.retain_null_key, with_metadata=True, **c.id) == r
    if not want:
        assert r["data"] is None and ours is None
        return
    assert ours is not None and r["data"] is not None
    assert r["id"] == {**c.id, "batch_index": None}
    java = bytes.fromhex(r["data"])

    # The same messages, read by pulsarkit and by Pulsar.
    assert _pk_messages(java) == want
    check_java_reads(oracle.call("parse_batch", data=java, **c.id), c, want)
    assert pk.Entry.parse(java).metadata.compacted_batch_indexes == []
    # The compacted ledger's last message id reads the same with and without field 31.
    assert _native.last_message_position(java) == _native.last_message_position(ours)

    # The same bytes, once pulsarkit's field 31 is removed: broker entry metadata, metadata and uncompressed batch
    # always; the compressed payload (and so the CRC32C) for the codecs that compress alike.
    stripped = without_compacted_batch_indexes(ours)
    j_prefix, j_md, j_payload = split_entry(java)
    o_prefix, o_md, o_payload = split_entry(stripped)
    assert j_prefix == o_prefix
    assert j_md == o_md
    size = pk.Entry.parse(java).metadata.uncompressed_size
    assert pk.decompress(codec, j_payload, size) == pk.decompress(codec, o_payload, size)
    if codec in SAME_COMPRESSED_BYTES:
        assert java == stripped
    else:
        assert pk.compress(codec, pk.decompress(codec, j_payload, size)) == o_payload


def test_the_matrix_covers_every_kind_of_message():
    cases = [Case(codec, case) for codec, case in ALL]
    msgs = [d for c in cases for d in c.msgs]
    assert sum("key" not in d for d in msgs) > 20 and sum(d["payload"] == b"" for d in msgs) > 20
    assert {c.n for c in cases} >= {1, 2, 20} and sum(c.bem is not None for c in cases) == len(cases) // 2
    outcomes = [(bool(c.retained()), c.retain_null_key) for c in cases]
    assert set(outcomes) == {(True, True), (True, False), (False, True), (False, False)}
    # Tombstones that were asked to be kept, and keyless messages in dropped positions.
    assert any(i in c.keep and d["payload"] == b"" and "key" in d for c in cases for i, d in enumerate(c.msgs))
    assert any(i in c.keep and "key" not in d and not c.retain_null_key for c in cases for i, d in enumerate(c.msgs))


# --- re-compaction and the other format -------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_recompacting_a_compacted_batch(oracle, codec):
    """A batch compacted once (placeholders, field 31) compacted again: Pulsar copies the placeholders it finds
    (``isCompactedOut``) and drops field 31 (unknown to LightProto); pulsarkit writes the same placeholders and a
    new field 31. Without field 31 the entries are the same."""
    rng = random.Random(f"recompact-{codec}")
    msgs = [{"payload": b"value-%d" % i * 3, "key": KEYS[i % 4]} for i in range(12)]
    entry = pk.encode_batch(pk.message_metadata("p", 0, PUBLISH_TIME), msgs, compression=codec)
    first = _native.rebatch_entry(entry, [1, 2, 5, 6, 9, 10, 11])
    keep = sorted(rng.sample([1, 2, 5, 6, 9, 10, 11], 3))
    ours = _native.rebatch_entry(first, keep)
    java = bytes.fromhex(java_rebatch(oracle, first, keep)["data"])
    want = [(i, msgs[i]["key"], msgs[i]["payload"]) for i in keep]
    assert _pk_messages(ours) == _pk_messages(java) == want
    assert pk.Entry.parse(ours).metadata.compacted_batch_indexes == keep
    j = oracle.call("parse_batch", data=java, ledger=1, entry=2, partition=-1)
    assert [r["index"] for r in j["records"] if not r["compacted_out"]] == keep
    assert {r["metadata_reserialized"] for r in j["records"] if r["compacted_out"]} == {PLACEHOLDER_METADATA}
    stripped = without_compacted_batch_indexes(ours)
    if codec in SAME_COMPRESSED_BYTES:
        assert java == stripped
    assert split_entry(java)[1] == split_entry(stripped)[1]


def test_retained_only_batches_are_unreadable_by_pulsar_4_0_7(oracle):
    """``retained_only=True`` (PIP-429's smaller payload) needs a reader of field 31: the batch keeps
    ``num_messages_in_batch`` (the original size, so batch indexes stay) but holds only the k retained records, and
    4.0.7's ``deSerializeSingleMessageInBatch`` runs out of bytes at record k. Hence the placeholders default."""
    msgs = [{"payload": b"v%d" % i, "key": f"k{i}"} for i in range(6)]
    entry = pk.encode_batch(pk.message_metadata("p", 0, PUBLISH_TIME), msgs, compression="LZ4")
    keep = [1, 4]
    ours = _native.rebatch_entry(entry, keep, retained_only=True)
    assert _pk_messages(ours) == [(i, f"k{i}", b"v%d" % i) for i in keep]
    assert pk.Entry.parse(ours).metadata.num_messages_in_batch == len(msgs)
    with pytest.raises(JavaError) as err:
        oracle.call("parse_batch", data=ours, ledger=1, entry=2, partition=-1)
    assert err.value.java_class == "java.lang.IndexOutOfBoundsException"
    assert "Commands.deSerializeSingleMessageInBatch" in err.value.java_message


# --- why the compressed bytes differ ------------------------------------------------------------------------------


def _both(oracle, codec: str) -> tuple[bytes, bytes, bytes]:
    """(Pulsar's compressed payload, pulsarkit's, the uncompressed batch) of one rebatch."""
    msgs = [{"payload": (b"pulsar-compaction-%d " % (i % 3)) * 6, "key": KEYS[i % 5]} for i in range(16)]
    entry = pk.encode_batch(pk.message_metadata("p", 0, PUBLISH_TIME), msgs, compression=codec)
    keep = [0, 3, 7, 8, 15]
    ours = _native.rebatch_entry(entry, keep)
    java = bytes.fromhex(java_rebatch(oracle, entry, keep)["data"])
    size = pk.Entry.parse(java).metadata.uncompressed_size
    j_payload, o_payload = split_entry(java)[2], split_entry(ours)[2]
    body = pk.decompress(codec, j_payload, size)
    assert pk.decompress(codec, o_payload, size) == body
    return j_payload, o_payload, body


def test_zlib_compressed_bytes(oracle):
    """Pulsar's CompressionCodecZLib deflates with ``Deflater.SYNC_FLUSH`` and never finishes the stream: its
    payload ends with the empty stored block ``00 00 ff ff`` and has no final block and no Adler-32 trailer.
    pulsarkit writes a complete zlib stream (final block, Adler-32). Both inflate to the same batch."""
    j, o, body = _both(oracle, "ZLIB")
    assert j != o and j[:2] == o[:2] == b"\x78\x9c"
    assert j.endswith(b"\x00\x00\xff\xff")
    d = zlib.decompressobj()
    assert d.decompress(j) == body and not d.eof  # no final block
    d = zlib.decompressobj()
    assert d.decompress(o) == body and d.eof and d.unused_data == b""
    assert o[-4:] == zlib.adler32(body).to_bytes(4, "big")


def test_zstd_compressed_bytes(oracle):
    """Pulsar 4.0.7 compresses ZSTD with aircompressor's ZstdCompressor, which sets the frame's
    Content_Checksum_flag and appends the 4-byte checksum; pulsarkit (libzstd, checksum off) does not, and the two
    match finders choose different sequences. Both decode to the same batch."""
    j, o, _ = _both(oracle, "ZSTD")
    magic = b"\x28\xb5\x2f\xfd"
    assert j[:4] == o[:4] == magic and j != o
    assert j[4] & 0x04 and not o[4] & 0x04  # Frame_Header_Descriptor bit 2: Content_Checksum_flag


def test_lz4_compressed_bytes(oracle):
    """Both write a raw LZ4 block (no frame); aircompressor's Lz4Compressor and lz4_flex pick matches
    differently, so the bytes may differ while both decode to the same batch."""
    j, o, body = _both(oracle, "LZ4")
    assert len(j) < len(body) and len(o) < len(body)


def test_snappy_compressed_bytes(oracle):
    """aircompressor's SnappyCompressor and snap usually write the same raw Snappy block, but not always: for one
    batch of the matrix aircompressor starts with a 79-byte literal where snap takes 80 (tag ``0xf0 4e`` / ``4f``),
    and the following copies differ."""
    j, o, _ = _both(oracle, "SNAPPY")
    assert j == o
    c = Case("SNAPPY", 5)
    java = bytes.fromhex(java_rebatch(oracle, c.entry, c.keep, c.retain_null_key, **c.id)["data"])
    j, o = split_entry(java)[2], split_entry(c.rebatch())[2]
    assert j[:3] == o[:3] == bytes.fromhex("940ff0") and (j[3], o[3]) == (0x4E, 0x4F)


def test_pulsar_4_0_7_rebatch_overflows_its_output_buffer(oracle):
    """apache/pulsar#26290 in 4.0.7: a compressible batch with long keys, rebatched by Pulsar from a
    ``RawMessageImpl``, throws in ``SingleMessageMetadata.writeTo``; pulsarkit rebatches it, and Pulsar does too
    once its input buffer has room (the same bytes as pulsarkit's without field 31)."""
    msgs = [{"payload": b"x" * 50, "key": "k" * 300 + str(i)} for i in range(20)]
    entry = pk.encode_batch(pk.message_metadata("p", 0, PUBLISH_TIME), msgs, compression="LZ4")
    keep = list(range(0, 20, 2))
    r = oracle.call("rebatch", data=entry, keep=keep, retain_null_key=False, ledger=1, entry=2, partition=-1)
    check_issue_26290(r["plain"], entry, r)
    ours = _native.rebatch_entry(entry, keep)
    java = bytes.fromhex(r["data"])
    assert _pk_messages(java) == _pk_messages(ours) == [(i, msgs[i]["key"], msgs[i]["payload"]) for i in keep]
    assert split_entry(java)[1] == split_entry(without_compacted_batch_indexes(ours))[1]


# --- the compacted ledger's entries: RawMessageImpl ---------------------------------------------------------------


RAW_IDS = [
    (0, 0, -1, None),
    (1, 2, 0, None),
    (123456789, 42, 7, None),
    (2**31, 2**32 + 5, 2**31 - 1, None),
    (2**63 - 1, 2**63 - 1, -1, None),
    (2**64 - 1, 2**64 - 1, -1, None),  # -1 as Pulsar's longs
    (5, 6, 3, 0),
    (5, 6, -1, 19),
]


@pytest.mark.parametrize(("ledger", "entry_id", "partition", "batch_index"), RAW_IDS)
def test_raw_message_framing(oracle, ledger, entry_id, partition, batch_index):
    c = Case("LZ4", 5)
    payloads = [b"", b"\x00", c.entry, c.rebatch() or b"x"]
    for data in payloads:
        ours = _native.encode_raw_message(ledger, entry_id, data, partition=partition, batch_index=batch_index)
        ident = {"ledger": ledger, "entry": entry_id, "partition": partition, "batch_index": batch_index}
        java = bytes.fromhex(oracle.call("raw_serialize", data=data, **ident))
        assert java == ours
        id_size = int.from_bytes(ours[:4], "big")
        assert int.from_bytes(ours[4 + id_size : 8 + id_size], "big") == len(data) and ours[8 + id_size :] == data
        back = oracle.call("raw_deserialize", data=ours)
        assert back == {**ident, "data": data.hex(), "entry_offset": 8 + id_size}
        assert _native.decode_raw_message(java) == (
            ledger,
            entry_id,
            partition,
            -1 if batch_index is None else batch_index,
            data,
        )


def test_a_compacted_ledger_entry_end_to_end(oracle):
    """pulsarkit's compacted-ledger entry (rebatch + raw framing) read as the broker does: deserializeFrom, then the
    entry's messages as a consumer gets them."""
    c = Case("ZSTD", 7)
    want = c.retained()
    assert want
    ours = _native.encode_raw_message(c.id["ledger"], c.id["entry"], c.rebatch(), partition=c.id["partition"])
    back = oracle.call("raw_deserialize", data=ours)
    assert {k: back[k] for k in ("ledger", "entry", "partition")} == c.id and back["batch_index"] is None
    j = oracle.call("parse_batch", data=bytes.fromhex(back["data"]), **c.id)
    check_java_reads(j, c, want)
