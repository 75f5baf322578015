"""The transaction-record codec (``pulsarkit.codec.txn``): records built with Python protobuf, packed
into PIP-160 entries natively, read back field for field (hypothesis), and errors with offsets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulsarkit.codec.txn import (
    BATCHED_ENTRY_PREFIX,
    TXN_OPS,
    TXN_STATUS,
    decode_pending_ack_entry,
    decode_txn_log_entry,
    pack_batched_entry,
    pending_ack_record,
    split_entry,
    txn_metadata_record,
)
from pulsarkit.errors import PulsarkitError

u64 = st.integers(0, 2**64 - 1)
names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
records = st.fixed_dictionaries(
    {
        "op": st.sampled_from(list(TXN_OPS.values())),
        "txnid": st.tuples(u64, u64),
        "new_status": st.none() | st.sampled_from(list(TXN_STATUS.values())),
        "partitions": st.lists(names, max_size=4),
        "subscriptions": st.lists(st.tuples(names, names), max_size=3),
        "timeout_ms": st.none() | u64,
        "owner": st.none() | names,
    }
)


@settings(max_examples=200, deadline=None)
@given(st.lists(records, max_size=30), st.booleans())
def test_records_round_trip_batched_or_single(recs, batched):
    enc = [
        txn_metadata_record(
            r["op"],
            r["txnid"],
            new_status=r["new_status"],
            partitions=r["partitions"],
            subscriptions=r["subscriptions"],
            timeout_ms=r["timeout_ms"],
            owner=r["owner"],
        )
        for r in recs
    ]
    if not batched and len(enc) != 1:
        batched = True
    entry = pack_batched_entry(enc) if batched else enc[0]
    assert entry.startswith(BATCHED_ENTRY_PREFIX) == batched
    assert split_entry(entry) == (batched, enc)
    got = decode_txn_log_entry(entry)
    assert len(got) == len(recs)
    for r, g in zip(recs, got, strict=True):
        assert (g.op, (g.txnid_most_bits, g.txnid_least_bits)) == (r["op"], r["txnid"])
        assert (g.new_status, g.partitions, g.timeout_ms, g.owner) == (
            r["new_status"],
            tuple(r["partitions"]),
            r["timeout_ms"],
            r["owner"],
        )
        assert [(s.topic, s.subscription) for s in g.subscriptions] == r["subscriptions"]
        assert g.batched == batched
        assert {g: 1}[g] == 1  # a frozen record holding tuples hashes


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1), st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4)
        ),
        max_size=5,
    ),
    st.sampled_from(["ACK", "COMMIT", "ABORT"]),
    st.sampled_from(["Individual", "Cumulative"]),
)
def test_pending_ack_records_round_trip(positions, op, ack_type):
    """Positions are Java longs: the ids come back as signed 64-bit values, as the broker holds them."""
    rec = pending_ack_record(
        op, (1, 2), [(lid, eid, acks, 64 if acks else None) for lid, eid, acks in positions], ack_type
    )
    (g,) = decode_pending_ack_entry(pack_batched_entry([rec]))
    assert (g.op, g.ack_type) == (op, ack_type)
    assert [(p.ledger_id, p.entry_id, p.ack_set) for p in g.positions] == [
        (lid, eid, None if acks is None else tuple(acks)) for lid, eid, acks in positions
    ]
    # the records are values: hashable, equal when decoded twice
    assert hash(g) == hash(decode_pending_ack_entry(pack_batched_entry([rec]))[0])


def test_errors_name_the_offset():
    with pytest.raises(PulsarkitError, match="offset 5"):
        decode_txn_log_entry(b"\x0e\x01\x00\x01\x0a\x09\x08")
    with pytest.raises(PulsarkitError, match="version 2"):
        split_entry(b"\x0e\x01\x00\x02")
