"""Interop with the real Pulsar client (pulsar-client on PyPI, the C++ client underneath).

The client talks to pulsarkit's FakeBroker, which is itself built on pulsarkit's frame codec:
- producer direction: every SEND's headersAndPayload is decoded with ``pk.Entry`` and compared
  with what the application sent (batching, each codec, keys, properties, chunking, CRC32C);
- consumer direction: entries written by ``pk.encode_entry``/``pk.encode_batch`` (with and without
  broker entry metadata) are served to a real consumer, which must see exactly the intended messages.
"""

from __future__ import annotations

import logging
import math
import random
import socket
import struct
import threading

import crc32c as crc32c_oracle
import pulsarkit as pk
import pytest
from conftest import require_module
from pulsarkit.testing.connection import OWN_PROTOCOL_VERSION
from pulsarkit.testing.fake_broker import FakeBroker
from pulsarkit.testing.state import BrokerError

pulsar = require_module("pulsar", "pip install pulsar-client")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

CODECS = ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"]
CLIENT_CODEC = {
    "NONE": pulsar.CompressionType.NONE,
    "LZ4": pulsar.CompressionType.LZ4,
    "ZLIB": pulsar.CompressionType.ZLib,
    "ZSTD": pulsar.CompressionType.ZSTD,
    "SNAPPY": pulsar.CompressionType.SNAPPY,
}
RECEIVE_MS = 5000

_client_log = logging.getLogger("pulsarkit.tests.pulsar-client")
_client_log.setLevel(logging.WARNING)


@pytest.fixture
def broker():
    b = FakeBroker().start()
    yield b
    b.stop()
    assert b.errors == [], f"fake broker recorded errors: {b.errors}"


def open_client(broker: FakeBroker) -> pulsar.Client:
    return pulsar.Client(
        broker.service_url, operation_timeout_seconds=10, connection_timeout_ms=5000, logger=_client_log
    )


@pytest.fixture
def client(broker):
    c = open_client(broker)
    yield c
    c.close()


def check_send(rec) -> pk.Entry:
    """Decodes a recorded SEND, checking the client's CRC32C against two independent implementations."""
    hp = rec.headers_and_payload
    assert rec.error is None, rec.error
    assert hp[:2] == b"\x0e\x01", "the C++ client always sends a CRC32C"
    stored = struct.unpack(">I", hp[2:6])[0]
    assert stored == pk.crc32c(hp[6:]) == crc32c_oracle.crc32c(hp[6:])
    e = pk.Entry.parse(hp)  # verifies the checksum again
    assert e.checksum == stored
    assert e.broker_entry_metadata is None
    assert e.headers_and_payload == hp
    assert rec.send.producer_id >= 0
    assert rec.send.sequence_id == e.metadata.sequence_id
    assert rec.send.num_messages == e.num_messages
    return e


# ---------------------------------------------------------------------------------------------
# Producer -> fake broker -> pk.Entry
# ---------------------------------------------------------------------------------------------


def sample_messages(rng: random.Random) -> list[dict]:
    """A mix of what applications send: empty, all byte values, random and compressible payloads,
    keys, ordering keys, properties (non-ASCII too), event times, explicit sequence ids with gaps."""
    msgs = [
        {"content": b""},
        {"content": bytes(range(256)), "partition_key": "key-1", "properties": {"a": "1", "ünï": "cødé ✓"}},
        {"content": rng.randbytes(3000), "ordering_key": "ok-2", "event_timestamp": 1_600_000_000_123},
        {
            "content": b"pulsar " * 700,
            "partition_key": "key-3",
            "ordering_key": "ok-3",
            "properties": {"k": ""},
        },
        {"content": bytes([0]) * 17, "event_timestamp": 1},
        {"content": rng.randbytes(1), "properties": {f"p{i}": str(i) * i for i in range(10)}},
        {"content": b"\xff\xfe\x00\x01" * 64, "partition_key": "", "event_timestamp": 2**40},
    ]
    for i, m in enumerate(msgs):
        m["sequence_id"] = 10 * i + 7  # gaps are allowed; only increase matters
    return msgs


