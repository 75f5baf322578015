"""``bulk.json_lines`` prints every row of a message batch exactly as ``json.dumps(json_record(row))``."""

import json

import pulsarkit as pk
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulsarkit.scan.schema import arrow_schema, json_record, message_fields

I64 = st.integers(-(1 << 63), (1 << 63) - 1)
I32 = st.integers(-(1 << 31), (1 << 31) - 1)
TEXT = st.text(max_size=12)  # every code point but surrogates: control characters, DEL, non-BMP
KEYS = st.sampled_from(["a", "b", "é", "\x00"]) | TEXT


def _row(markers: bool) -> st.SearchStrategy:
    fields = {
        "topic": st.none() | TEXT,
        "partition": st.none() | I32,
        "ledger_id": st.none() | I64,
        "entry_id": st.none() | I64,
        "batch_index": st.none() | I32,
        "key": st.none() | TEXT,
        # repeated keys: dict() keeps the first place and the last value
        "properties": st.none() | st.lists(st.tuples(KEYS, st.none() | TEXT), max_size=20),
        "payload": st.none() | st.binary(max_size=40),
        "publish_time": st.none() | I64,
        "event_time": st.none() | I64,
        "sequence_id": st.none() | I64,
        "producer_name": st.none() | TEXT,
        "null_value": st.none() | st.booleans(),
        "encrypted": st.none() | st.booleans(),
        "broker_timestamp": st.none() | I64,
        "broker_index": st.none() | I64,
        "txn_most_bits": st.none() | I64,
        "txn_least_bits": st.none() | I64,
        "txn_state": st.none() | st.sampled_from(["COMMITTED", "ABORTED", "UNKNOWN"]),
    }
    if markers:
        fields["marker"] = st.none() | st.sampled_from(["TXN_COMMIT", "TXN_ABORT", "REPLICATED_SUBSCRIPTION_SNAPSHOT"])
    return st.fixed_dictionaries(fields)


def _expected(rows: list[dict]) -> bytes:
    return "".join(json.dumps(json_record(r)) + "\n" for r in rows).encode("ascii")


@pytest.mark.parametrize("markers", [False, True])
@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_json_lines_match_json_dumps_of_json_record(markers, data):
    rows = data.draw(st.lists(_row(markers), max_size=8))
    b = pa.RecordBatch.from_pylist(rows, schema=arrow_schema(message_fields(markers)))
    assert pk.bulk.json_lines(b) == _expected(b.to_pylist())
    # a table of several batches, and the string/binary layouts a batch may come in
    assert pk.bulk.json_lines(pa.Table.from_batches([b, b])) == _expected(b.to_pylist()) * 2


def test_json_lines_other_layouts_and_empty():
    row = {f: None for f, _ in message_fields()} | {"topic": "t\u2028", "payload": b"\xff" * 5, "partition": 3}
    b = pa.RecordBatch.from_pylist([row], schema=arrow_schema(message_fields()))
    want = _expected(b.to_pylist())
    large = b.set_column(0, "topic", b.column("topic").cast(pa.large_string()))
    large = large.set_column(7, "payload", b.column("payload").cast(pa.binary_view()))
    assert pk.bulk.json_lines(large) == want
    assert pk.bulk.json_lines(b.slice(1)) == b""
    assert pk.bulk.json_lines(b.slice(0, 1)) == want


def test_json_lines_rejects_other_batches():
    with pytest.raises(pk.PulsarkitError, match="no column"):
        pk.bulk.json_lines(pa.RecordBatch.from_pydict({"topic": ["x"]}))
    bad = pa.RecordBatch.from_pylist([{}], schema=arrow_schema(message_fields()))
    bad = bad.set_column(2, "ledger_id", pa.array(["1"]))
    with pytest.raises(pk.PulsarkitError, match="ledger_id"):
        pk.bulk.json_lines(bad)
