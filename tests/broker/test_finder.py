"""PersistentMessageFinder semantics on plain data: predicate, probing order, PIP-345 narrowing, index search."""

import random

import pulsarkit as pk
import pytest
from pulsarkit.broker.finder import (
    EntrySpace,
    LedgerSpan,
    find_newest_matching,
    find_position_by_index,
    find_position_by_time,
    find_position_range,
)
from pulsarkit.broker.interceptors import (
    INDEX_INTERCEPTOR,
    TIMESTAMP_INTERCEPTOR,
    AppendIndexMetadataInterceptor,
    ManagedLedgerInterceptorImpl,
    create_interceptors,
)


def build(ledgers, publish_times, broker_times=None, batch=1):
    """ledgers: list of (ledger_id, n_entries, close_ts). Returns spans and a reader."""
    data, k = {}, 0
    idx = ManagedLedgerInterceptorImpl([AppendIndexMetadataInterceptor()])
    for lid, n, _ in ledgers:
        for e in range(n):
            raw = pk.encode_batch(pk.message_metadata("p", k, publish_times[k]), [b"x"] * batch)
            raw = idx.before_add_entry(raw, batch)
            if broker_times is not None:
                ts = broker_times[k]
                bem = pk.peek_broker_entry_metadata(raw)
                raw = pk.add_broker_entry_metadata(pk.strip_broker_entry_metadata(raw), ts, bem.index)
            data[(lid, e)] = raw
            k += 1
    return [LedgerSpan(*l) for l in ledgers], lambda l, e: data[(l, e)]


def test_entry_space_positions():
    s = EntrySpace([LedgerSpan(3, 2, 10), LedgerSpan(4, 0, 11), LedgerSpan(7, 3, 0)])
    assert s.size == 5 and [s.at(k) for k in range(5)] == [(3, 0), (3, 1), (7, 0), (7, 1), (7, 2)]
    assert s.next_position(1) == (7, 0) and s.next_position(4) == (7, 3)
    assert s.index_of(7, 1) == 3


@pytest.mark.parametrize("n", [1, 2, 3, 10, 257])
def test_binary_search_matches_linear_scan_on_monotone_predicates(n):
    s = EntrySpace([LedgerSpan(1, n, 0)])
    for cut in range(n + 1):
        probes = []
        got = find_newest_matching(s, 0, n - 1, lambda k: probes.append(k) or k < cut)
        assert got == (cut - 1 if cut else None)
        assert len(probes) <= 2 + n.bit_length() + 1


def test_seek_by_time_prefers_broker_time_over_skewed_client_clocks():
    # Three producers whose clocks are hours apart; the broker stamps arrival order.
    hour = 3_600_000
    n = 30
    publish = [20_000_000 + (i % 3 - 1) * 3 * hour + i for i in range(n)]
    broker = [30_000_000 + 10 * i for i in range(n)]
    spans, read = build([(1, n, 0)], publish, broker)
    for i in range(n):
        pos = find_position_by_time(spans, read, broker[i])
        assert pos == (1, i), i  # lands exactly at the first entry the broker stored at/after T
    spans2, read2 = build([(1, n, 0)], publish)
    # Without broker timestamps the skewed client clocks make the search land elsewhere.
    assert any(find_position_by_time(spans2, read2, publish[i]) != (1, i) for i in range(n))


def test_seek_by_time_edges():
    spans, read = build([(1, 5, 1000), (2, 5, 0)], [100 * (i + 1) for i in range(10)])
    assert find_position_by_time(spans, read, 0) == (1, 0)  # nothing earlier: first position
    assert find_position_by_time(spans, read, 100) == (1, 0)  # strict '<'
    assert find_position_by_time(spans, read, 101) == (1, 1)
    assert find_position_by_time(spans, read, 550) == (2, 0)
    assert find_position_by_time(spans, read, 10_000) == (2, 5)  # after the last entry
    assert find_position_by_time([], read, 5) is None


