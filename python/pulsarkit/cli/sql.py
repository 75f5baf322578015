"""SQL over the topics of a data directory, in place::

    pulsarkit sql DATA_DIR "SELECT key, count(*) FROM topic('persistent://public/default/t') GROUP BY key"
                  [--format table|json|jsonl|parquet] [-o FILE] [--txn committed|all] [--markers]

``topic('...')`` is the topic's messages with the columns of ``pulsarkit messages`` (a partitioned topic: all
its partitions); the engine is DuckDB (``pip install 'pulsarkit[sql]'``), sandboxed: the query reads only the
topics it names and writes nothing. Output: a table for a person (default), one JSON array (``json``), one
JSON object per line (``jsonl``; bytes in base64) or Parquet (``-o FILE``, or a pipe). The data directory is
read as every data-directory command reads it: unreadable parts are warnings, ``--strict`` exits 3.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..analysis.sql import engine, query_reader
from .command import Runner, command, overwrite_arg
from .datadir import _dir_args, _finish, _open, _out_file, _preview, _table, _with_output, message_read_args


def _value(v: Any) -> Any:
    """A result value as JSON has it: bytes in base64, maps as objects, nested values alike."""
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, dict):
        return {k: _value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_value(x) for x in v]
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)  # decimals, dates, times: as the engine prints them


def _unique(names: list[str]) -> list[str]:
    """Column names made unique as DuckDB makes them for a table (``key``, ``key_1``): a join's columns
    may share a name, and a JSON object or a Parquet file cannot."""
    seen: set[str] = set()
    out = []
    for n in names:
        m, k = n, 0
        while m in seen:
            k += 1
            m = f"{n}_{k}"
        seen.add(m)
        out.append(m)
    return out


def _renamed(reader: pa.RecordBatchReader) -> pa.RecordBatchReader:
    names = _unique(reader.schema.names)
    if names == reader.schema.names:
        return reader
    schema = pa.schema([f.with_name(n) for f, n in zip(reader.schema, names, strict=True)])
    return pa.RecordBatchReader.from_batches(schema, (b.rename_columns(names) for b in reader))


def _rows(reader: pa.RecordBatchReader) -> Iterator[dict[str, Any]]:
    for b in reader:
        for r in b.to_pylist(maps_as_pydicts="lossy"):
            yield {k: _value(v) for k, v in r.items()}


def _cell(v: Any) -> Any:
    if isinstance(v, bytes):
        return _preview(base64.b64encode(v).decode("ascii"))
    return v


@command("sql", help="SQL over topics in place: SELECT ... FROM topic('persistent://...') on an embedded engine")
def _sql(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    p.add_argument("query", metavar="SQL", help="the query; topic('name') is that topic's messages (their columns)")
    p.add_argument("--format", choices=("table", "json", "jsonl", "parquet"), default="table")
    p.add_argument("-o", "--output", help="output file (required for parquet, unless piped)")
    overwrite_arg(p)
    message_read_args(p)

    def run(args: argparse.Namespace) -> int:
        engine()  # without it: one line on how to install it, before the data is opened
        dd = _open(args)
        reader = _renamed(query_reader(dd, args.query, txn=args.txn, markers=args.markers, decode=args.decode))
        if args.format == "parquet":
            with pq.ParquetWriter(_out_file(args), reader.schema) as w:
                for b in reader:
                    w.write_batch(b)
        elif args.format in ("json", "jsonl"):
            out = open(args.dest, "w") if args.dest else sys.stdout
            try:
                if args.format == "jsonl":
                    out.writelines(json.dumps(r) + "\n" for r in _rows(reader))
                else:
                    out.write(json.dumps(list(_rows(reader))) + "\n")
            finally:
                if out is not sys.stdout:
                    out.close()
        else:
            rows = [{k: _cell(v) for k, v in r.items()} for b in reader for r in b.to_pylist(maps_as_pydicts="lossy")]
            _table(rows, reader.schema.names)
        return _finish(dd, args)

    return _with_output(run)
