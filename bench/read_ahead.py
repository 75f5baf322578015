"""One topic's read in this process, with and without a read-ahead thread (issue 24: decode batch N+1 while
batch N is written; measured and left out of the library, see bench/RESULTS.md, "Per-batch assembly in Rust";
the thread is here, around ``read_partition``'s batches, as it was tried in ``scan/read.py``): the read alone,
and the read with each batch written to Parquet as ``pulsarkit messages --format parquet`` writes it, one after
the other or overlapped; wall and CPU seconds (``time.process_time``: every thread of the process),
``--rounds`` interleaved, medians.

    PYTHONPATH=python python bench/read_ahead.py /tmp/bvs-stream/run/data persistent://public/default/A \\
        --depths 0 1 2 --rounds 5

``--depths 0`` only is the plain read (any tree, for a baseline). Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pulsarkit as pk
import pyarrow.parquet as pq
from pulsarkit.scan.plan import plan_data_dir
from pulsarkit.scan.read import read_partition
from pulsarkit.scan.schema import arrow_schema, message_fields, parquet_options

_DONE = object()


def read_ahead_of(items: Iterator[Any], depth: int) -> Iterator[Any]:
    """``items``, computed by a thread up to ``depth`` items ahead of the consumer (the read's native
    work releases the GIL, so it overlaps the consumer's writing). What the thread raises is raised
    here in its place; a consumer that stops early stops the thread (after the item it is on)."""
    q: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def run() -> None:
        try:
            for item in items:
                q.put((item, None))
                if stop.is_set():
                    return
            q.put((_DONE, None))
        except BaseException as e:  # handed to the consumer, raised there
            q.put((_DONE, e))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    t = threading.Thread(target=run, name="pulsarkit-read-ahead", daemon=True)
    t.start()
    try:
        while True:
            item, err = q.get()
            if err is not None:
                raise err
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        while t.is_alive():  # unblock a put, so the thread sees the stop
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
        t.join()


def run(parts, depth: int, write: bool, out: str) -> tuple[float, float, int]:
    w0, c0 = time.perf_counter(), time.process_time()
    rows = 0
    schema = arrow_schema(message_fields(False))
    writer = pq.ParquetWriter(out, schema, **parquet_options(schema)) if write else None
    for part in parts:
        batches = read_partition(part)
        for b in read_ahead_of(batches, depth) if depth else batches:
            rows += b.num_rows
            if writer is not None:
                writer.write_batch(b)
    if writer is not None:
        writer.close()
    return time.perf_counter() - w0, time.process_time() - c0, rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("topic")
    ap.add_argument("--depths", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    dd = pk.open_data_dir(a.data_dir)
    ml = dd.resolve(a.topic)
    parts = plan_data_dir(dd, str(dd.metadata_dir), topics=[ml], min_partitions=1, max_partition_bytes=1 << 62)
    parts = parts.partitions
    got: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "m.parquet")
        run(parts, 0, True, out)  # warm-up
        for _ in range(a.rounds):
            for write in (False, True):
                for d in a.depths:
                    if not write and d:
                        continue  # the read alone has nothing to overlap
                    wall, cpu, rows = run(parts, d, write, out)
                    got.setdefault(f"{'read+write' if write else 'read'} depth={d}", []).append((wall, cpu))
    dd.close()
    load = os.getloadavg()
    print(json.dumps({"topic": a.topic, "rows": rows, "load": [round(x, 2) for x in load]}))
    for k, v in got.items():
        wall = statistics.median(x[0] for x in v)
        cpu = statistics.median(x[1] for x in v)
        print(f"| {k} | {wall:.3f} s | {cpu:.3f} s |")


if __name__ == "__main__":
    main()
