"""A read's batches made by a thread up to a few batches ahead of their consumer, so that the next batch is read,
verified, decompressed and assembled (native calls that release the GIL) while the consumer encodes and writes the
current one (pyarrow's Parquet writer releases it too). Off by default: ``read_partition(prefetch=N)`` or
``PULSARKIT_PREFETCH=N`` turns it on.

Measured on a quiet 2-core machine (bench/RESULTS.md, "Prefetching the next batches"): a consumer writing each batch
to Parquet as it comes read and wrote topic A of the full-scale benchmark in 0.82 s instead of 1.25 s (CPU +12 %);
but ``pulsarkit messages --format parquet``, which gathers 32 MiB row groups, took 0-18 % more wall and 20-40 % more
CPU with it at depths 2-16 and row groups of 4-32 MiB, so no command turns it on."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

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
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return depth if cores >= 2 else 0  # one core: the thread could only take turns with its consumer


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
