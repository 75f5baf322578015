"""``export --engine spark`` with the export's own row rules (:class:`pulsarkit.export.run.RowRules`): rows decoded
with their topic's schema (``--decode schema``), a batch cut by ``--until LEDGER:ENTRY:PARTITION:BATCH`` and its
resumption, ``--mode upsert``, each made in the Spark tasks, give the table the local engine gives, column for column.
The ``spark-sql`` engine (the data source and Spark's writer) runs none of them: refused in one line.

The decoded tables of the real standalone's schemas through Spark are in
``tests/interop/standalone/test_schema_decode_tables_real.py``."""

from __future__ import annotations

import pulsarkit as pk
import pytest
from helpers import read_export
from pulsarkit.export import MessageId
from pulsarkit.spark import export as spark_export

pytestmark = pytest.mark.spark

ORDERS = "public/default/persistent/orders"
TOPIC = "persistent://public/default/orders"
T0 = 1_700_000_000_000
ORDER = ["topic", "ledger_id", "entry_id", "batch_index"]


def _quiet(msg: str) -> None:
    pass


def _md(seq: int, **kw):
    return pk.message_metadata("prod", seq, T0 + seq * 1000, **kw)


def _write(root, step: int) -> None:
    """Keyed messages, batches of three, a key deleted by a null value in step 1."""
    with pk.Store.open(root, sync=False) as store:
        ml = store.managed_ledger(ORDERS, pk.ManagedLedgerConfig(max_entries_per_ledger=3, minimum_rollover_time_ms=0))
        for i in range(4 * step, 4 * step + 4):
            ml.add_entry(pk.encode_entry(_md(2 * i, partition_key=f"k{i % 3}"), b"m%d" % i))
            batch = [{"payload": b"b%d-%d" % (i, j), "key": f"b{j}"} for j in range(3)]
            if step and i == 7:  # the last batch: the key stays deleted
                batch[1] = {"payload": b"", "key": "b1", "null_value": True}
            ml.add_entry(pk.encode_batch(_md(2 * i + 1), batch), num_messages=3)


def _rows(to: str, out) -> list[dict]:
    t = read_export(to, out)
    t = t.select(sorted(c for c in t.column_names if c != "date"))  # the dataset reads date as its own type
    return t.sort_by([(c, "ascending") for c in ORDER]).to_pylist()


def _both(tmp_path, spark, to: str, data, name: str, **kw) -> tuple[list[dict], list[dict]]:
    """The same export run by the local engine and by Spark's tasks (``kw``: the run's options), as read back."""
    outs = {e: tmp_path / f"{name}-{e}" for e in ("local", "spark")}
    for engine, out in outs.items():
        spark_export.export(str(data), to, str(out), engine=engine, spark=spark, log=_quiet, **kw)
    return _rows(to, outs["local"]), _rows(to, outs["spark"])


@pytest.mark.parametrize("to", ["parquet", "delta", "iceberg"])
def test_spark_tasks_write_the_decoded_table_of_the_local_engine(tmp_path, spark, synthetic, to):
    root, _ = synthetic
    local, on_spark = _both(tmp_path, spark, to, root, "decoded", decode="schema")
    assert on_spark == local and local
    assert {"value", "decode_error", "schema_version"} <= set(local[0])


@pytest.mark.parametrize("to", ["parquet", "delta"])
def test_spark_tasks_cut_a_batch_and_resume_it_as_the_local_engine(tmp_path, spark, to):
    root = tmp_path / "data"
    _write(root, 0)
    with pk.open_data_dir(root) as dd:
        from pulsarkit.analysis.messages import messages_table

        ids = messages_table(dd, [TOPIC]).sort_by([(c, "ascending") for c in ORDER[1:]]).select(ORDER[1:]).to_pylist()
    cut = next(r for r in ids if r["batch_index"] == 1)  # inside a batch
    until = {TOPIC: MessageId(cut["ledger_id"], cut["entry_id"], 1)}
    outs = {e: tmp_path / f"cut-{e}" for e in ("local", "spark")}
    for engine, out in outs.items():
        first = spark_export.export(str(root), to, str(out), engine=engine, spark=spark, until=until, log=_quiet)
        assert first.rows == ids.index(cut) + 1, engine
        assert str(first.topics[TOPIC].next) == f"{cut['ledger_id']}:{cut['entry_id']}:-1:2"  # as Pulsar prints it
        rest = spark_export.export(str(root), to, str(out), engine=engine, spark=spark, log=_quiet)
        assert first.rows + rest.rows == len(ids), engine
    local, on_spark = _rows(to, outs["local"]), _rows(to, outs["spark"])
    assert on_spark == local and [(r["ledger_id"], r["entry_id"], r["batch_index"]) for r in local] == [
        tuple(r.values()) for r in ids
    ]


@pytest.mark.parametrize("to", ["parquet", "delta", "iceberg"])
def test_spark_tasks_keep_the_latest_message_per_key_as_the_local_engine(tmp_path, spark, to):
    root = tmp_path / "data"
    _write(root, 0)
    outs = {e: tmp_path / f"upsert-{e}" for e in ("local", "spark")}
    for step in (0, 1):
        if step:
            _write(root, 1)
        for engine, out in outs.items():
            spark_export.export(str(root), to, str(out), engine=engine, spark=spark, mode="upsert", log=_quiet)
        local, on_spark = _rows(to, outs["local"]), _rows(to, outs["spark"])
        assert on_spark == local, step
    assert sorted(r["key"] for r in local) == ["b0", "b2", "k0", "k1", "k2"]  # b1 deleted by its null value


def test_spark_sql_refuses_what_only_the_row_rules_make(tmp_path, spark, synthetic):
    root, _ = synthetic
    with pytest.raises(pk.PulsarkitError, match="need --engine local or spark, not spark-sql"):
        spark_export.export(str(root), "parquet", str(tmp_path / "o"), engine="spark-sql", spark=spark,
                            decode="schema", log=_quiet)  # fmt: skip
    assert not any((tmp_path / "o").glob("topic=*"))
