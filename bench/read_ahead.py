"""One topic's read in this process, with and without the read-ahead thread (issue 24: decode batch N+1 while
batch N is written; ``read_partition(prefetch=...)``, :mod:`pulsarkit.scan.prefetch`; see bench/RESULTS.md,
"Per-batch assembly in Rust" and "Prefetching the next batches"): the read alone,
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
import statistics
import tempfile
import time

import pulsarkit as pk
import pyarrow.parquet as pq
from pulsarkit.scan.plan import plan_data_dir
from pulsarkit.scan.read import read_partition
from pulsarkit.scan.schema import arrow_schema, message_fields, parquet_options


def run(parts, depth: int, write: bool, out: str) -> tuple[float, float, int]:
    w0, c0 = time.perf_counter(), time.process_time()
    rows = 0
    schema = arrow_schema(message_fields(False))
    writer = pq.ParquetWriter(out, schema, **parquet_options(schema)) if write else None
    for part in parts:
        for b in read_partition(part, prefetch=depth):
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
