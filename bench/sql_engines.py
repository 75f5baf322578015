"""DuckDB or DataFusion for ``pulsarkit sql`` (issue 23): the same typical queries over the same Arrow
stream of the one message schema, each engine in its own fresh interpreter (import time and peak memory
are per process)::

    python bench/sql_engines.py [--rows 1000000] [--repeat 3] [--json]

Per engine: the import time, the wall time of each query (best of ``--repeat``; each run reads a fresh
``RecordBatchReader``, as ``pulsarkit sql`` hands the reader's stream to the engine) and the peak RSS
the queries added over the process with the data already in memory. The engines' results are checked
equal. Results and the choice: bench/RESULTS.md, "SQL engine choice (issue 23)".
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

ENGINES = ("duckdb", "datafusion")
T0 = 1_700_000_000_000  # publish times in ms from here, one per message

#: The queries: ``t`` is the topic's messages (``topic('...')`` in ``pulsarkit sql``).
QUERIES = {
    "count_per_key": "SELECT key, count(*) AS n FROM t GROUP BY key ORDER BY n DESC, key LIMIT 20",
    "filter_time_project": (
        f"SELECT ledger_id, entry_id, key, publish_time FROM t "
        f"WHERE publish_time >= {T0 + 100_000} AND publish_time < {T0 + 400_000} ORDER BY ledger_id, entry_id"
    ),
    "group_by_producer": (
        "SELECT producer_name, count(*) AS n, min(publish_time) AS first, max(publish_time) AS last "
        "FROM t GROUP BY producer_name ORDER BY producer_name"
    ),
    "payload_length": (
        "SELECT key, sum(octet_length(payload)) AS bytes, avg(octet_length(payload)) AS mean "
        "FROM t WHERE payload IS NOT NULL GROUP BY key ORDER BY bytes DESC, key LIMIT 20"
    ),
}
#: DataFusion has no byte length of a binary column (octet_length, length and bit_length take strings,
#: and a cast to a string fails on bytes that are not UTF-8): the hex string's length, halved.
DATAFUSION_QUERIES = {
    **QUERIES,
    "payload_length": QUERIES["payload_length"].replace(
        "octet_length(payload)", "(octet_length(encode(payload, 'hex')) / 2)"
    ),
}


def _data(rows: int) -> Any:
    """A topic's messages in the one message schema: 1000 keys, 8 producers, 50-450 byte payloads."""
    import numpy as np
    import pyarrow as pa
    from pulsarkit.scan.schema import arrow_schema, message_fields

    rng = np.random.default_rng(23)
    lens = rng.integers(50, 450, rows)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    blob = rng.integers(0, 256, int(offsets[-1]), dtype=np.uint8).tobytes()
    payload = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(blob)]
    )
    keys = pa.array([f"key-{i}" for i in range(1000)]).take(pa.array(rng.integers(0, 1000, rows)))
    producers = pa.array([f"producer-{i}" for i in range(8)]).take(pa.array(rng.integers(0, 8, rows)))
    n = np.arange(rows, dtype=np.int64)
    schema = arrow_schema(message_fields())
    cols = {
        "topic": pa.array(["persistent://public/default/bench"] * rows),
        "partition": pa.array(np.full(rows, -1, dtype=np.int32)),
        "ledger_id": pa.array(10 + n // 50_000),
        "entry_id": pa.array(n % 50_000),
        "batch_index": pa.array(np.full(rows, -1, dtype=np.int32)),
        "key": keys,
        "properties": pa.nulls(rows, schema.field("properties").type),
        "payload": payload.cast(pa.binary()),
        "publish_time": pa.array(T0 + n),
        "event_time": pa.array(np.zeros(rows, dtype=np.int64)),
        "sequence_id": pa.array(n),
        "producer_name": producers,
        "null_value": pa.array(np.zeros(rows, dtype=bool)),
        "encrypted": pa.array(np.zeros(rows, dtype=bool)),
    }
    arrays = [cols.get(f.name, pa.nulls(rows, f.type)) for f in schema]
    # batches of the size the reader yields (one per few thousand messages)
    return pa.Table.from_arrays(arrays, schema=schema).combine_chunks().to_batches(max_chunksize=8192), schema


def _duckdb_run(reader: Any, sql: str) -> Any:
    import duckdb

    con = duckdb.connect(config={"enable_external_access": False})
    con.register("t", reader)
    try:
        return con.sql(sql).to_arrow_table()
    finally:
        con.close()


def _datafusion_run(reader: Any, sql: str) -> Any:
    import pyarrow.dataset as ds
    from datafusion import SessionContext

    ctx = SessionContext()
    # a one-shot dataset over the stream: DataFusion scans it without a copy of the whole topic first
    ctx.register_dataset("t", ds.dataset(reader))
    return ctx.sql(sql).to_arrow_table()


def child(engine: str, rows: int, repeat: int) -> dict[str, Any]:
    import importlib

    import pyarrow as pa

    batches, schema = _data(rows)
    t0 = time.perf_counter()
    importlib.import_module(engine)
    imported = time.perf_counter() - t0
    run = {"duckdb": _duckdb_run, "datafusion": _datafusion_run}[engine]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out: dict[str, Any] = {"engine": engine, "rows": rows, "import_s": round(imported, 3), "queries": {}}
    results = {}
    for name, sql in (DATAFUSION_QUERIES if engine == "datafusion" else QUERIES).items():
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            res = run(pa.RecordBatchReader.from_batches(schema, iter(batches)), sql)
            best = min(best, time.perf_counter() - t0)
        out["queries"][name] = round(best, 4)
        # the engines name and type aggregates their own way: compare the values, as Python values
        results[name] = [list(r.values()) for r in res.to_pylist()]
    out["peak_rss_added_mb"] = round((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024, 1)
    out["results"] = {k: json.loads(json.dumps(v, default=float)) for k, v in results.items()}
    return out


def _same(a: list[list[Any]], b: list[list[Any]]) -> bool:
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b, strict=True):
        for x, y in zip(ra, rb, strict=True):
            if isinstance(x, float) or isinstance(y, float):
                if abs(float(x) - float(y)) > 1e-6 * max(1.0, abs(float(x))):
                    return False
            elif x != y:
                return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.rows, args.repeat)))
        return 0
    import importlib.util

    missing = [e for e in ENGINES if importlib.util.find_spec(e) is None]
    if missing:
        print(f"sql_engines: needs {' and '.join(missing)}: pip install duckdb datafusion (in a venv of its own)")
        return 1
    runs = {}
    for engine in ENGINES:
        argv = [sys.executable, __file__, "--child", engine, "--rows", str(args.rows), "--repeat", str(args.repeat)]
        runs[engine] = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
    a, b = (runs[e].pop("results") for e in ENGINES)
    same = {q: _same(a[q], b[q]) for q in QUERIES}
    if args.json:
        print(json.dumps({"runs": runs, "same_results": same}))
        return 0 if all(same.values()) else 1
    print(f"{args.rows} messages, best of {args.repeat}; each query reads a fresh RecordBatchReader")
    print(f"{'':22}" + "".join(f"{e:>12}" for e in ENGINES))
    print(f"{'import (s)':22}" + "".join(f"{runs[e]['import_s']:>12}" for e in ENGINES))
    for q in QUERIES:
        flag = "" if same[q] else "  RESULTS DIFFER"
        print(f"{q + ' (s)':22}" + "".join(f"{runs[e]['queries'][q]:>12}" for e in ENGINES) + flag)
    print(f"{'peak RSS added (MB)':22}" + "".join(f"{runs[e]['peak_rss_added_mb']:>12}" for e in ENGINES))
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
