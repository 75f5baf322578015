"""``TxnLogBufferedWriter`` as Pulsar's ``TxnLogBufferedWriterTest`` and ``TxnBatchedPositionImplTest``
check it: callbacks once each and in order, batch sizes and indexes, the entries read back, flush
triggers, the timer, failures, close mid-stream, and the metrics."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from pulsarkit.broker.transaction import (
    COORDINATOR_PREFIX,
    TxnBatchedPosition,
    TxnLogBufferedWriter,
    TxnLogBufferedWriterConfig,
    TxnLogBufferedWriterMetricsStats,
)
from pulsarkit.codec.txn import split_entry
from pulsarkit.errors import BufferedWriterClosedError, PulsarkitError
from pulsarkit.managed_ledger.ack_set import bitset_from_words
from pulsarkit.managed_ledger.position import Position
from txn_helpers import FakeLedger, ManualTimer, QueueExecutor


def writer(ledger, registry=None, **cfg):
    ex, timer = QueueExecutor(), ManualTimer()
    cfg.setdefault("batch_enabled", True)
    metrics = TxnLogBufferedWriterMetricsStats(COORDINATOR_PREFIX, "b1", registry) if registry else None
    w = TxnLogBufferedWriter(ledger, TxnLogBufferedWriterConfig(**cfg), metrics=metrics, executor=ex, timer=timer)
    return w, ex, timer


def record(i: int, size: int = 8) -> bytes:
    return i.to_bytes(4, "big") + bytes(size - 4)


def outcomes(futures):
    out = []
    for f in futures:
        assert f.done(), "a callback never fired"
        out.append(f.exception() or f.result())
    return out


# (records, max_records, max_size, record size, ledger failure rate, close after n adds)
CASES = {
    "normal": (300, 32, 4096, 8, 0, None),
    "small-count": (5, 32, 4096, 8, 0, None),
    "large-count": (2000, 512, 1 << 20, 8, 0, None),
    "large-data": (40, 32, 64, 100, 0, None),
    "batch-of-1": (10, 1, 4096, 8, 0, None),
    "batch-of-2": (11, 2, 4096, 8, 0, None),
    "bookie-always-fails": (50, 10, 4096, 8, True, None),
    "bookie-sometimes-fails": (300, 10, 4096, 8, 0.3, None),
    "close-mid-stream": (100, 16, 4096, 8, 0, 40),
}


@pytest.mark.parametrize("case", CASES)
def test_main_process(case):
    n, max_records, max_size, size, fail, close_after = CASES[case]
    ledger = FakeLedger(fail=fail, seed=1)
    w, ex, timer = writer(ledger, max_records=max_records, max_size=max_size)
    fired: list[int] = []
    futures = []
    for i in range(n):
        f = w.async_add_data(record(i, size))
        f.add_done_callback(lambda _f, i=i: fired.append(i))
        futures.append(f)
        if i % 7 == 0:
            ex.run()
        if close_after is not None and i + 1 == close_after:
            ex.run()
            w.close()
    ex.run()
    timer.fire()
    ex.run()
    res = outcomes(futures)
    assert sorted(fired) == list(range(n))  # once each
    if close_after is None:
        assert fired == list(range(n))  # in order (after close, Pulsar fails late adds at once)
    else:
        ok = [i for i in fired if not isinstance(res[i], BaseException)]
        assert ok == sorted(ok)
    # Every position names an entry holding exactly that record.
    for i, r in enumerate(res):
        if isinstance(r, BaseException):
            continue
        data = ledger.entries[r.entry_id]
        batched, records = split_entry(data)
        if isinstance(r, TxnBatchedPosition):
            assert batched and len(records) == r.batch_size and records[r.batch_index] == record(i, size)
        else:
            assert not batched and data == record(i, size)
    if fail is True:
        assert all(isinstance(r, OSError) for r in res)
    if close_after is not None:
        # two full batches were written before the close; the pending 8 and every later add fail
        assert all(isinstance(r, TxnBatchedPosition) for r in res[:32])
        assert all(isinstance(r, BufferedWriterClosedError) for r in res[32:])
    if max_records <= 1:  # batching forced off
        assert not w.batch_enabled and all(type(r) is Position for r in res)
    if case == "large-data":  # every record is over max_size: written alone, no prefix
        assert all(type(r) is Position for r in res)


def test_a_failed_add_fails_every_callback_of_its_batch_only():
    ledger = FakeLedger()
    w, ex, _ = writer(ledger, max_records=4)
    first = [w.async_add_data(record(i)) for i in range(4)]
    ex.run()
    ledger.fail = True
    second = [w.async_add_data(record(i)) for i in range(4)]
    ex.run()
    assert all(isinstance(r, TxnBatchedPosition) for r in outcomes(first))
    assert all(isinstance(r, OSError) for r in outcomes(second))


def test_flush_thresholds():
    ledger = FakeLedger()
    w, ex, timer = writer(ledger, max_records=32, max_size=256)
    for i in range(31):
        w.async_add_data(record(i))
    ex.run()
    assert ledger.entries == []  # no flush before the delay or a threshold
    w.async_add_data(record(31))
    ex.run()
    assert len(ledger.entries) == 1 and len(split_entry(ledger.entries[0])[1]) == 32  # at 32 records
    for i in range(10):
        w.async_add_data(record(i, 32))  # 320 bytes: flush when the sum reaches 256
    ex.run()
    assert len(ledger.entries) == 2 and len(split_entry(ledger.entries[1])[1]) == 8
    w.async_add_data(record(1))
    ex.run()
    assert len(ledger.entries) == 2
    timer.fire()
    ex.run()
    assert len(ledger.entries) == 3  # the timer flushes what is pending


def test_timer_rearms_after_each_run_and_never_floods_the_executor():
    w, ex, timer = writer(FakeLedger(), max_records=32)
    for _ in range(20):  # the executor is stalled: the timer fires but its task has not run
        timer.fire()
        assert len(ex.tasks) <= 1 and len(timer.pending) == 0
    ex.run()
    assert len(timer.pending) == 1  # re-armed once the task ran, even with nothing to flush


def test_large_record_flushes_the_pending_batch_first_then_goes_alone():
    ledger = FakeLedger()
    w, ex, _ = writer(ledger, max_records=32, max_size=64)
    small = [w.async_add_data(record(i)) for i in range(3)]
    big = w.async_add_data(record(99, 64))
    ex.run()
    assert [r.batch_size for r in outcomes(small)] == [3, 3, 3]
    assert outcomes([big]) == [Position(7, 1)] and ledger.entries[1] == record(99, 64)


def test_switching_batching_at_run_time():
    ledger = FakeLedger()
    w, ex, timer = writer(ledger, max_records=32)
    a = [w.async_add_data(record(i)) for i in range(3)]
    w.set_batch_enabled(False)
    b = w.async_add_data(record(3))
    ex.run()
    assert [type(x) for x in outcomes(a)] == [TxnBatchedPosition] * 3 and type(outcomes([b])[0]) is Position
    w.set_batch_enabled(True)
    c = [w.async_add_data(record(i)) for i in range(2)]
    ex.run()
    timer.fire()
    ex.run()
    assert [x.batch_size for x in outcomes(c)] == [2, 2]


def test_close_fails_pending_and_later_adds_and_stops_the_timer():
    w, ex, timer = writer(FakeLedger(), max_records=32)
    pending = w.async_add_data(record(1))
    w.close()
    late = w.async_add_data(record(2))
    ex.run()
    assert isinstance(pending.exception(), BufferedWriterClosedError)
    assert isinstance(late.exception(), BufferedWriterClosedError)
    assert timer.pending == [] and w.state == "CLOSED"


def test_validator_limits_apply_only_with_batching_on():
    TxnLogBufferedWriterConfig(batch_enabled=False, max_records=1, max_size=1, max_delay_ms=0).validate()
    TxnLogBufferedWriterConfig(batch_enabled=True, max_records=10, max_size=128 * 1024, max_delay_ms=1).validate()
    for bad in ({"max_records": 9}, {"max_size": 128 * 1024 - 1}, {"max_delay_ms": 0}):
        with pytest.raises(PulsarkitError):
            TxnLogBufferedWriterConfig(batch_enabled=True, **bad).validate()


# ------------------------------------------------------------------ TxnBatchedPositionImplTest


@pytest.mark.parametrize("size,index", [(10, 5), (64, 0), (64, 63), (230, 120), (256, 255)])
def test_set_ack_set_by_index_clears_only_that_bit(size, index):
    bits = bitset_from_words(TxnBatchedPosition(1, 2, size, index).ack_set())
    assert bits == ((1 << size) - 1) & ~(1 << index)


def test_batch_of_one_has_no_ack_set():
    assert TxnBatchedPosition(1, 2, 1, 0).ack_set() is None


def test_batched_position_is_interchangeable_with_a_plain_position():
    p, b = Position(3, 4), TxnBatchedPosition(3, 4, 10, 7)
    assert p == b and hash(p) == hash(b) and not (p < b) and not (b < p)
    assert {p: "x"}[b] == "x" and {b: "y"}[p] == "y"
    assert sorted([TxnBatchedPosition(3, 5, 2, 0), p, TxnBatchedPosition(3, 3, 2, 1)]) == [(3, 3), (3, 4), (3, 5)]


# ------------------------------------------------------------------ metrics


def sample(reg, name, trigger_labels=True):
    v = reg.get_sample_value(name, {"broker": "b1"} if trigger_labels else {})
    return 0 if v is None else v


def test_metrics_when_batching_is_off_records_nothing():
    reg = CollectorRegistry()
    w, ex, _ = writer(FakeLedger(), reg, batch_enabled=False)
    for i in range(5):
        w.async_add_data(record(i))
    ex.run()
    assert sample(reg, "pulsar_txn_tc_bufferedwriter_batch_records_count") == 0


@pytest.mark.parametrize("trigger", ["max_records", "max_size", "max_delay", "large_data"])
def test_metrics_by_trigger(trigger):
    reg = CollectorRegistry()
    w, ex, timer = writer(FakeLedger(), reg, max_records=4, max_size=1000)
    n = {"max_records": 4, "max_size": 2, "max_delay": 3, "large_data": 3}[trigger]
    size = 500 if trigger == "max_size" else 8
    for i in range(n):
        w.async_add_data(record(i, size))
    if trigger == "large_data":
        w.async_add_data(record(9, 2000))
    ex.run()
    if trigger == "max_delay":
        timer.fire()
        ex.run()
    p = "pulsar_txn_tc_bufferedwriter"
    assert sample(reg, f"{p}_flush_trigger_{trigger}_total") == 1
    assert sample(reg, f"{p}_batch_records_count") == 1 and sample(reg, f"{p}_batch_records_sum") == n
    assert sample(reg, f"{p}_batch_size_bytes_sum") == n * size  # the large record itself is not observed
    assert sample(reg, f"{p}_batch_oldest_record_delay_seconds_count") == 1
    w.close()
    ex.run()
    assert sample(reg, f"{p}_batch_records_count") == 0  # back to nothing after close


# ------------------------------------------------------------------ async_add_many


def _run_both(calls, **cfg):
    """The same records through async_add_data one by one and through async_add_many in the given call
    sizes (the timer fired at the same points): entries, positions and metrics must be the same."""
    out = []
    for many in (False, True):
        reg = CollectorRegistry()
        ledger = FakeLedger(fail=cfg.pop("fail", 0) if not many else out[0][3], seed=3)
        w, ex, timer = writer(ledger, reg, **cfg)
        positions: list = []
        for call in calls:
            if call == "tick":
                ex.run()
                timer.fire()
                ex.run()
                continue
            if many:
                f = w.async_add_many(call)
                ex.run()
                positions.append(f)
            else:
                positions.append([w.async_add_data(r) for r in call])
                ex.run()
        timer.fire()
        ex.run()
        metrics = sorted(
            (s.name, sorted(s.labels.items()), s.value)
            for m in reg.collect()
            for s in m.samples
            if not s.name.endswith("_created") and ("delay" not in s.name or s.name.endswith("_count"))  # wall clock
        )
        out.append((ledger.entries, positions, metrics, ledger.fail))
    return out


def _flat(positions_by_call, many):
    res = []
    for p in positions_by_call:
        if many:
            res.append(p.exception() or list(p.result()))
        else:
            res.append([f.exception() or f.result() for f in p])
    return res


@pytest.mark.parametrize(
    "sizes,cfg",
    [
        ([5, 700, 3, 1, 40], {"max_records": 32, "max_size": 4096}),  # count triggers inside a call
        ([10, "tick", 10, 2000], {"max_records": 512, "max_size": 1 << 20}),  # timer flushes between calls
        ([50, 50], {"max_records": 10, "max_size": 64}),  # size triggers: record by record
        ([20, 7], {"batch_enabled": False}),  # batching off: every record alone
        ([9, 9], {"max_records": 1}),  # batching forced off
    ],
)
def test_async_add_many_writes_what_async_add_data_writes(sizes, cfg):
    calls = [
        s if s == "tick" else [record(1000 * j + i, 8 + (i * 5) % 30) for i in range(s)] for j, s in enumerate(sizes)
    ]
    (e1, p1, m1, _), (e2, p2, m2, _) = _run_both(calls, **cfg)
    assert e1 == e2 and m1 == m2
    one, many = _flat(p1, False), _flat(p2, True)
    assert one == many
    for a, b in zip([x for c in one for x in c], [x for c in many for x in c], strict=True):
        assert type(a) is type(b) and repr(a) == repr(b)  # batch size and index too, not only (ledger, entry)


def test_async_add_many_with_a_large_record_and_a_failed_entry():
    calls = [[record(1), record(2), record(3, 64), record(4)]]
    (e1, p1, *_), (e2, p2, *_) = _run_both(calls, max_records=32, max_size=64)
    assert e1 == e2 and len(e2) == 3  # the two pending flushed first, the large one alone, the last by the timer
    assert _flat(p1, False) == _flat(p2, True)
    positions = p2[0].result()
    assert len(positions) == 4 and type(positions[2]) is Position and positions[-1] == positions[3]
    assert [p.batch_index for p in positions[:2]] == [0, 1] and positions[1:3] == [positions[1], positions[2]]
    # a failed entry fails the call's future; the records of entries written before it stay written
    ledger = FakeLedger()
    w, ex, _ = writer(ledger, max_records=4)
    ok = w.async_add_many([record(i) for i in range(4)])
    ex.run()
    ledger.fail = True
    bad = w.async_add_many([record(i) for i in range(6)])
    ex.run()
    assert len(ok.result()) == 4 and isinstance(bad.exception(), OSError) and len(ledger.entries) == 1


def test_async_add_many_closed_empty_and_unserializable():
    w, ex, _ = writer(FakeLedger(), max_records=32)
    assert list(w.async_add_many([]).result()) == []
    bad = w.async_add_many([record(1), object()])
    assert isinstance(bad.exception(), TypeError) and not ex.tasks  # nothing queued
    pending = w.async_add_many([record(1), record(2)])
    w.close()
    late = w.async_add_many([record(3)])
    ex.run()
    assert isinstance(pending.exception(), BufferedWriterClosedError)
    assert isinstance(late.exception(), BufferedWriterClosedError)
