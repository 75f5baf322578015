"""Arrow kernels agree with the single-entry API and never drop a row."""

import pulsarkit as pk
import pyarrow as pa
import pytest


def sample_entries():
    md = pk.message_metadata("prod", 100, 5000, partition_key="pk", event_time=42)
    plain = pk.encode_entry(md, b"single")
    batch = pk.encode_batch(
        pk.message_metadata("prod", 200, 6000),
        [{"payload": b"a", "key": "ka", "properties": {"p": "1"}}, b"bb", b"ccc"],
        "SNAPPY",
    )
    bem = pk.add_broker_entry_metadata(batch, broker_timestamp=7000, index=12)
    corrupt = bytearray(plain)
    corrupt[-1] ^= 1
    return [plain, batch, bem, bytes(corrupt), b"\x00\x00", None]


@pytest.mark.parametrize("typ", [pa.binary(), pa.large_binary(), pa.binary_view()])
def test_decode_metadata_matches_entry_parse(typ):
    entries = sample_entries()
    t = pk.bulk.decode_metadata(pa.array(entries, typ), verify_checksum=True).to_pylist()
    assert len(t) == len(entries)
    for row, raw in zip(t[:3], entries[:3]):
        e = pk.Entry.parse(raw)
        assert row["producer_name"] == e.metadata.producer_name
        assert row["sequence_id"] == e.metadata.sequence_id
        assert row["publish_time"] == e.metadata.publish_time
        assert row["num_messages"] == e.num_messages and row["is_batch"] == e.is_batch
        assert row["compression"] == e.compression
        assert row["checksum_ok"] is True and row["error"] is None
    assert t[0]["partition_key"] == "pk" and t[0]["event_time"] == 42
    assert t[2]["broker_timestamp"] == 7000 and t[2]["index"] == 12
    assert t[3]["checksum_ok"] is False and t[3]["error"] is None  # readable metadata, bad CRC
    assert t[4]["error"] and "offset 0" in t[4]["error"] and t[4]["producer_name"] is None
    assert t[5]["error"] is None and t[5]["producer_name"] is None


def test_verify_strip_peek():
    entries = sample_entries()
    arr = pa.array(entries)
    v = pk.bulk.verify_checksums(arr).to_pydict()
    assert v["checksum_ok"] == [True, True, True, False, None, None]
    assert v["error"][4] is not None
    s = pk.bulk.strip_broker_entry_metadata(arr).to_pydict()
    assert s["entry"][:4] == [entries[0], entries[1], entries[1], entries[3]]
    p = pk.bulk.peek_broker_entry_metadata(arr).to_pydict()
    assert p["broker_timestamp"] == [None, None, 7000, None, None, None]
    large = pk.bulk.strip_broker_entry_metadata(pa.array(entries, pa.large_binary()))
    assert large.schema.field("entry").type == pa.large_binary()


def test_explode_matches_messages_and_keeps_bad_rows():
    entries = sample_entries()
    t = pk.bulk.explode_messages(pa.array(entries)).to_pylist()
    expected = []
    for i, raw in enumerate(entries[:3]):
        for m in pk.Entry.parse(raw).messages():
            expected.append((i, m.batch_index, m.payload, m.key, m.sequence_id, m.index))
    got = [
        (r["entry_index"], r["batch_index"], r["payload"], r["key"], r["sequence_id"], r["index"])
        for r in t
        if r["error"] is None and r["payload"] is not None
    ]
    assert got == expected
    assert [r["index"] for r in t if r["entry_index"] == 2] == [10, 11, 12]
    errors = [r for r in t if r["error"]]
    assert [r["entry_index"] for r in errors] == [3, 4]
    assert "checksum" in errors[0]["error"]
    assert t[-1]["entry_index"] == 5 and t[-1]["payload"] is None and t[-1]["error"] is None
    assert dict(t[1]["properties"]) == {"p": "1"}


def test_chunked_array_and_explode_table():
    entries = sample_entries()[:3]
    chunked = pa.chunked_array([pa.array(entries[:1]), pa.array(entries[1:])])
    assert pk.bulk.decode_metadata(chunked).num_rows == 3
    table = pa.table({"ledger_id": [1, 1, 2], "entry_id": [0, 1, 0], "entry": entries})
    out = pk.bulk.explode_table(table, keep=["ledger_id", "entry_id"])
    assert out.num_rows == 7
    assert out.column("entry_id").to_pylist() == [0, 1, 1, 1, 0, 0, 0]


def test_wrong_type_is_a_typed_error():
    with pytest.raises(pk.PulsarkitError, match="binary"):
        pk.bulk.decode_metadata(pa.array([1, 2, 3]))


@pytest.mark.parametrize("typ", [pa.binary(), pa.large_binary(), pa.binary_view()])
def test_zero_copy_strip_matches_copying_strip(typ):
    entries = sample_entries()
    arr = pa.array(entries, typ)
    view = pk.bulk.strip_broker_entry_metadata(arr, output="binary_view")
    copy = pk.bulk.strip_broker_entry_metadata(arr)
    assert view.schema.field("entry").type == pa.binary_view()
    assert view.column("entry").to_pylist() == copy.column("entry").to_pylist()
    assert view.column("error").to_pylist() == copy.column("error").to_pylist()
    if typ == pa.binary():
        # The views share the input's values buffer: no entry bytes were copied.
        assert view.column("entry").buffers()[2].address == arr.buffers()[2].address
    with pytest.raises(pk.PulsarkitError, match="output") as ei:
        pk.bulk.strip_broker_entry_metadata(arr, output="nope")
    assert ei.value.offset is None  # every native PulsarkitError is built with its attributes


