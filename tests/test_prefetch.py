"""The read-ahead thread (pulsarkit.scan.prefetch): the same batches and issues as reading in the consumer's
thread, its errors raised in the consumer, a consumer that stops early stops it, and its default."""

import threading
import time

import pyarrow as pa
import pytest
from pulsarkit import open_data_dir
from pulsarkit.scan import prefetch
from pulsarkit.scan.plan import plan_data_dir
from pulsarkit.scan.prefetch import WriteBehind, prefetched
from pulsarkit.scan.read import read_partition

ORDERS = "persistent://public/default/orders"


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name == "pulsarkit-prefetch"}


def test_items_in_order_and_the_thread_gone_at_the_end():
    assert list(prefetched(iter(range(100)), 2)) == list(range(100))
    assert not _threads()


def test_an_error_of_the_producer_is_raised_in_the_consumer_after_the_items_before_it():
    def items():
        yield 1
        yield 2
        raise ValueError("entry 7 is broken")

    got = []
    with pytest.raises(ValueError, match="entry 7 is broken"):
        for x in prefetched(items(), 2):
            got.append(x)
    assert got == [1, 2] and not _threads()


def test_a_consumer_that_stops_early_stops_the_thread_and_closes_the_items_in_it():
    made, closed_in = [], []

    def items():
        try:
            for i in range(10_000):
                made.append(i)
                yield i
        finally:
            closed_in.append(threading.current_thread().name)

    gen = prefetched(items(), 2)
    assert next(gen) == 0 and next(gen) == 1
    gen.close()
    assert not _threads()
    assert closed_in == ["pulsarkit-prefetch"]  # closed by the thread that iterated it
    assert len(made) <= 6  # at most the queue's depth and the item in hand beyond what was taken


def test_the_producer_runs_ahead_by_at_most_the_depth():
    made = []

    def items():
        for i in range(50):
            made.append(i)
            yield i

    gen = prefetched(items(), 3)
    assert next(gen) == 0
    time.sleep(0.2)  # the thread fills the queue and blocks
    assert len(made) <= 1 + 3 + 1
    assert list(gen) == list(range(1, 50))


def test_the_default_depth_is_off_unless_the_environment_asks_on_two_or_more_cores(monkeypatch):
    monkeypatch.delenv("PULSARKIT_PREFETCH", raising=False)
    monkeypatch.setattr(prefetch.os, "sched_getaffinity", lambda pid: {0, 1})
    assert prefetch.default_depth() == 0
    monkeypatch.setenv("PULSARKIT_PREFETCH", "0")
    assert prefetch.default_depth() == 0
    monkeypatch.setenv("PULSARKIT_PREFETCH", "5")
    assert prefetch.default_depth() == 5
    monkeypatch.setattr(prefetch.os, "sched_getaffinity", lambda pid: {0})
    assert prefetch.default_depth() == 0
    monkeypatch.setenv("PULSARKIT_PREFETCH", "many")
    with pytest.raises(ValueError, match="PULSARKIT_PREFETCH must be an integer"):
        prefetch.default_depth()


def _read_every_partition(scan, **kw):
    """Every partition of ``scan`` read with ``kw``: the rows, the issues, the read statistics."""
    from pulsarkit.scan.partition import ReadStats

    issues: list[tuple] = []
    stats = ReadStats()
    batches = [b for part in scan.partitions for b in read_partition(part, stats=stats, on_issue=issues.append, **kw)]
    return (pa.Table.from_batches(batches) if batches else None, issues, stats)


@pytest.mark.parametrize("topic", [ORDERS, "persistent://public/default/payments"])
def test_a_read_with_the_thread_equals_the_read_without_it(synthetic, topic):
    """Batches, rows, issues and read statistics: the same with and without read-ahead."""
    root, _ = synthetic
    dd = open_data_dir(root)
    scan = plan_data_dir(dd, "x", topics=[dd.resolve(topic)], min_partitions=1)
    out = {depth: _read_every_partition(scan, prefetch=depth) for depth in (0, 1, 2)}
    assert out[0][0] is not None and out[0][0].num_rows > 0
    for depth in (1, 2):
        assert out[depth][0].equals(out[0][0])
        assert out[depth][1] == out[0][1]
        assert out[depth][2] == out[0][2]
    dd.close()


def test_write_behind_writes_in_order_one_at_a_time_on_its_thread():
    seen, busy, overlap, names = [], [False], [False], set()

    def write(item):
        overlap[0] |= busy[0]
        busy[0] = True
        names.add(threading.current_thread().name)
        time.sleep(0.01)
        seen.append(item)
        busy[0] = False

    with WriteBehind(write, "w") as behind:
        for i in range(6):
            behind(i)
    assert seen == list(range(6)) and not overlap[0] and names == {"w"}


def test_write_behind_raises_a_failed_write_at_the_next_call_and_leaving_on_an_error_waits():
    done = []

    def write(item):
        time.sleep(0.05)
        if item == "bad":
            raise OSError("No space left on device")
        done.append(item)

    behind = WriteBehind(write)
    behind("bad")
    with pytest.raises(OSError, match="No space"):
        behind("next")
    behind.wait()  # the error was raised once; nothing in flight
    with pytest.raises(KeyError):
        with WriteBehind(write) as b2:
            b2("slow")
            raise KeyError("the caller's own error")
    assert done == ["slow"]  # written before the with block let the error through


def test_decode_threads_are_two_on_two_or_more_cores_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv("PULSARKIT_DECODE_THREADS", raising=False)
    monkeypatch.setattr(prefetch.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert prefetch.decode_threads() == 2
    monkeypatch.setattr(prefetch.os, "sched_getaffinity", lambda pid: {0})
    assert prefetch.decode_threads() == 1
    monkeypatch.setenv("PULSARKIT_DECODE_THREADS", "4")
    assert prefetch.decode_threads() == 4
    monkeypatch.setenv("PULSARKIT_DECODE_THREADS", "0")
    assert prefetch.decode_threads() == 1
    monkeypatch.setenv("PULSARKIT_DECODE_THREADS", "two")
    with pytest.raises(ValueError, match="PULSARKIT_DECODE_THREADS must be an integer"):
        prefetch.decode_threads()


def test_a_read_on_decode_threads_equals_the_read_on_one(synthetic):
    """Every topic of the synthetic directory, rows, issues and statistics: the same on 1 and 3 decode threads."""
    root, _ = synthetic
    dd = open_data_dir(root)
    scan = plan_data_dir(dd, "x", min_partitions=1)
    out = {threads: _read_every_partition(scan, threads=threads) for threads in (1, 3)}
    assert out[1][0] is not None and out[1][0].num_rows > 0
    assert out[3][0].equals(out[1][0]) and out[3][1] == out[1][1] and out[3][2] == out[1][2]
    dd.close()