def test_find_position_range_uses_close_times_and_skew():
    ledgers = [
        LedgerSpan(1, 10, 1_000_000),
        LedgerSpan(2, 10, 2_000_000),
        LedgerSpan(3, 10, 3_000_000),
        LedgerSpan(4, 5, 0),
    ]
    assert find_position_range(ledgers, 2_500_000, 60_000) == ((2, 9), (3, 9))
    assert find_position_range(ledgers, 2_030_000, 60_000) == ((1, 9), (3, 9))
    assert find_position_range(ledgers, 3_500_000, 60_000) == ((3, 9), None)
    assert find_position_range(ledgers, 500_000, 60_000) == (None, (1, 9))
    assert find_position_range(ledgers, 2_500_000, -1) == (None, None)


def test_seek_by_index_batches_of_1_and_10():
    for batch in (1, 10):
        spans, read = build([(1, 4, 50), (2, 4, 0)], [1] * 8, batch=batch)
        for msg_index in range(8 * batch):
            assert find_position_by_index(spans, read, msg_index) == (
                (1, msg_index // batch) if msg_index // batch < 4 else (2, msg_index // batch - 4)
            )


def test_index_interceptor_counts_batches_and_rolls_back():
    [ts, idx] = create_interceptors([TIMESTAMP_INTERCEPTOR, INDEX_INTERCEPTOR], clock=lambda: 42)
    mli = ManagedLedgerInterceptorImpl([ts, idx])
    e = pk.encode_entry(pk.message_metadata("p", 0, 1), b"x")
    got = [pk.peek_broker_entry_metadata(mli.before_add_entry(e, 2)).index for _ in range(10)]
    assert got == [1, 3, 5, 7, 9, 11, 13, 15, 17, 19]
    assert pk.peek_broker_entry_metadata(mli.before_add_entry(e, 1)).broker_timestamp == 42
    mli.after_failed_add_entry(1)
    assert idx.index == 19
    fresh = ManagedLedgerInterceptorImpl(create_interceptors([INDEX_INTERCEPTOR]))
    assert pk.peek_broker_entry_metadata(fresh.before_add_entry(e, 10)).index == 9
    fresh.after_failed_add_entry(10)
    assert fresh.index_interceptor.index == -1
    assert fresh.before_add_entry(e, 0) == e  # nothing added for n <= 0
    fresh.on_managed_ledger_properties_initialize({"index": "99"})
    fresh.on_managed_ledger_last_ledger_initialize(pk.add_broker_entry_metadata(e, index=50))
    assert fresh.index_interceptor.index == 99  # recovery only raises
    with pytest.raises(pk.PulsarkitError, match="unknown"):
        create_interceptors(["org.example.Nope"])


def test_random_monotone_predicates_agree_with_linear():
    rng = random.Random(3)
    for _ in range(300):
        n = rng.randrange(1, 200)
        cut = rng.randrange(0, n + 1)
        a = rng.randrange(0, n)
        b = rng.randrange(a, n)
        s = EntrySpace([LedgerSpan(1, n, 0)])
        got = find_newest_matching(s, a, b, lambda k: k < cut)
        want = max((k for k in range(a, b + 1) if k < cut), default=None)
        assert got == want


UNPARSABLE = [
    b"",
    b"\x0e\x01\x00\x00\x00\x00\x00\x00\x00\x10garbage",  # metadata size past the end
    b"\x0e\x02\x00\x00\x00\x05abcde",  # broker entry metadata cut short
]


@pytest.mark.parametrize("bad", UNPARSABLE)
def test_an_unparsable_entry_never_matches(bad):
    """``PersistentMessageFinder``'s predicates catch what deserializing throws, log it and return false:
    one bad entry (here the last, always probed, and one the bisection probes) does not fail the seek."""
    spans, read = build([(1, 10, 0)], [100 + k for k in range(10)])

    def reader(l, e):
        return bad if e in (5, 9) else read(l, e)

    assert find_position_by_time(spans, reader, 105) == (1, 5)
    assert find_position_by_time(spans, reader, 103) == (1, 3)
    assert find_position_by_index(spans, reader, 3) == (1, 3)  # index of entry k is k (batches of 1)
    assert find_position_by_index(spans, reader, 7) == (1, 5)  # entry 5 cannot say, as in Pulsar
