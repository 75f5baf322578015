"""Avro's binary encoding read with the writer's schema: any bytes give a value or an AvroError, never
another exception, a hang or memory sized by a count in the datum (the schema is Pulsar's PulsarEvent,
the events are Pulsar's own: tests/analysis/topic_policy_events)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulsarkit.codec.avro import AvroError, Schema

FIXTURE = json.loads(
    (Path(__file__).resolve().parents[1] / "analysis" / "topic_policy_events" / "events.json").read_text()
)
SCHEMA = Schema(json.dumps(FIXTURE["schema"]))
EVENTS = [bytes.fromhex(v) for v in FIXTURE["events"].values()]


def _decode_or_error(data: bytes) -> None:
    try:
        SCHEMA.decode(data)
    except AvroError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_decode_or_are_an_avro_error(data):
    _decode_or_error(data)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(EVENTS), st.data())
def test_damaged_events_decode_or_are_an_avro_error(event, data):
    i = data.draw(st.integers(0, len(event) - 1))
    b = data.draw(st.integers(0, 255))
    _decode_or_error(event[:i] + bytes([b]) + event[i + 1 :])
    _decode_or_error(event[:i])


def test_named_types_nesting_and_every_primitive():
    schema = Schema(
        {
            "type": "record",
            "name": "R",
            "namespace": "a.b",
            "fields": [
                {"name": "f", "type": "float"},
                {"name": "d", "type": "double"},
                {"name": "by", "type": "bytes"},
                {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 2}},
                {"name": "again", "type": ["null", "F"]},
                {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "long"}}},
                {"name": "next", "type": ["null", "R"]},
            ],
        }
    )
    f = b"\x00\x00\x80\x3f"  # 1.0
    d = b"\x00\x00\x00\x00\x00\x00\x00\xc0"  # -2.0
    # a map of one key whose array is one block of -1 items (so followed by its size in bytes), the
    # item zigzag 0x7f = -64
    m = b"\x02" + b"\x02k" + b"\x01\x02\x7f\x00" + b"\x00"
    rec = f + d + b"\x04hi" + b"xy" + b"\x02zz" + m
    assert schema.decode(rec + b"\x02" + rec + b"\x00") == {
        "f": 1.0,
        "d": -2.0,
        "by": b"hi",
        "fx": b"xy",
        "again": b"zz",
        "m": {"k": [-64]},
        "next": {"f": 1.0, "d": -2.0, "by": b"hi", "fx": b"xy", "again": b"zz", "m": {"k": [-64]}, "next": None},
    }
    with pytest.raises(AvroError, match="deeper"):
        schema.decode(b"".join([f + d + b"\x00" + b"xy" + b"\x00" + b"\x00" + b"\x02"] * 70))
    with pytest.raises(AvroError, match="unknown type"):
        Schema({"type": "record", "name": "X", "fields": [{"name": "a", "type": "Nope"}]}).decode(b"")
