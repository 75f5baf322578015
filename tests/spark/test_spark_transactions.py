"""The transaction inspector and record kernels on Spark give exactly the single-process answers."""

from __future__ import annotations

import shutil
from decimal import Decimal

import pyarrow as pa
from pulsarkit import bulk
from pulsarkit.analysis.transactions import pending_ack_table, transaction_log_table, transactions_table
from pulsarkit.codec.txn import pack_batched_entry, txn_metadata_record
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.spark import explode_transaction_log, transactions_dataframe

NOW = 100_000


def _norm(rows):
    out = []
    for r in rows:
        d = {}
        for k, v in r.items():
            if isinstance(v, Decimal):
                v = int(v)
            elif isinstance(v, list) and v and isinstance(v[0], tuple):  # Arrow maps as (key, value) lists
                v = sorted(v)
            elif isinstance(v, dict):
                v = sorted(v.items())
            d[k] = v
        out.append(d)
    return sorted(out, key=lambda d: str(sorted(d.items())))


def test_inspector_over_many_directories_equals_each_single_process_answer(spark, synthetic, tmp_path):
    root, _ = synthetic
    dirs = [str(root), str(shutil.copytree(root, tmp_path / "copy"))]
    for view, single in (
        ("transactions", lambda dd: transactions_table(dd, NOW)),
        ("pending-acks", pending_ack_table),
        ("logs", transaction_log_table),
    ):
        want = []
        for d in dirs:
            with open_data_dir(d) as dd:
                want += [{"data_dir": d, **r} for r in single(dd).to_pylist()]
        got = [r.asDict(recursive=True) for r in transactions_dataframe(spark, dirs, view, now_ms=NOW).collect()]
        assert _norm(got) == _norm(want), view


def test_explode_transaction_log_on_a_dataframe(spark):
    entries = [
        pack_batched_entry([txn_metadata_record("NEW", (1, i), timeout_ms=5) for i in range(3)]),
        txn_metadata_record("UPDATE", (1, 9), expected_status="OPEN", new_status="ABORTING"),
        b"\x0e\x01\x00\x07",
    ]
    df = spark.createDataFrame(
        [(7, i, e) for i, e in enumerate(entries)], "ledger_id long, entry_id long, entry binary"
    )
    got = explode_transaction_log(df).orderBy("entry_id", "batch_index").collect()
    single = bulk.explode_transaction_log(pa.array(entries, pa.binary())).to_pylist()
    assert [
        (r.entry_id, r.batch_index, r.op, None if r.txnid_least_bits is None else int(r.txnid_least_bits)) for r in got
    ] == [(s["entry_index"], s["batch_index"], s["op"], s["txnid_least_bits"]) for s in single]
    assert "version 7" in got[-1].error
