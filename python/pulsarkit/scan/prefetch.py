"""Threads that overlap a read with what consumes it. :func:`prefetched`: a read's batches made by a thread up to a
few batches ahead of their consumer, so that the next batch is read,
verified, decompressed and assembled (native calls that release the GIL) while the consumer encodes and writes the
current one (pyarrow's Parquet writer releases it too). Off by default: ``read_partition(prefetch=N)`` or
``PULSARKIT_PREFETCH=N`` turns it on.

Measured on a quiet 2-core machine (bench/RESULTS.md, "Prefetching the next batches"): a consumer writing each batch
to Parquet as it comes read and wrote topic A of the full-scale benchmark in 0.82 s instead of 1.25 s (CPU +12 %);
but ``pulsarkit messages --format parquet``, which gathered row groups of 32 MiB then, took 0-18 % more wall and
20-40 % more CPU with it at depths 2-16 and row groups of 4-32 MiB, so no command turns it on.

:class:`WriteBehind`: the other way round, each write made by a thread while the caller makes the next item; what
the commands use (a Parquet row group, a block of JSON lines: the encoding or the file system's copy overlapped).

:func:`decode_threads`: within one batch, the threads its payloads are decompressed on."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

#: batches made ahead of the consumer when turned on without a depth of its own
DEPTH = 2
_DONE = object()


def default_depth() -> int:
    """``PULSARKIT_PREFETCH`` (an integer; 0, the default, is off), 0 on a single core."""
    given = os.environ.get("PULSARKIT_PREFETCH", "").strip()
    if not given:
        return 0
    try:
        depth = max(0, int(given))
    except ValueError:
        raise ValueError(f"PULSARKIT_PREFETCH must be an integer (0 = off), not {given!r}") from None
    return depth if _cores() >= 2 else 0  # one core: the thread could only take turns with its consumer


def decode_threads() -> int:
    """Threads a batch's payloads are decompressed on (the reading one among them): ``PULSARKIT_DECODE_THREADS``
    (an integer, 1 = the reading thread alone), else 2 on two or more cores. The explode after it stays on the
    reading thread; decompressing ahead on a second one took ZSTD's share of a read off the critical path
    (bench/RESULTS.md, "Decompressing a batch on two threads")."""
    given = os.environ.get("PULSARKIT_DECODE_THREADS", "").strip()
    if given:
        try:
            return max(1, int(given))
        except ValueError:
            raise ValueError(f"PULSARKIT_DECODE_THREADS must be an integer (1 = one thread), not {given!r}") from None
    return min(2, _cores())


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def prefetched(items: Iterator[T], depth: int) -> Iterator[T]:
    """``items``, made by a thread at most ``depth`` items ahead of the consumer (a bounded queue: the memory
    of ``depth`` items more). What the thread raises is raised here, in its place; a consumer that stops early
    (``close()``, an exception, a ``break``) stops the thread after the item it is making and waits for it, and
    ``items`` is closed in the thread that iterated it."""
    q: queue.Queue[tuple[object, BaseException | None]] = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def run() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                q.put((item, None))
            q.put((_DONE, None))
        except BaseException as e:  # handed to the consumer, raised there
            q.put((_DONE, e))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    t = threading.Thread(target=run, name="pulsarkit-prefetch", daemon=True)
    t.start()
    try:
        while True:
            item, err = q.get()
            if err is not None:
                raise err
            if item is _DONE:
                return
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        while t.is_alive():  # unblock a put, so the thread sees the stop
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
        t.join()


class WriteBehind:
    """``write(item)`` called on a thread of its own while the caller makes the next item, one write in flight: a
    call waits for the previous write and raises its error. An item is released on the caller's thread once written
    (its allocator, not the writing thread's, gets the buffers back for the next item). :meth:`wait` before the
    destination closes; as a context manager it waits on leaving, and on an error only waits (the caller's error is
    the one raised)."""

    def __init__(self, write: Callable[[Any], Any], name: str = "pulsarkit-write-behind") -> None:
        self._write, self._name = write, name
        self._thread: threading.Thread | None = None
        self._item: Any = None
        self._failed: BaseException | None = None

    def __call__(self, item: Any) -> None:
        self.wait()
        self._item = item
        self._thread = threading.Thread(target=self._run, args=(item,), name=self._name, daemon=True)
        self._thread.start()

    def _run(self, item: Any) -> None:
        try:
            self._write(item)
        except BaseException as e:  # raised on the caller's thread by wait()
            self._failed = e

    def wait(self) -> None:
        """Waits for the write in flight; raises its error."""
        if self._thread is not None:
            self._thread.join()
            self._thread = self._item = None
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed

    def __enter__(self) -> WriteBehind:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: Any) -> None:
        if kind is None:
            self.wait()
        elif self._thread is not None:
            self._thread.join()
            self._thread = self._item = None
