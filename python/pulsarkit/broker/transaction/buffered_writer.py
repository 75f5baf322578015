"""PIP-160's ``TxnLogBufferedWriter``: many small transaction records packed into one managed-ledger
entry, to cut bookie writes by orders of magnitude.

Behaviour follows Pulsar's writer. Every write runs on one executor thread, in order. A batch is
flushed when it reaches ``max_records`` (checked first) or ``max_size`` bytes, or when the timer
fires. The timer is re-armed after each run, never at a fixed rate, so a slow executor is never
flooded with timer tasks (Pulsar #16679), and it flushes only a non-empty buffer. A record of
``max_size`` bytes or more flushes the pending batch, then goes alone, without the prefix. Each
record's future resolves, in order, with a :class:`TxnBatchedPosition`, or with the plain position
of an unbatched record. A failed add fails every future of its batch; ``close()`` fails the pending
ones with :class:`~pulsarkit.errors.BufferedWriterClosedError` and stops the timer.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, overload

from google.protobuf.message import Message

from ...codec.txn import pack_batched_entry
from ...errors import BufferedWriterClosedError, PulsarkitError
from ...managed_ledger.ack_set import ack_set_for
from ...managed_ledger.position import Position
from .metrics import TxnLogBufferedWriterMetricsStats

#: The broker's defaults (``transactionLogBatchedWrite*`` / ``transactionPendingAckBatchedWrite*``).
DEFAULT_MAX_RECORDS = 512
DEFAULT_MAX_SIZE = 4 * 1024 * 1024
DEFAULT_MAX_DELAY_MS = 1


@dataclass(frozen=True)
class TxnLogBufferedWriterConfig:
    """``TxnLogBufferedWriterConfig``; batching is off by default, as in broker.conf."""

    batch_enabled: bool = False
    max_records: int = DEFAULT_MAX_RECORDS
    max_size: int = DEFAULT_MAX_SIZE
    max_delay_ms: int = DEFAULT_MAX_DELAY_MS

    def validate(self) -> None:
        """``TransactionBatchedWriteValidator``: with batching on, at least 10 records, 128 KiB and 1 ms."""
        if not self.batch_enabled:
            return
        if self.max_records < 10:
            raise PulsarkitError(f"batched write max records must be at least 10, not {self.max_records}")
        if self.max_size < 128 * 1024:
            raise PulsarkitError(f"batched write max size must be at least 131072 bytes, not {self.max_size}")
        if self.max_delay_ms < 1:
            raise PulsarkitError(f"batched write max delay must be at least 1 ms, not {self.max_delay_ms}")


class TxnBatchedPosition(Position):
    """``TxnBatchedPositionImpl``: a record's place in a batched entry. Equality, hashing and order are
    those of the plain :class:`Position` (batch size and index are ignored), so either works as a key."""

    batch_size: int
    batch_index: int

    def __new__(cls, ledger_id: int, entry_id: int, batch_size: int, batch_index: int) -> TxnBatchedPosition:
        self = super().__new__(cls, ledger_id, entry_id)
        self.batch_size = batch_size
        self.batch_index = batch_index
        return self

    def ack_set(self) -> list[int] | None:
        """``setAckSetByIndex``: bits ``[0, batch_size)`` set but ``batch_index``; None for a batch of one."""
        if self.batch_size <= 1:
            return None
        return ack_set_for(self.batch_size, [self.batch_index])

    def __repr__(self) -> str:
        return (
            f"TxnBatchedPosition({self.ledger_id}, {self.entry_id}, "
            f"batch_size={self.batch_size}, batch_index={self.batch_index})"
        )

    def __reduce__(self) -> Any:
        return (TxnBatchedPosition, (self.ledger_id, self.entry_id, self.batch_size, self.batch_index))


class TxnPositions(Sequence[Position]):
    """The positions of the records of one :meth:`TxnLogBufferedWriter.async_add_many` call, in order: a
    :class:`TxnBatchedPosition` for a record written in a batch, a plain :class:`Position` for one written
    alone. Held as one segment per entry (not an object per record), made on access."""

    __slots__ = ("_segments", "_starts", "_len")

    def __init__(self, segments: list[tuple[int, int, int, int, int]]) -> None:
        # (ledger_id, entry_id, batch_size or 0 for a record written alone, first batch index, records)
        self._segments = segments
        self._starts: list[int] = []
        n = 0
        for seg in segments:
            self._starts.append(n)
            n += seg[4]
        self._len = n

    def __len__(self) -> int:
        return self._len

    def _at(self, i: int) -> Position:
        k = bisect_right(self._starts, i) - 1
        lid, eid, size, first, _ = self._segments[k]
        if not size:
            return Position(lid, eid)
        return TxnBatchedPosition(lid, eid, size, first + i - self._starts[k])

    @overload
    def __getitem__(self, i: int) -> Position: ...
    @overload
    def __getitem__(self, i: slice) -> list[Position]: ...
    def __getitem__(self, i: int | slice) -> Position | list[Position]:
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(self._len))]
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("position index out of range")
        return self._at(i)

    def __iter__(self) -> Iterator[Position]:
        for lid, eid, size, first, count in self._segments:
            if not size:
                yield Position(lid, eid)
            else:
                for j in range(first, first + count):
                    yield TxnBatchedPosition(lid, eid, size, j)

    def __repr__(self) -> str:
        return f"TxnPositions({len(self)} records in {len(self._segments)} entries)"


class _Group:
    """The pending records of one ``async_add_many`` call: one future, resolved when the last is written."""

    __slots__ = ("future", "remaining", "segments")

    def __init__(self, future: Future[TxnPositions], remaining: int) -> None:
        self.future = future
        self.remaining = remaining
        self.segments: list[tuple[int, int, int, int, int]] = []

    def placed(self, ledger_id: int, entry_id: int, batch_size: int, first: int, count: int) -> None:
        self.segments.append((ledger_id, entry_id, batch_size, first, count))
        self.remaining -= count
        if not self.remaining and not self.future.done():
            self.future.set_result(TxnPositions(self.segments))

    def set_exception(self, e: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(e)


#: Who waits for a pending record: its own future, or the group of an ``async_add_many`` call.
_Sink: TypeAlias = "Future[Position] | _Group"


class Ledger(Protocol):
    """What the writer writes to: a :class:`~pulsarkit.managed_ledger.ledger.ManagedLedger`."""

    def add_entry(self, data: bytes, num_messages: int = 1) -> Position: ...


class Executor(Protocol):
    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Any: ...


class TimerHandle(Protocol):
    def cancel(self) -> Any: ...


class Timer(Protocol):
    """``io.netty.util.Timer``: runs ``fn`` once after ``delay_ms``."""

    def new_timeout(self, fn: Callable[[], None], delay_ms: int) -> TimerHandle: ...


class ThreadingTimer:
    """The default timer: one daemon ``threading.Timer`` per timeout."""

    def new_timeout(self, fn: Callable[[], None], delay_ms: int) -> TimerHandle:
        t = threading.Timer(delay_ms / 1000, fn)
        t.daemon = True
        t.start()
        return t


#: A transaction record as the writer takes it: serialized, or a protobuf message to serialize.
TxnRecord: TypeAlias = bytes | bytearray | memoryview | Message


def _serialize(record: TxnRecord) -> bytes:
    if isinstance(record, bytes):
        return record
    if isinstance(record, Message):
        return record.SerializeToString()
    return bytes(record)


class TxnLogBufferedWriter:
    """Writes transaction records to ``ledger``, batched per ``config`` (see the module docstring)."""

    OPEN, CLOSING, CLOSED = "OPEN", "CLOSING", "CLOSED"

    def __init__(
        self,
        ledger: Ledger,
        config: TxnLogBufferedWriterConfig | None = None,
        *,
        metrics: TxnLogBufferedWriterMetricsStats | None = None,
        executor: Executor | None = None,
        timer: Timer | None = None,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        config = config or TxnLogBufferedWriterConfig()
        self.ledger = ledger
        self.config = config
        self.metrics = metrics
        self._own_executor = executor is None
        self._executor: Executor = executor or ThreadPoolExecutor(1, thread_name_prefix="txn-log-writer")
        self._timer = timer or ThreadingTimer()
        self._clock = clock_ms or (lambda: int(time.time() * 1000))
        # Pulsar forces batching off when a batch could never hold two records.
        self._batch_enabled = config.batch_enabled and config.max_records > 1
        self.state = self.OPEN
        self._records: list[bytes] = []
        # Who waits for the pending records, as runs (sink, number of records) in record order: an
        # ``async_add_many`` call's records are one run, so a flush costs a step per call, not per record.
        self._sinks: list[tuple[_Sink, int]] = []
        self._first_added_ms = 0
        self._bytes = 0
        self._timeout: TimerHandle | None = None
        self._state_lock = threading.Lock()
        self._inbox: deque[tuple[Callable[..., None], tuple[Any, ...]]] = deque()
        self._inbox_lock = threading.Lock()
        self._drain_scheduled = False
        if self._batch_enabled:
            self._next_timing_trigger()

    @property
    def batch_enabled(self) -> bool:
        return self._batch_enabled

    # ---------------------------------------------------------------- adding

    def async_add_data(self, record: TxnRecord) -> Future[Position]:
        """Queues one serialized record (bytes or a protobuf message); the future resolves with its
        position once the entry holding it is written."""
        f: Future[Position] = Future()
        if self.state != self.OPEN:
            f.set_exception(BufferedWriterClosedError("transaction log buffered writer is closed"))
            return f
        self._enqueue(self._internal_add, record, f)
        return f

    def _enqueue(self, fn: Callable[..., None], *args: Any) -> None:
        # One executor task drains every operation queued meanwhile: submitting a task per record
        # would cost more than the write itself. Adds, switches and close share the queue, so they
        # run in the order they were called and callbacks stay in order.
        with self._inbox_lock:
            self._inbox.append((fn, args))
            if self._drain_scheduled:
                return
            self._drain_scheduled = True
        try:
            self._executor.submit(self._drain)
        except RuntimeError:  # closed meanwhile, executor shut down: fail what is queued, here
            self._drain()

    def _drain(self) -> None:
        while True:
            with self._inbox_lock:
                if not self._inbox:
                    self._drain_scheduled = False
                    return
                items = list(self._inbox)
                self._inbox.clear()
            for fn, args in items:
                fn(*args)

    def async_add_many(self, records: Iterable[TxnRecord]) -> Future[TxnPositions]:
        """Queues many records at once, as ``async_add_data`` for each in turn would (same batches, same
        entries, same flush triggers), with one future for all: it resolves with their
        :class:`TxnPositions` once the last is written, or fails with the first error of an entry holding
        one of them. The records are serialized here, on the caller's thread: if one cannot be, nothing is
        queued and the future fails with that error. Made for callers with many records in hand: a future
        and a queued task per record cost ~50x the packing (see bench/RESULTS.md)."""
        f: Future[TxnPositions] = Future()
        if self.state != self.OPEN:
            f.set_exception(BufferedWriterClosedError("transaction log buffered writer is closed"))
            return f
        try:
            data = [r if type(r) is bytes else _serialize(r) for r in records]
        except Exception as e:
            f.set_exception(e)
            return f
        if not data:
            f.set_result(TxnPositions([]))
            return f
        self._enqueue(self._internal_add_many, data, _Group(f, len(data)))
        return f

    def _internal_add(self, record: TxnRecord, f: Future[Position]) -> None:
        if self.state != self.OPEN:
            f.set_exception(BufferedWriterClosedError("transaction log buffered writer is closed"))
            return
        try:
            data = _serialize(record)
        except Exception as e:  # a record that cannot be serialized fails alone, like Pulsar's serializer
            f.set_exception(e)
            return
        self._add_one(data, f)

    def _add_one(self, data: bytes, sink: _Sink) -> None:
        if not self._batch_enabled:
            self._write_alone(data, sink)
            return
        if len(data) >= self.config.max_size:
            if self._records:
                self._observe("large_data")
                self._do_flush()
            self._write_alone(data, sink)
            return
        if not self._records:
            self._first_added_ms = self._clock()
        self._records.append(data)
        self._sinks.append((sink, 1))
        self._bytes += len(data)
        if len(self._records) >= self.config.max_records:
            self._observe("max_records")
            self._do_flush()
        elif self._bytes >= self.config.max_size:
            self._observe("max_size")
            self._do_flush()

    def _internal_add_many(self, data: list[bytes], group: _Group) -> None:
        if self.state != self.OPEN:
            group.set_exception(BufferedWriterClosedError("transaction log buffered writer is closed"))
            return
        if not self._batch_enabled:
            for d in data:
                self._write_alone(d, group)
            return
        max_records, max_size = self.config.max_records, self.config.max_size
        i, n = 0, len(data)
        while i < n:
            chunk = data[i : i + max_records - len(self._records)]
            i += len(chunk)
            size = sum(map(len, chunk))
            if self._bytes + size >= max_size:
                # A size trigger or a large record inside this chunk: the record-by-record rule.
                for d in chunk:
                    self._add_one(d, group)
                continue
            # No record of the chunk reaches the size limit: only the count can trigger, at its end.
            if not self._records:
                self._first_added_ms = self._clock()
            self._records.extend(chunk)
            self._sinks.append((group, len(chunk)))
            self._bytes += size
            if len(self._records) >= max_records:
                self._observe("max_records")
                self._do_flush()

    def _write_alone(self, data: bytes, sink: _Sink) -> None:
        try:
            pos = self.ledger.add_entry(data)
        except Exception as e:
            sink.set_exception(e)
            return
        if isinstance(sink, _Group):
            sink.placed(pos[0], pos[1], 0, 0, 1)
        else:
            sink.set_result(Position(*pos))

    def _observe(self, trigger: str) -> None:
        if self.metrics is not None:
            self.metrics.trigger_flush(trigger, len(self._records), self._bytes, self._clock() - self._first_added_ms)

    def _do_flush(self) -> None:
        records, sinks = self._records, self._sinks
        self._records, self._sinks, self._bytes = [], [], 0
        if self.state != self.OPEN:
            self._fail(sinks, BufferedWriterClosedError("transaction log buffered writer is closed"))
            return
        try:
            pos = self.ledger.add_entry(pack_batched_entry(records))
        except Exception as e:
            self._fail(sinks, e)
            return
        lid, eid = pos[0], pos[1]
        n, i = len(records), 0
        for sink, count in sinks:
            if isinstance(sink, _Group):
                sink.placed(lid, eid, n, i, count)
            else:
                sink.set_result(TxnBatchedPosition(lid, eid, n, i))
            i += count

    @staticmethod
    def _fail(sinks: list[tuple[_Sink, int]], e: BaseException) -> None:
        for sink, _ in sinks:
            sink.set_exception(e)

    # ---------------------------------------------------------------- the timer

    def _next_timing_trigger(self) -> None:
        with self._state_lock:
            if self.state != self.OPEN or not self._batch_enabled:
                return
            self._timeout = self._timer.new_timeout(self._on_timeout, self.config.max_delay_ms)

    def _on_timeout(self) -> None:
        if self.state != self.OPEN:
            return
        try:
            self._executor.submit(self._flush_by_timer)
        except RuntimeError:  # the executor was shut down by close()
            pass

    def _flush_by_timer(self) -> None:
        try:
            if self._records and self.state == self.OPEN:
                self._observe("max_delay")
                self._do_flush()
        finally:
            self._next_timing_trigger()

    # ---------------------------------------------------------------- run-time switch and close

    def set_batch_enabled(self, enabled: bool) -> Future[None]:
        """Turns batching on or off while running; turning it off writes the pending batch first."""
        done: Future[None] = Future()

        def switch() -> None:
            want = enabled and self.config.max_records > 1
            if want == self._batch_enabled:
                done.set_result(None)
                return
            if not want and self._records:
                self._do_flush()
            self._batch_enabled = want
            if want:
                self._next_timing_trigger()
            elif self._timeout is not None:
                self._timeout.cancel()
            done.set_result(None)

        self._enqueue(switch)
        return done

    def close(self) -> Future[None]:
        """Fails the records not yet flushed, stops the timer and the metrics; entries already handed
        to the ledger complete normally. Returns a future that is done once closed."""
        done: Future[None] = Future()
        with self._state_lock:
            if self.state != self.OPEN:
                done.set_result(None)
                return done
            self.state = self.CLOSING
            if self._timeout is not None:
                self._timeout.cancel()

        def finish() -> None:
            sinks, self._sinks, self._records, self._bytes = self._sinks, [], [], 0
            self._fail(sinks, BufferedWriterClosedError("transaction log buffered writer was closed"))
            self.state = self.CLOSED
            if self.metrics is not None:
                self.metrics.close()
            done.set_result(None)

        self._enqueue(finish)
        if self._own_executor:
            self._executor.shutdown(wait=False)  # type: ignore[attr-defined]
        return done


__all__ = [
    "DEFAULT_MAX_DELAY_MS",
    "DEFAULT_MAX_RECORDS",
    "DEFAULT_MAX_SIZE",
    "ThreadingTimer",
    "TxnBatchedPosition",
    "TxnLogBufferedWriter",
    "TxnLogBufferedWriterConfig",
    "TxnPositions",
]