def produce_all(producer, msgs: list[dict]) -> list:
    """Sends asynchronously and flushes; returns the client's message ids in send order."""
    ids: list = [None] * len(msgs)
    results: list = [None] * len(msgs)
    done = threading.Semaphore(0)

    def callback(i):
        def cb(res, msg_id):
            results[i] = res
            ids[i] = msg_id
            done.release()

        return cb

    for i, m in enumerate(msgs):
        producer.send_async(m["content"], callback(i), **{k: v for k, v in m.items() if k != "content"})
    producer.flush()
    for _ in msgs:
        assert done.acquire(timeout=20), "send callback never came"
    assert all(r == pulsar.Result.Ok for r in results), results
    return ids


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("batching", [False, True], ids=["single", "batch"])
def test_producer_entries_decode_exactly(broker, client, codec, batching):
    rng = random.Random(f"{codec}-{batching}")
    msgs = sample_messages(rng)
    topic = f"produce-{codec}-{batching}"
    producer = client.create_producer(
        topic,
        producer_name="interop-producer",
        compression_type=CLIENT_CODEC[codec],
        batching_enabled=batching,
        batching_max_messages=3,
        batching_max_publish_delay_ms=60_000,  # batches close on size or flush only
    )
    ids = produce_all(producer, msgs)
    producer.close()

    sends = broker.sends_for(topic)
    assert len(sends) == (math.ceil(len(msgs) / 3) if batching else len(msgs))
    decoded = []
    for rec in sends:
        e = check_send(rec)
        md = e.metadata
        assert md.producer_name == "interop-producer"
        assert md.publish_time > 0
        assert e.is_batch == batching
        if codec != "NONE":
            assert e.compression == codec
        if e.compression != "NONE":
            assert md.uncompressed_size == len(pk.decompress(codec, e.payload, md.uncompressed_size))
        messages = e.messages()
        if batching:
            assert md.num_messages_in_batch == len(messages) == rec.send.num_messages
            assert [m.batch_index for m in messages] == list(range(len(messages)))
            assert md.sequence_id == messages[0].sequence_id
            if md.HasField("highest_sequence_id"):  # Java sets it; the C++ client leaves it out
                assert md.highest_sequence_id == messages[-1].sequence_id
            if rec.send.HasField("highest_sequence_id"):
                assert rec.send.highest_sequence_id == messages[-1].sequence_id
        else:
            assert not rec.send.HasField("num_messages") or rec.send.num_messages == 1
        for m in messages:
            decoded.append((m, rec))

    assert len(decoded) == len(msgs)
    for i, ((m, rec), want) in enumerate(zip(decoded, msgs)):
        assert m.payload == want["content"], f"message {i}"
        assert m.key == (want.get("partition_key") or None), f"message {i}"
        assert m.ordering_key == (want["ordering_key"].encode() if "ordering_key" in want else None)
        assert m.properties == want.get("properties", {})
        assert m.event_time == want.get("event_timestamp")
        assert m.sequence_id == want["sequence_id"]
        # SEND_RECEIPT round trip: the client's ids are the broker's ledger/entry (+ batch index)
        assert (ids[i].ledger_id(), ids[i].entry_id()) == (rec.ledger_id, rec.entry_id)
        assert ids[i].batch_index() == (m.batch_index if batching else -1)


def test_handshake_and_lookup(broker, client):
    producer = client.create_producer("hello", batching_enabled=False)
    producer.send(b"x")
    producer.close()
    [conn] = broker.connects
    assert conn.client_version.startswith("Pulsar-CPP")
    assert conn.protocol_version >= 18  # so PIP-70 exposure can apply to this client
    assert conn.feature_flags.supports_broker_entry_metadata
    assert broker.commands["PARTITIONED_METADATA"] >= 1 and broker.commands["LOOKUP"] >= 1
    assert broker.commands["PRODUCER"] == broker.commands["CLOSE_PRODUCER"] == 1
    assert broker.unhandled == []


