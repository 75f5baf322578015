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
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

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
        self._futures: list[Future[Position]] = []
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

    def _internal_add(self, record: TxnRecord, f: Future[Position]) -> None:
        if self.state != self.OPEN:
            f.set_exception(BufferedWriterClosedError("transaction log buffered writer is closed"))
            return
        try:
            data = _serialize(record)
        except Exception as e:  # a record that cannot be serialized fails alone, like Pulsar's serializer
            f.set_exception(e)
            return
        if not self._batch_enabled:
            self._write_alone(data, f)
            return
        if len(data) >= self.config.max_size:
            if self._futures:
                self._observe("large_data")
                self._do_flush()
            self._write_alone(data, f)
            return
        if not self._futures:
            self._first_added_ms = self._clock()
        self._records.append(data)
        self._futures.append(f)
        self._bytes += len(data)
        if len(self._futures) >= self.config.max_records:
            self._observe("max_records")
            self._do_flush()
        elif self._bytes >= self.config.max_size:
            self._observe("max_size")
            self._do_flush()

    def _write_alone(self, data: bytes, f: Future[Position]) -> None:
        try:
            pos = self.ledger.add_entry(data)
        except Exception as e:
            f.set_exception(e)
            return
        f.set_result(Position(*pos))

    def _observe(self, trigger: str) -> None:
        if self.metrics is not None:
            self.metrics.trigger_flush(trigger, len(self._futures), self._bytes, self._clock() - self._first_added_ms)

    def _do_flush(self) -> None:
        records, futures = self._records, self._futures
        self._records, self._futures, self._bytes = [], [], 0
        if self.state != self.OPEN:
            self._fail(futures, BufferedWriterClosedError("transaction log buffered writer is closed"))
            return
        try:
            pos = self.ledger.add_entry(pack_batched_entry(records))
        except Exception as e:
            self._fail(futures, e)
            return
        n = len(futures)
        for i, f in enumerate(futures):
            f.set_result(TxnBatchedPosition(pos[0], pos[1], n, i))

    @staticmethod
    def _fail(futures: list[Future[Position]], e: BaseException) -> None:
        for f in futures:
            f.set_exception(e)

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
            if self._futures and self.state == self.OPEN:
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
            if not want and self._futures:
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
            futures, self._futures, self._records, self._bytes = self._futures, [], [], 0
            self._fail(futures, BufferedWriterClosedError("transaction log buffered writer was closed"))
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
]
