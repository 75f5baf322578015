"""The transaction inspector over many data directories on Spark: one task per directory, each running
the single-process inspector (:mod:`pulsarkit.analysis.transactions`), so a cluster-wide answer is
exactly the union of the per-directory answers, with a ``data_dir`` column in front."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from ..analysis import transactions as _txn
from ..scan.datadir import open_data_dir
from ._schema import spark_arrow_type, spark_fields, to_spark_arrow

#: view name -> the single-process table it runs
VIEWS = {
    "transactions": "transactions_table",
    "pending-acks": "pending_ack_table",
    "logs": "transaction_log_table",
}


def _table(view: str, data_dir: str, now_ms: int | None) -> pa.Table:
    fn = getattr(_txn, VIEWS[view])
    with open_data_dir(data_dir) as dd:
        t = fn(dd, now_ms) if view == "transactions" else fn(dd)
    return t.add_column(0, "data_dir", pa.array([data_dir] * t.num_rows, pa.string()))


class _PerDirectory:
    """Picklable ``mapInArrow`` function: each input row names a directory."""

    def __init__(self, view: str, now_ms: int | None, schema: pa.Schema) -> None:
        self.view, self.now_ms, self.schema = view, now_ms, schema

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for d in b.column("data_dir").to_pylist():
                t = _table(self.view, d, self.now_ms)
                cols = [to_spark_arrow(t.column(n).combine_chunks()) for n in t.column_names]
                yield pa.RecordBatch.from_arrays(cols, schema=self.schema)


def transactions_dataframe(
    spark: Any, data_dirs: Sequence[str], view: str = "transactions", now_ms: int | None = None
) -> Any:
    """A DataFrame of the inspector's ``view`` (``transactions``, ``pending-acks`` or ``logs``) over
    every directory in ``data_dirs``. ``now_ms`` fixes the clock ages and timeouts are measured
    against (default: when each task runs)."""
    if view not in VIEWS:
        raise ValueError(f"view must be one of {sorted(VIEWS)}, not {view!r}")
    from pyspark.sql.types import StructType

    empty = _table_schema(view)
    fields = spark_fields(empty)
    arrow = pa.schema([pa.field(f.name, spark_arrow_type(f.type)) for f in empty])
    dirs = spark.createDataFrame([(str(d),) for d in data_dirs], "data_dir string").repartition(
        max(1, len(data_dirs)), "data_dir"
    )
    return dirs.mapInArrow(_PerDirectory(view, now_ms, arrow), StructType(fields))


def _table_schema(view: str) -> pa.Schema:
    schemas = {
        "transactions": _txn.TRANSACTIONS_SCHEMA,
        "pending-acks": _txn.PENDING_ACK_SCHEMA,
        "logs": _txn.TRANSACTION_LOG_SCHEMA,
    }
    return schemas[view].insert(0, pa.field("data_dir", pa.string()))


__all__ = ["VIEWS", "transactions_dataframe"]