def test_producer_sequence_ids_and_names(broker, client):
    named = client.create_producer("seq", producer_name="given", initial_sequence_id=41, batching_enabled=False)
    for i in range(3):
        named.send(b"n%d" % i)
    anon = client.create_producer("seq", batching_enabled=False)
    anon.send(b"a0")
    assert anon.producer_name() == broker.sends_for("seq")[-1].producer_name
    named.close()
    anon.close()

    sends = broker.sends_for("seq")
    entries = [check_send(r) for r in sends]
    assert [(e.metadata.producer_name, e.metadata.sequence_id) for e in entries] == [
        ("given", 42),
        ("given", 43),
        ("given", 44),
        (anon.producer_name(), 0),
    ]
    assert anon.producer_name().startswith("fake-broker-")
    assert [r.send.sequence_id for r in sends] == [42, 43, 44, 0]
    assert [(r.ledger_id, r.entry_id) for r in sends] == [(sends[0].ledger_id, i) for i in range(4)]
    # the PRODUCER commands as recorded: the anonymous one asked the broker for a name
    assert [p.producer_name for p in broker.producers] == ["given", ""]


@pytest.mark.parametrize("codec", ["NONE", "ZLIB", "ZSTD"])
def test_chunked_messages(codec):
    max_size = 1024
    rng = random.Random(codec)
    big = [rng.randbytes(3000) + b"chunk " * 2000, rng.randbytes(9000)]
    with FakeBroker(max_message_size=max_size) as broker:
        c = open_client(broker)
        try:
            producer = c.create_producer(
                "chunks", batching_enabled=False, chunking_enabled=True, compression_type=CLIENT_CODEC[codec]
            )
            producer.send(big[0], properties={"part": "0"}, partition_key="big-key")
            producer.send(b"small one")
            producer.send(big[1], event_timestamp=12345)
            pname = producer.producer_name()
            producer.close()

            asm = pk.codec.ChunkAssembler()
            whole = []
            sends = broker.sends_for("chunks")
            for rec in sends:
                e = check_send(rec)
                assert len(e.payload) <= max_size
                if not e.metadata.HasField("uuid"):
                    assert not rec.send.is_chunk
                    whole.append(e.messages()[0])
                    continue
                md = e.metadata
                assert rec.send.is_chunk
                assert md.uuid == f"{pname}-{md.sequence_id}"
                assert e.compression == codec
                got = asm.add(e, (rec.ledger_id, rec.entry_id))
                if got is not None:
                    assert got.message.sequence_id == md.sequence_id
                    assert len(got.chunk_message_ids) == md.num_chunks_from_msg > 1
                    whole.append(got.message)
            assert asm.pending == [] and asm.discarded == [] and asm.duplicates == 0
            assert [m.payload for m in whole] == [big[0], b"small one", big[1]]
            assert whole[0].properties == {"part": "0"} and whole[0].key == "big-key"
            assert whole[2].event_time == 12345
            for rec in sends:
                md = pk.Entry.parse(rec.headers_and_payload).metadata
                if md.HasField("uuid") and (codec != "NONE" or md.HasField("uncompressed_size")):
                    # (the C++ client leaves uncompressed_size out of uncompressed chunks; Java sets it)
                    assert md.uncompressed_size == len(big[md.sequence_id // 2])

            # and the real consumer reassembles the chunks the broker stored
            consumer = c.subscribe("chunks", "s", initial_position=pulsar.InitialPosition.Earliest)
            got = [consumer.receive(RECEIVE_MS).data() for _ in range(3)]
            assert got == [big[0], b"small one", big[1]]
        finally:
            c.close()
    assert broker.errors == []


# ---------------------------------------------------------------------------------------------
# pk.encode_* -> fake broker -> consumer
# ---------------------------------------------------------------------------------------------

PUBLISH_TIME = 1_700_000_000_000


def intended_entries(codec: str, rng: random.Random) -> list[tuple[bytes, list[dict]]]:
    """(entry bytes, the messages a consumer must see) built with pulsarkit's encoders."""
    out = []
    single = {
        "payload": bytes(range(256)),
        "key": "single-key",
        "ordering_key": b"ord",
        "properties": {"x": "y", "ü": "✓"},
        "event_time": 777,
    }
    md = pk.message_metadata(
        "pk-producer",
        0,
        PUBLISH_TIME,
        partition_key=single["key"],
        ordering_key=single["ordering_key"],
        event_time=777,
        properties=single["properties"],
    )
    out.append((pk.encode_entry(md, single["payload"], compression=codec), [single]))

    batch = [
        {"payload": rng.randbytes(500), "key": "b0", "properties": {"i": "0"}, "event_time": 1000},
        {"payload": b"", "ordering_key": b"\x00\x01"},
        {
            "payload": b"compress me " * 100,
            "key": "b2",
            "ordering_key": b"o2",
            "properties": {"i": "2", "z": ""},
        },
        {"payload": rng.randbytes(1)},
    ]
    out.append(
        (
            pk.encode_batch(pk.message_metadata("pk-producer", 1, PUBLISH_TIME + 1), batch, compression=codec),
            batch,
        )
    )

    empty = {"payload": b""}
    out.append(
        (
            pk.encode_entry(pk.message_metadata("pk-producer", 5, PUBLISH_TIME + 2), b"", compression=codec),
            [empty],
        )
    )
    plain = {"payload": rng.randbytes(4096)}
    out.append(
        (
            pk.encode_entry(
                pk.message_metadata("pk-producer", 6, PUBLISH_TIME + 3), plain["payload"], compression=codec
            ),
            [plain],
        )
    )
    return out


def with_bem(entries: list[bytes], nums: list[int]) -> list[bytes]:
    """Adds broker entry metadata as Pulsar's two interceptors would (index of each entry's last message)."""
    out, index = [], -1
    for i, (e, n) in enumerate(zip(entries, nums)):
        index += n
        out.append(pk.add_broker_entry_metadata(e, broker_timestamp=PUBLISH_TIME + 10_000 + i, index=index))
    return out


def check_received(msg, want: dict, ids: tuple[int, int], batch_index: int, publish_time: int) -> None:
    assert msg.data() == want["payload"]
    assert msg.partition_key() == (want.get("key") or "")
    assert msg.ordering_key().encode("latin-1") == (want.get("ordering_key") or b"")
    assert msg.properties() == want.get("properties", {})
    assert msg.event_timestamp() == (want.get("event_time") or 0)
    assert msg.publish_timestamp() == publish_time
    mid = msg.message_id()
    assert (mid.ledger_id(), mid.entry_id(), mid.batch_index()) == (*ids, batch_index)
    assert msg.redelivery_count() == 0


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("bem", ["no-bem", "bem-stripped", "bem-exposed"])
def test_consumer_receives_pulsarkit_entries(codec, bem):
    rng = random.Random(f"{codec}-{bem}")
    made = intended_entries(codec, rng)
    entries = [e for e, _ in made]
    nums = [len(ms) for _, ms in made]
    if bem != "no-bem":
        entries = with_bem(entries, nums)
    with FakeBroker(expose_broker_entry_metadata=bem == "bem-exposed") as broker:
        ids = broker.preload("consume", entries)
        expected = []  # (ledger, entry, batch_index, wanted message, publish time)
        for (entry_bytes, wants), eid in zip(made, ids):
            e = pk.Entry.parse(entry_bytes)
            for bi, want in enumerate(wants):
                expected.append((*eid, bi if e.is_batch else -1, want, e.metadata.publish_time))
        # The C++ client cannot inflate a zlib payload whose uncompressed size is 0 (it fails with
        # Z_STREAM_ERROR, also on what its own producer sends: the same 8 bytes as pk.compress).
        # It then discards the entry with an ACK carrying validation_error=DecompressionError.
        empty_zlib = ids[2] if codec == "ZLIB" else None
        c = open_client(broker)
        try:
            consumer = c.subscribe("consume", "sub", initial_position=pulsar.InitialPosition.Earliest)
            received = [consumer.receive(RECEIVE_MS) for _ in range(len(expected) - 1)]
            try:
                received.append(consumer.receive(RECEIVE_MS if empty_zlib is None else 1000))
            except pulsar.Timeout:
                if empty_zlib is None:
                    raise
            for msg in received:
                consumer.acknowledge(msg)
            with pytest.raises(pulsar.Timeout):
                consumer.receive(200)
            consumer.close()
        finally:
            c.close()
        if len(received) < len(expected):
            expected = [x for x in expected if x[:2] != empty_zlib]
            [rejected] = [a for a in broker.acks if a.HasField("validation_error")]
            assert rejected.validation_error == 1  # DecompressionError
            assert [(m.ledgerId, m.entryId) for m in rejected.message_id] == [empty_zlib]
        else:
            assert not any(a.HasField("validation_error") for a in broker.acks)
        assert len(received) == len(expected)
        for msg, (lid, eid, bi, want, publish_time) in zip(received, expected):
            check_received(msg, want, (lid, eid), bi, publish_time)

        conn = broker.connects[0]
        client_may_see_bem = conn.protocol_version >= 18 and conn.feature_flags.supports_broker_entry_metadata
        dispatched = broker.dispatched
        assert [(d.message.message_id.ledgerId, d.message.message_id.entryId) for d in dispatched] == ids
        for d, stored in zip(dispatched, entries):
            if bem == "bem-exposed" and client_may_see_bem:
                assert d.data == stored
            else:
                assert d.data == pk.strip_broker_entry_metadata(stored)
                assert pk.peek_broker_entry_metadata(d.data) is None
        if bem == "bem-exposed":
            # the C++ client advertises PIP-70 support, so exposure is really exercised
            assert client_may_see_bem
            got = [m for d in dispatched for m in pk.Entry.parse(d.data).messages()]
            assert [m.index for m in got] == list(range(sum(nums)))
            assert [m.broker_timestamp for m in got] == [
                PUBLISH_TIME + 10_000 + i for i, n in enumerate(nums) for _ in range(n)
            ]
        # every ack is individual and names a delivered entry
        acked = {(mid.ledgerId, mid.entryId) for a in broker.acks for mid in a.message_id}
        assert acked == set(ids)
    assert broker.errors == []


def test_broker_entry_metadata_end_to_end():
    """Producer -> interceptors (timestamp, index) -> exposed to a consumer (BrokerEntryMetadataE2ETest)."""
    ticks = iter(range(5_000, 6_000))
    handed_out: list[int] = []

    def clock() -> int:  # the broker's clock; the topic reads it for more than the timestamps
        handed_out.append(next(ticks))
        return handed_out[-1]

    with FakeBroker(broker_timestamp=True, index=True, expose_broker_entry_metadata=True, clock=clock) as broker:
        c = open_client(broker)
        try:
            consumer = c.subscribe("e2e", "sub", initial_position=pulsar.InitialPosition.Earliest)
            producer = c.create_producer(
                "e2e", batching_enabled=True, batching_max_messages=5, batching_max_publish_delay_ms=60_000
            )
            produce_all(producer, [{"content": b"m%d" % i} for i in range(10)])
            received = [consumer.receive(RECEIVE_MS) for _ in range(10)]
            assert [m.data() for m in received] == [b"m%d" % i for i in range(10)]
            assert [m.message_id().batch_index() for m in received] == [0, 1, 2, 3, 4] * 2
        finally:
            c.close()
        stored = broker.entries("e2e")
        bems = [pk.peek_broker_entry_metadata(d) for _, d in stored]
        assert [b.index for b in bems] == [4, 9]
        # each entry's timestamp is a reading of the broker's clock, taken as it was added
        assert all(b.broker_timestamp in handed_out for b in bems)
        assert bems[0].broker_timestamp < bems[1].broker_timestamp
        # the SEND bytes are stored unchanged behind the broker entry metadata
        assert [pk.strip_broker_entry_metadata(d) for _, d in stored] == [s.headers_and_payload for s in broker.sends]
        sent = [m for d in broker.dispatched for m in pk.Entry.parse(d.data).messages()]
        assert [m.index for m in sent] == list(range(10))
    assert broker.errors == []


def test_consumer_reassembles_pulsarkit_chunks(broker, client):
    data = random.Random(3).randbytes(5000) + b"abc" * 3000
    z = pk.compress("ZSTD", data)
    n = 4
    size = math.ceil(len(z) / n)
    chunks = []
    for cid in range(n):
        md = pk.message_metadata(
            "chunker",
            9,
            PUBLISH_TIME,
            uuid="chunker-9",
            chunk_id=cid,
            num_chunks_from_msg=n,
            total_chunk_msg_size=len(z),
            compression=pk.proto.CompressionType["ZSTD"],
            uncompressed_size=len(data),
            partition_key="ck",
        )
        chunks.append(pk.encode_entry(md, z[cid * size : (cid + 1) * size]))
    ids = broker.preload("pk-chunks", chunks)
    consumer = client.subscribe("pk-chunks", "sub", initial_position=pulsar.InitialPosition.Earliest)
    msg = consumer.receive(RECEIVE_MS)
    assert msg.data() == data
    assert msg.partition_key() == "ck"
    assert (msg.message_id().ledger_id(), msg.message_id().entry_id()) == ids[-1]
    # the chunk acks cover every chunk of the message
    consumer.acknowledge(msg)
    broker.wait_for(
        lambda: {(m.ledgerId, m.entryId) for a in broker.acks for m in a.message_id} >= set(ids),
        what="chunk acks",
    )


def test_consumer_discards_entry_with_bad_checksum(broker, client):
    good = [pk.encode_entry(pk.message_metadata("p", i, PUBLISH_TIME), b"good %d" % i) for i in range(2)]
    bad = bytearray(pk.encode_entry(pk.message_metadata("p", 9, PUBLISH_TIME), b"corrupted payload"))
    bad[-1] ^= 0x01
    with pytest.raises(pk.ChecksumMismatchError):
        pk.Entry.parse(bytes(bad))
    ids = broker.preload("crc", [good[0], bytes(bad), good[1]])
    consumer = client.subscribe("crc", "sub", initial_position=pulsar.InitialPosition.Earliest)
    assert consumer.receive(RECEIVE_MS).data() == b"good 0"
    assert consumer.receive(RECEIVE_MS).data() == b"good 1"
    # the C++ client verifies our CRC like we do and reports the corrupt entry with ChecksumMismatch
    broker.wait_for(lambda: any(a.HasField("validation_error") for a in broker.acks), what="validation ack")
    [rejected] = [a for a in broker.acks if a.HasField("validation_error")]
    assert rejected.validation_error == 2  # ChecksumMismatch
    assert [(m.ledgerId, m.entryId) for m in rejected.message_id] == [ids[1]]


# ---------------------------------------------------------------------------------------------
# Broker mechanics with the real client: acks, redelivery, seek, last message id, publish hook
# ---------------------------------------------------------------------------------------------


def test_redelivery_seek_and_last_message_id(broker, client):
    producer = client.create_producer("mech", batching_enabled=False)
    mids = [producer.send(b"m%d" % i) for i in range(5)]
    consumer = client.subscribe("mech", "sub", initial_position=pulsar.InitialPosition.Earliest)
    first = [consumer.receive(RECEIVE_MS) for _ in range(5)]
    assert [m.data() for m in first] == [b"m%d" % i for i in range(5)]
    consumer.acknowledge(first[0])
    consumer.acknowledge(first[1])
    consumer.redeliver_unacknowledged_messages()
    again = [consumer.receive(RECEIVE_MS) for _ in range(3)]
    assert [m.data() for m in again] == [b"m2", b"m3", b"m4"]
    assert [m.redelivery_count() for m in again] == [1, 1, 1]
    assert broker.redelivery_requests

    consumer.acknowledge_cumulative(again[1])  # up to m3
    broker.wait_for(lambda: any(a.ack_type == 1 for a in broker.acks), what="cumulative ack")
    before = len(broker.dispatched)
    consumer.seek(mids[1])
    after_seek = consumer.receive(RECEIVE_MS)
    # The broker resets the cursor onto m1 (inclusive), and the client drops m1 itself because
    # start_message_id_inclusive is off by default: seek(id) resumes after id.
    assert broker.dispatched[before].message.message_id.entryId == mids[1].entry_id()
    assert after_seek.data() == b"m2"
    consumer.close()

    assert broker.commands["SEEK"] == 1 and broker.commands["SUBSCRIBE"] == 2  # re-subscribed after the seek

    reader = client.create_reader("mech", pulsar.MessageId.earliest)
    seen = []
    while reader.has_message_available():
        seen.append(reader.read_next(RECEIVE_MS).data())
    assert seen == [b"m%d" % i for i in range(5)]
    assert broker.commands["GET_LAST_MESSAGE_ID"] >= 1
    assert not broker.subscribes[-1].durable
    reader.close()


def test_seek_by_publish_time(broker, client):
    times = [PUBLISH_TIME + 1000 * i for i in range(4)]
    broker.preload(
        "by-time", [pk.encode_entry(pk.message_metadata("p", i, t), b"t%d" % i) for i, t in enumerate(times)]
    )
    consumer = client.subscribe("by-time", "sub", initial_position=pulsar.InitialPosition.Earliest)
    assert consumer.receive(RECEIVE_MS).data() == b"t0"
    consumer.seek(times[2])
    assert consumer.receive(RECEIVE_MS).data() == b"t2"
    assert broker.sends == []


def test_publish_hook_injects_errors_and_the_topic_assigns_ids(broker, client):
    calls = []

    def on_send(topic, send, hp):
        calls.append((topic, send.sequence_id, hp))
        payload = pk.Entry.parse(hp).payload
        if payload == b"transient" and len(calls) == 2:
            raise BrokerError("PersistenceError", "bookie unavailable")
        if payload == b"corrupt":
            return BrokerError("ChecksumError", "hook says the checksum is wrong")
        return None  # through to the topic's publish path

    broker.on_send = on_send
    producer = client.create_producer("hooked", batching_enabled=False, send_timeout_millis=20_000)
    first = producer.send(b"hello")
    lid = first.ledger_id()
    assert first.entry_id() == 0
    # Any SEND_ERROR but ChecksumError makes the client drop the connection and resend
    mid = producer.send(b"transient")
    assert (mid.ledger_id(), mid.entry_id()) == (lid, 1)  # the rejected try took no position
    # ChecksumError fails just that message
    with pytest.raises(pulsar.ChecksumError):
        producer.send(b"corrupt")
    topic = "persistent://public/default/hooked"
    assert [(t, s) for t, s, _ in calls] == [(topic, 0), (topic, 1), (topic, 1), (topic, 2)]
    recs = broker.sends_for("hooked")
    assert [(r.ledger_id, r.entry_id) for r in recs] == [(lid, 0), (None, None), (lid, 1), (None, None)]
    assert [r.error.code if r.error else None for r in recs] == [
        None,
        pk.proto.ServerError["PersistenceError"],
        None,
        pk.proto.ServerError["ChecksumError"],
    ]
    assert recs[1].headers_and_payload == recs[2].headers_and_payload  # resent byte for byte
    stored = broker.entries("hooked")
    assert [tuple(p) for p, _ in stored] == [(lid, 0), (lid, 1)]
    assert [d for _, d in stored] == [recs[0].headers_and_payload, recs[2].headers_and_payload]
    assert len(broker.connects) == 2  # the reconnect after the PersistenceError


# ---------------------------------------------------------------------------------------------
# The fake broker's protocol rules, driven by raw frames (no client library involved)
# ---------------------------------------------------------------------------------------------


class RawClient:
    def __init__(self, broker: FakeBroker) -> None:
        self.sock = socket.create_connection((broker.host, broker.port), timeout=5)
        self.decoder = pk.FrameDecoder()
        self.pending: list = []

    def send(self, cmd, hp=None) -> None:
        self.sock.sendall(pk.encode_command(cmd, hp))

    def recv(self):
        while not self.pending:
            data = self.sock.recv(1 << 16)
            assert data, "broker closed the connection"
            self.pending.extend(self.decoder.feed(data))
        return self.pending.pop(0)

    def connect(self, protocol_version: int, bem_flag: bool):
        cmd = pk.command("CONNECT", client_version="raw", protocol_version=protocol_version)
        if bem_flag:
            cmd.connect.feature_flags.supports_broker_entry_metadata = True
        self.send(cmd)
        return self.recv()

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize(
    "version,flag,expose,sees_bem",
    [
        (21, True, True, True),
        (18, True, True, True),
        (17, True, True, False),
        (21, False, True, False),
        (21, True, False, False),
        (10, True, True, False),
    ],
)
def test_raw_broker_entry_metadata_rule_and_versions(version, flag, expose, sees_bem):
    stored = pk.add_broker_entry_metadata(
        pk.encode_entry(pk.message_metadata("p", 0, PUBLISH_TIME), b"x"), broker_timestamp=1, index=0
    )
    with FakeBroker(expose_broker_entry_metadata=expose) as broker:
        broker.preload("raw", [stored])
        rc = RawClient(broker)
        try:
            cmd, hp = rc.connect(version, flag)
            assert cmd.type == pk.proto.CommandType["CONNECTED"] and hp is None
            assert cmd.connected.protocol_version == min(version, OWN_PROTOCOL_VERSION)
            assert cmd.connected.max_message_size == broker.max_message_size
            rc.send(pk.command("PING"))
            assert rc.recv()[0].type == pk.proto.CommandType["PONG"]
            assert broker.ping_clients() == 1
            assert rc.recv()[0].type == pk.proto.CommandType["PING"]
            rc.send(pk.command("PONG"))
            rc.send(
                pk.command(
                    "SUBSCRIBE",
                    topic="raw",
                    subscription="s",
                    subType=0,
                    consumer_id=1,
                    request_id=1,
                    initialPosition=1,
                )
            )
            assert rc.recv()[0].success.request_id == 1
            rc.send(pk.command("FLOW", consumer_id=1, messagePermits=10))
            cmd, hp = rc.recv()
            assert cmd.type == pk.proto.CommandType["MESSAGE"]
            if sees_bem:
                assert hp == stored
            elif version < 11:  # Pulsar drops the checksum for clients older than v11
                assert hp == pk.strip_broker_entry_metadata(stored)[6:]
            else:
                assert hp == pk.strip_broker_entry_metadata(stored)
            broker.wait_for(lambda: broker.pongs_received == 1, what="pong")
        finally:
            rc.close()
    assert broker.pings_received == 1
    assert broker.errors == []


def test_raw_send_with_bad_checksum_gets_send_error(broker):
    rc = RawClient(broker)
    try:
        rc.connect(21, True)
        rc.send(pk.command("GET_SCHEMA", request_id=7, topic="raw-send"))
        resp = rc.recv()[0].getSchemaResponse
        assert (resp.request_id, resp.error_code) == (7, pk.proto.ServerError["TopicNotFound"])
        rc.send(
            pk.command(
                "GET_OR_CREATE_SCHEMA",
                request_id=8,
                topic="raw-send",
                schema={"name": "s", "schema_data": b"", "type": 0},
            )
        )
        resp = rc.recv()[0].getOrCreateSchemaResponse
        assert (resp.request_id, resp.schema_version) == (8, bytes(8))
        rc.send(pk.command("PRODUCER", topic="raw-send", producer_id=3, request_id=1))
        ok = rc.recv()[0]
        assert ok.producer_success.request_id == 1 and ok.producer_success.producer_name
        hp = bytearray(
            pk.encode_entry(pk.message_metadata(ok.producer_success.producer_name, 0, PUBLISH_TIME), b"data")
        )
        hp[-1] ^= 0xFF
        rc.send(pk.command("SEND", producer_id=3, sequence_id=0), bytes(hp))
        err = rc.recv()[0]
        assert err.type == pk.proto.CommandType["SEND_ERROR"]
        assert err.send_error.error == pk.proto.ServerError["ChecksumError"]
        good = pk.encode_entry(pk.message_metadata(ok.producer_success.producer_name, 1, PUBLISH_TIME), b"data")
        rc.send(pk.command("SEND", producer_id=3, sequence_id=1), good)
        receipt = rc.recv()[0].send_receipt
        assert (receipt.sequence_id, receipt.message_id.entryId) == (1, 0)
        # a frame the codec cannot parse is recorded and ends the connection, nothing else
        rc.sock.sendall(struct.pack(">II", 6, 2) + b"\xff\xff")
        assert rc.sock.recv(100) == b""
    finally:
        rc.close()
    assert [s.error is not None for s in broker.sends] == [True, False]
    assert len(broker.errors) == 1 and "CorruptFrameError" in broker.errors[0]
    broker.errors.clear()