def _transactional_by_decode(arr):
    md = pk.bulk.decode_metadata(arr)
    most, least = md.column("txnid_most_bits").to_pylist(), md.column("txnid_least_bits").to_pylist()
    return next((i for i, (a, b) in enumerate(zip(most, least)) if a is not None or b is not None), None)


@pytest.mark.parametrize("typ", [pa.binary(), pa.large_binary(), pa.binary_view()])
def test_first_transactional_is_the_first_row_decode_metadata_gives_a_transaction(typ):
    txn = pk.encode_entry(pk.message_metadata("t", 1, 10, txnid_most_bits=3, txnid_least_bits=4), b"x")
    least_only = pk.encode_entry(pk.message_metadata("t", 2, 10, txnid_least_bits=9), b"y")
    plain = sample_entries()
    corrupt_txn = txn[:-3]  # the metadata still decodes; the payload is cut
    for entries in (
        plain,
        [*plain, txn],
        [txn, *plain],
        [*plain[:4], least_only, txn],
        [None, b"\x00", corrupt_txn],
        [],
    ):
        arr = pa.array(entries, typ)
        assert pk.bulk.first_transactional(arr) == _transactional_by_decode(arr), entries
    assert pk.bulk.first_transactional(pa.array([*plain, txn], typ)) == len(plain)
    chunked = pa.chunked_array([pa.array(plain, typ), pa.array([least_only], typ)])
    assert pk.bulk.first_transactional(chunked) == len(plain)
    assert pk.bulk.first_transactional(pa.chunked_array([pa.array(plain, typ)])) is None


# -- inputs whose declared sizes would make the output many times the input: refused, not allocated ---------


def _varint(v: int) -> bytes:
    out = b""
    while v >= 0x80:
        out += bytes([(v & 0x7F) | 0x80])
        v >>= 7
    return out + bytes([v])


def _raw_entry(md: bytes, body: bytes) -> bytes:
    """headersAndPayload without a checksum: [u32 metadata size][MessageMetadata][payload]."""
    return len(md).to_bytes(4, "big") + md + body


def test_a_long_producer_name_over_many_messages_is_refused_not_copied():
    """Each exploded row repeats its entry's producer name: 64 KiB over 40 000 declared (empty) messages
    would be 2.6 GB from a 300 KB entry. Refused with LimitExceededError before any copy (it used to reserve
    the product and abort the process when the allocator refused)."""
    name, k = 64 << 10, 40_000
    md = b"\x0a" + _varint(name) + b"p" * name + b"\x10\x00\x18\x01\x58" + _varint(k)
    entry = _raw_entry(md, (b"\x00\x00\x00\x02\x18\x00") * k)  # records: SingleMessageMetadata{payload_size=0}
    with pytest.raises(pk.LimitExceededError, match="repeated for every message"):
        pk.bulk.explode_messages(pa.array([entry], pa.binary()), verify_checksum=False)
    small = _raw_entry(b"\x0a\x01p\x10\x00\x18\x01\x58" + _varint(3), b"\x00\x00\x00\x02\x18\x00" * 3)
    assert pa.record_batch(pk.bulk.explode_messages(pa.array([small], pa.binary()))).num_rows == 3


def test_rebatch_refuses_placeholders_for_a_forged_message_count():
    """A batch holding only its retained message declares 2^31-1 messages: writing a placeholder for each
    would be 12 GB from a 34-byte entry. Refused, as a decompression past the limit is."""
    n = 0x7FFFFFFF
    md = b"\x0a\x01p\x10\x00\x18\x01\x58" + _varint(n) + b"\xf8\x01" + _varint(n - 1)
    smm = b"\x12\x01k\x18\x01"
    entry = _raw_entry(md, len(smm).to_bytes(4, "big") + smm + b"v")
    with pytest.raises(pk.LimitExceededError, match="placeholders"):
        pk._native.rebatch_entry(entry, keep=[n - 1])


@pytest.mark.parametrize("indexes", [[0, 0], [2, 0]])
def test_compacted_batch_indexes_must_name_each_message_once_in_order(indexes):
    """Phase two lists the messages it kept in batch order; a repeat or a step back is corrupt metadata
    (it used to give two messages with one batch index, which rebatch then wrote as an unreadable batch)."""
    md = b"\x0a\x01p\x10\x00\x18\x01\x58\x03" + b"".join(b"\xf8\x01" + _varint(i) for i in indexes)
    body = b"".join(
        (len(s) + 0).to_bytes(4, "big") + s + b"v" for s in (b"\x12\x01" + k + b"\x18\x01" for k in (b"a", b"b"))
    )
    entry = _raw_entry(md, body)
    with pytest.raises(pk.CorruptEntryError, match="not strictly increasing"):
        pk._native.entry_messages(entry, verify_checksum=False)
    with pytest.raises(pk.CorruptEntryError, match="not strictly increasing"):
        pk._native.rebatch_entry(entry, keep=[0, 1, 2])
