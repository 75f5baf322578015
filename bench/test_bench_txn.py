"""Transaction-log benchmarks (issue 11).

* Records per second through ``TxnLogBufferedWriter`` on a managed ledger with batching at Pulsar's
  defaults (512 records, 4 MiB, 1 ms), against batching off (one entry per record), and how many
  entries each wrote (the point of PIP-160: at least 100x fewer at 512 records).
* The bulk record kernel (``pulsarkit.bulk.explode_transaction_log``, one native call) against
  decoding the same batched entries with Python protobuf (upb) one by one into the same rows.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from pulsarkit import bulk
from pulsarkit.broker.transaction import TxnLogBufferedWriter, TxnLogBufferedWriterConfig
from pulsarkit.codec.txn import TXN_OPS, TXN_STATUS, pack_batched_entry, txn_metadata_record
from pulsarkit.managed_ledger import ManagedLedgerConfig, Store
from pulsarkit.proto import BatchedTransactionMetadataEntry, TransactionMetadataEntry


def records(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        k = (0, i // 4)
        op = i % 4
        if op == 0:
            out.append(
                txn_metadata_record("NEW", k, timeout_ms=60_000, start_time=1_700_000_000_000 + i, max_local_txn_id=i)
            )
        elif op == 1:
            out.append(txn_metadata_record("ADD_PARTITION", k, partitions=[f"persistent://t/ns/topic-{i % 50}"]))
        elif op == 2:
            out.append(
                txn_metadata_record("ADD_SUBSCRIPTION", k, subscriptions=[(f"persistent://t/ns/in-{i % 7}", "sub")])
            )
        else:
            out.append(txn_metadata_record("UPDATE", k, expected_status="OPEN", new_status="COMMITTING"))
    return out


@pytest.mark.parametrize("side", ["one-entry-per-record", "candidate"])
def test_buffered_writer_throughput(benchmark, ratios, tmp_path, full_size, side):
    n = 20_000 if full_size else 1_000
    recs = records(n)
    cfg = TxnLogBufferedWriterConfig(batch_enabled=side == "candidate")  # Pulsar's defaults otherwise
    benchmark.group = "transaction log writer"
    counter = iter(range(10**6))
    entries: list[int] = []

    def setup():
        store = Store.open(tmp_path / f"s{next(counter)}")
        ml = store.managed_ledger("pulsar/system/persistent/__transaction_log_0", ManagedLedgerConfig())
        return (store, ml), {}

    def run(store, ml):
        w = TxnLogBufferedWriter(ml, cfg)
        futures = [w.async_add_data(r) for r in recs]
        for f in futures:
            f.result()
        w.close().result()
        ml.flush()
        entries.append(ml.number_of_entries)
        store.close()

    benchmark.pedantic(run, setup=setup, rounds=3 if full_size else 1)
    if side == "candidate":
        assert entries[-1] * 100 <= n  # at least 100x fewer entries than records
        label = f"TxnLogBufferedWriter batched (512 / 4 MiB / 1 ms): {entries[-1]} entries"
    else:
        assert entries[-1] == n
        label = f"TxnLogBufferedWriter batching off: {entries[-1]} entries"
    ratios.add(benchmark, f"write {n} transaction records", side, label, items=n, unit="record")


@pytest.fixture(scope="module")
def batched_entries(full_size):
    n_entries = 4_000 if full_size else 40
    recs = records(64)
    return pa.array([pack_batched_entry(recs)] * n_entries, pa.binary()), n_entries * 64


def upb_rows(col):
    rows = []
    for data in col.to_pylist():
        if data[:2] == b"\x0e\x01":
            batch = BatchedTransactionMetadataEntry.FromString(data[4:]).transaction_logs
        else:
            batch = [TransactionMetadataEntry.FromString(data)]
        for i, r in enumerate(batch):
            rows.append(
                (
                    len(batch),
                    i,
                    TXN_OPS.get(r.metadata_op),
                    r.txnid_most_bits,
                    r.txnid_least_bits,
                    TXN_STATUS.get(r.new_status) if r.HasField("new_status") else None,
                    list(r.partitions),
                    [(s.topic, s.subscription) for s in r.subscriptions],
                    r.timeout_ms if r.HasField("timeout_ms") else None,
                )
            )
    return len(rows)


@pytest.mark.parametrize("side", ["python-protobuf-upb", "candidate"])
def test_bulk_decode_transaction_log(benchmark, ratios, batched_entries, full_size, side):
    col, n = batched_entries
    benchmark.group = "transaction log decode"
    if side == "candidate":
        got = benchmark.pedantic(lambda: bulk.explode_transaction_log(col).num_rows, rounds=5 if full_size else 1)
        label = "pulsarkit.bulk.explode_transaction_log (one native call)"
    else:
        got = benchmark.pedantic(upb_rows, args=(col,), rounds=5 if full_size else 1)
        label = "BatchedTransactionMetadataEntry.FromString per entry + a row per record (upb)"
    assert got == n
    ratios.add(benchmark, f"decode {n} transaction records", side, label, items=n, unit="record")
