"""``MLTransactionLogImpl``, the coordinator (``MLTransactionMetadataStore``) and ``MLPendingAckStore``
on pulsarkit's own managed ledgers: Pulsar's ``MLTransactionLogImplTest.testMainProcess`` for the four
write/read batching combinations, the state machine and its recovery, and pending-ack trimming."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry
from pulsarkit.broker.transaction import (
    BufferedLogOptions,
    PendingAckStore,
    TransactionLog,
    TransactionMetadataStore,
    TxnBatchedPosition,
    TxnLogBufferedWriterConfig,
)
from pulsarkit.broker.transaction.log import TRANSITIONS, TxnLogState
from pulsarkit.codec.txn import decode_txn_log_entry, split_entry, txn_metadata_record
from pulsarkit.errors import InvalidTxnStatusError, TransactionNotFoundError
from pulsarkit.managed_ledger.position import Position

BATCH = TxnLogBufferedWriterConfig(batch_enabled=True, max_records=10, max_size=128 * 1024, max_delay_ms=1)
PLAIN = TxnLogBufferedWriterConfig(batch_enabled=False)


def log(store, cfg, tc=0):
    return TransactionLog(store, tc, cfg, BufferedLogOptions(metrics_registry=CollectorRegistry()))


@pytest.mark.parametrize("write_batch,read_batch", [(True, True), (True, False), (False, True), (False, False)])
def test_main_process(store, write_batch, read_batch):
    tlog = log(store, BATCH if write_batch else PLAIN)
    # 30 transactions, 3 records each, appended concurrently so batches really hold several records
    futures: dict[tuple[int, int], list] = {}
    for i in range(30):
        key = (0, i)
        futures[key] = [
            tlog.append(txn_metadata_record("NEW", key, timeout_ms=1000, start_time=i)),
            tlog.append(txn_metadata_record("ADD_PARTITION", key, partitions=[f"t{i}"])),
            tlog.append(txn_metadata_record("UPDATE", key, expected_status="OPEN", new_status="COMMITTING")),
        ]
    written = {k: [f.result(timeout=10) for f in fs] for k, fs in futures.items()}
    n_entries = tlog.managed_ledger.number_of_entries
    if write_batch:
        assert n_entries < 90 and any(
            isinstance(p, TxnBatchedPosition) and p.batch_size > 1 for v in written.values() for p in v
        )
    else:
        assert n_entries == 90
    tlog.close()

    tlog = log(store, BATCH if read_batch else PLAIN)
    replayed: dict[tuple[int, int], list] = {}
    for pos, r in tlog.replay():
        replayed.setdefault((r.txnid_most_bits, r.txnid_least_bits), []).append(pos)
    assert replayed == written
    # Commit the first 20: their records are deleted, batch index by batch index.
    for k in list(written)[:20]:
        tlog.delete_positions(written[k])
    left = {(r.txnid_most_bits, r.txnid_least_bits) for _, r in tlog.replay()}
    assert left == set(list(written)[20:])
    # Every entry whose records are all deleted is deleted: the mark-delete passed them.
    last_of_first_20 = max(p for k in list(written)[:20] for p in written[k])
    first_of_rest = min(p for k in list(written)[20:] for p in written[k])
    assert tlog.cursor.mark_delete_position >= min(last_of_first_20, Position(first_of_rest[0], first_of_rest[1] - 1))
    if write_batch:
        partly = [p for k in list(written)[20:] for p in written[k] if tlog.cursor.deleted_batch_indexes(p)]
        for p in partly:  # a partly deleted batch keeps exactly the live records' bits
            live = {q.batch_index for k in list(written)[20:] for q in written[k] if q == p}
            words = tlog.cursor.deleted_batch_indexes(p)
            bits = sum((w & (2**64 - 1)) << (64 * i) for i, w in enumerate(words))
            assert {i for i in range(p.batch_size) if bits >> i & 1} == live
    tlog.close()


def test_entries_hold_batched_records_with_the_prefix(store):
    tlog = log(store, BATCH)
    fs = [tlog.append(txn_metadata_record("NEW", (0, i), timeout_ms=5)) for i in range(25)]
    ps = [f.result(timeout=10) for f in fs]
    data = tlog.managed_ledger.read_entry(ps[0])
    assert data[:4] == b"\x0e\x01\x00\x01" and split_entry(data)[0]
    tlog.close()


def coordinator(store, cfg=BATCH, clock=None):
    return TransactionMetadataStore(log(store, cfg), clock_ms=clock)


def test_state_machine_and_recovery(store, clock):
    tc = coordinator(store, clock=clock)
    a, b, c = (tc.new_transaction(60_000, owner="me") for _ in range(3))
    assert (a, b, c) == ((0, 0), (0, 1), (0, 2))
    tc.add_produced_partition(a, ["persistent://t/n/x-partition-0"])
    tc.add_acked_subscription(b, [("persistent://t/n/x", "sub")])
    tc.update_txn_status(c, "ABORTING", "OPEN")
    with pytest.raises(InvalidTxnStatusError):
        tc.update_txn_status(c, "COMMITTED", "ABORTING")
    with pytest.raises(InvalidTxnStatusError):
        tc.add_produced_partition(c, ["p"])
    with pytest.raises(InvalidTxnStatusError):
        tc.update_txn_status(a, "COMMITTED", "COMMITTING")  # expected status is wrong
    tc.end_transaction(a, commit=True)
    with pytest.raises(TransactionNotFoundError):
        tc.get_txn_meta(a)
    before = {k: (m.status, m.partitions, m.subscriptions, m.timeout_ms, m.owner) for k, m in tc.transactions().items()}
    tc.close()
    tc = coordinator(store, PLAIN, clock=clock)  # recovery does not depend on the write mode
    after = {k: (m.status, m.partitions, m.subscriptions, m.timeout_ms, m.owner) for k, m in tc.transactions().items()}
    assert after == before and set(after) == {b, c}
    assert tc.new_transaction(1000) == (0, 3)
    tc.close()


STATUSES = ("OPEN", "COMMITTING", "COMMITTED", "ABORTING", "ABORTED")


@pytest.mark.parametrize(
    "status,allowed",
    [
        ("OPEN", {"OPEN", "COMMITTING", "ABORTING"}),
        ("COMMITTING", {"COMMITTING", "COMMITTED"}),
        ("COMMITTED", {"COMMITTED"}),
        ("ABORTING", {"ABORTING", "ABORTED"}),
        ("ABORTED", {"ABORTED"}),
    ],
)
def test_txn_status_transitions(status, allowed):
    """``TxnStatusTest.testTxnStatusTransition``: what ``TransactionUtil.canTransitionTo`` allows."""
    assert {s for s in STATUSES if s in TRANSITIONS[status]} == allowed


K = (0, 7)
NEW = txn_metadata_record("NEW", K, timeout_ms=60_000, start_time=1)


def upd(expected, new):
    return txn_metadata_record("UPDATE", K, expected_status=expected, new_status=new)


def replayed(*records):
    state = TxnLogState()
    applied = [state.apply(r) for b in records for r in decode_txn_log_entry(b)]
    return state, applied


def test_log_state_skips_what_the_coordinator_rejects():
    """A record ``TxnMetaImpl`` rejects (Pulsar appends it first, so it stays in the log) changes nothing."""
    late_part = txn_metadata_record("ADD_PARTITION", K, partitions=["persistent://t/n/late"])
    late_sub = txn_metadata_record("ADD_SUBSCRIPTION", K, subscriptions=[("persistent://t/n/x", "s")])
    # a racing abort after the commit began: expected OPEN, is COMMITTING
    state, applied = replayed(NEW, upd("OPEN", "COMMITTING"), upd("OPEN", "ABORTING"), late_part, late_sub)
    assert (state.status, state.partitions, state.subscriptions) == ("COMMITTING", [], [])
    assert applied == [True, True, False, False, False]
    # the expected status matches but the move is not allowed
    state, applied = replayed(NEW, upd("OPEN", "COMMITTED"), upd("OPEN", "ABORTED"))
    assert state.status == "OPEN" and applied == [True, False, False]
    state, applied = replayed(NEW, upd("OPEN", "ABORTING"), upd("ABORTING", "COMMITTED"), upd("ABORTING", "ABORTED"))
    assert state.status == "ABORTED" and applied == [True, True, False, True]
    # a record of a transaction whose NEW is gone: the coordinator does not know it
    state, applied = replayed(upd("OPEN", "COMMITTING"), late_part)
    assert state.status is None and state.partitions == [] and applied == [False, False]
    # a second NEW keeps the first one's metadata
    again = txn_metadata_record("NEW", K, timeout_ms=5, start_time=99)
    state, applied = replayed(NEW, txn_metadata_record("ADD_PARTITION", K, partitions=["p"]), again)
    assert (state.status, state.timeout_ms, state.start_time, state.partitions) == ("OPEN", 60_000, 1, ["p"])
    assert applied == [True, True, True]


def test_recovery_deletes_rejected_records(store, clock):
    """``handleMetadataEntry`` deletes the position of a record it rejects: the recovered transaction is
    what the accepted records say, and once it ends nothing of it is left in the log."""
    tlog = log(store, PLAIN)
    part = txn_metadata_record("ADD_PARTITION", K, partitions=["persistent://t/n/late"])
    for b in (NEW, upd("OPEN", "COMMITTING"), upd("OPEN", "ABORTING"), part):
        tlog.append(b).result(timeout=10)
    tc = TransactionMetadataStore(tlog, clock_ms=clock)
    meta = tc.get_txn_meta(K)
    assert (meta.status, meta.partitions, len(meta.positions)) == ("COMMITTING", [], 2)
    assert [r.op for _, r in tlog.replay()] == ["NEW", "UPDATE"]
    tc.end_transaction(K, commit=True)
    assert list(tlog.replay()) == []
    tc.close()


def test_update_to_the_current_status_writes_nothing(store, clock):
    """``MLTransactionMetadataStore.updateTxnStatus`` returns at once when the transaction already has
    the new status, whatever the expected one."""
    tc = coordinator(store, clock=clock)
    k = tc.new_transaction(60_000)
    tc.update_txn_status(k, "COMMITTING", "OPEN")
    n = tc.log.managed_ledger.number_of_entries
    tc.update_txn_status(k, "COMMITTING", "OPEN")
    assert tc.get_txn_meta(k).status == "COMMITTING" and tc.log.managed_ledger.number_of_entries == n
    with pytest.raises(InvalidTxnStatusError):
        tc.update_txn_status(k, "ABORTING", "OPEN")
    tc.close()


def test_ids_are_never_reused_after_every_transaction_ended(store, clock):
    tc = coordinator(store, clock=clock)
    for _ in range(3):
        tc.end_transaction(tc.new_transaction(1000), commit=False)
    tc.close()
    tc = coordinator(store, clock=clock)
    assert tc.transactions() == {} and tc.new_transaction(1000) == (0, 3)
    tc.close()


def test_timeout_aborts_with_is_timeout(store, clock):
    tc = coordinator(store, clock=clock)
    late, fresh = tc.new_transaction(1000), tc.new_transaction(10_000)
    clock.t += 5000
    assert tc.abort_timed_out() == [late]
    assert set(tc.transactions()) == {fresh}
    tc.close()


def test_real_threads_with_pulsar_defaults_pack_hundreds_of_records_per_entry(store):
    tlog = log(store, TxnLogBufferedWriterConfig(batch_enabled=True))  # 512 records, 4 MiB, 1 ms
    futures, lock = [], threading.Lock()

    def producer(t):
        for i in range(500):
            f = tlog.append(txn_metadata_record("NEW", (t, i), timeout_ms=1))
            with lock:
                futures.append(f)

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ps = [f.result(timeout=30) for f in futures]
    assert len(set((p, p.batch_index) for p in ps)) == 2000  # every record has its own slot
    assert tlog.managed_ledger.number_of_entries < 2000 / 5
    tlog.close()


def test_pending_ack_store_replay_and_trimming(store):
    options = BufferedLogOptions(metrics_registry=CollectorRegistry())
    pas = PendingAckStore(store, "t/n/persistent/x", "sub", BATCH, options)
    t1, t2 = (0, 1), (0, 2)
    a = pas.append_individual_ack(t1, [(Position(5, 1), None, None), (Position(5, 3), [-2], 10)]).result(timeout=10)
    pas.append_commit_mark(t1).result(timeout=10)
    b = pas.append_cumulative_ack(t2, Position(5, 9)).result(timeout=10)
    pas.append_abort_mark(t2).result(timeout=10)
    recs = [(r.op, r.ack_type, (r.txnid_most_bits, r.txnid_least_bits)) for _, r in pas.replay()]
    assert recs == [
        ("ACK", "Individual", t1),
        ("COMMIT", "Individual", t1),
        ("ACK", "Cumulative", t2),
        ("ABORT", "Individual", t2),
    ]
    assert pas.clear_useless_log_data(Position(5, 2)) is None  # nothing acked at or below 5:2 alone
    md = pas.clear_useless_log_data(Position(5, 3))
    assert md is not None and md <= Position(*a) and md >= pas.managed_ledger.previous_position(Position(*a))
    md2 = pas.clear_useless_log_data(Position(6, 0))
    assert md2 is not None and md2 >= pas.managed_ledger.previous_position(Position(*b))
    pas.close()


def test_metrics_of_both_writers_under_their_prefixes(store):
    """``TransactionBatchWriterMetricsTest``: the coordinator log and a pending-ack store each record
    their batches and max-delay flushes under their own prefix."""
    reg = CollectorRegistry()
    cfg = TxnLogBufferedWriterConfig(batch_enabled=True, max_records=512, max_size=4 << 20, max_delay_ms=1)
    tlog = TransactionLog(store, 0, cfg, BufferedLogOptions(metrics_registry=reg, broker="b1"))
    pas = PendingAckStore(store, "t/n/persistent/x", "sub", cfg, BufferedLogOptions(metrics_registry=reg, broker="b1"))
    fs = [tlog.append(txn_metadata_record("NEW", (0, i), timeout_ms=5)) for i in range(10)]
    fs += [pas.append_commit_mark((0, i)) for i in range(10)]
    for f in fs:
        f.result(timeout=10)
    for p in ("pulsar_txn_tc", "pulsar_txn_pending_ack_store"):
        assert reg.get_sample_value(f"{p}_bufferedwriter_batch_records_sum", {"broker": "b1"}) == 10
        assert reg.get_sample_value(f"{p}_bufferedwriter_flush_trigger_max_delay_total", {"broker": "b1"}) >= 1
    tlog.close()
    pas.close()
