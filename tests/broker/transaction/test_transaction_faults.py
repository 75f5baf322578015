"""Seeded fault runs: add failures, closes mid-stream and reopen/replay at random points.

Writer level (500 runs): every record's future fires exactly once, each success names an entry that
holds the record at its batch index, and no entry holds a record whose future failed. Coordinator
level (500 runs, pulsarkit's own managed ledgers): after every fault and reopen, the recovered
transactions equal the model's, no committed or aborted transaction comes back, and no id is reused.
"""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry
from pulsarkit.broker.transaction import (
    BufferedLogOptions,
    TransactionLog,
    TransactionMetadataStore,
    TxnBatchedPosition,
    TxnLogBufferedWriter,
    TxnLogBufferedWriterConfig,
)
from pulsarkit.codec.txn import split_entry
from pulsarkit.errors import InvalidTxnStatusError, TransactionNotFoundError
from txn_helpers import FakeLedger, ManualTimer, QueueExecutor

RUNS = 500


@pytest.mark.parametrize("chunk", range(5))
def test_writer_faults(chunk):
    for seed in range(chunk * RUNS // 5, (chunk + 1) * RUNS // 5):
        rng = random.Random(seed)
        ledger = FakeLedger(fail=rng.choice([0, 0.1, 0.5]), seed=seed)
        ex, timer = QueueExecutor(), ManualTimer()
        cfg = TxnLogBufferedWriterConfig(
            batch_enabled=rng.random() < 0.8, max_records=rng.randint(1, 20), max_size=rng.choice([64, 256, 4096])
        )
        w = TxnLogBufferedWriter(ledger, cfg, executor=ex, timer=timer)
        futures, fired = [], {}
        close_at = rng.randint(0, 200) if rng.random() < 0.3 else None
        for i in range(rng.randint(1, 200)):
            rec = i.to_bytes(4, "big") + bytes(rng.choice([0, 4, 60, 300]))
            f = w.async_add_data(rec)
            f.add_done_callback(lambda _f, i=i: fired.__setitem__(i, fired.get(i, 0) + 1))
            futures.append((rec, f))
            r = rng.random()
            if r < 0.2:
                ex.run()
            elif r < 0.3:
                timer.fire()
            if i == close_at:
                w.close()
        ex.run()
        timer.fire()
        ex.run()
        w.close()
        ex.run()
        assert all(fired.get(i) == 1 for i in range(len(futures))), f"seed {seed}: a callback lost or doubled"
        stored = set()
        for rec, f in futures:
            if f.exception() is not None:
                continue
            p = f.result()
            batched, records = split_entry(ledger.entries[p.entry_id])
            got = records[p.batch_index] if isinstance(p, TxnBatchedPosition) else ledger.entries[p.entry_id]
            assert got == rec, f"seed {seed}"
            stored.add(rec)
        every = {r for e in ledger.entries for r in split_entry(e)[1]}
        assert every == stored, f"seed {seed}: an entry holds a record whose future failed"


class FlakyLedger:
    """A real managed ledger whose adds fail at random (before writing: a bookie that refused)."""

    def __init__(self, ml, rng, rate):
        self.ml, self.rng, self.rate = ml, rng, rate

    def add_entry(self, data, num_messages=1):
        if self.rng.random() < self.rate:
            raise OSError("injected bookie failure")
        return self.ml.add_entry(data, num_messages)

    def __getattr__(self, name):
        return getattr(self.ml, name)


def open_tc(store, tc_id, rng, clock):
    cfg = TxnLogBufferedWriterConfig(
        batch_enabled=rng.random() < 0.7, max_records=rng.randint(2, 12), max_size=128 * 1024, max_delay_ms=1
    )
    log = TransactionLog(store, tc_id, cfg, BufferedLogOptions(metrics_registry=CollectorRegistry()))
    flaky = FlakyLedger(log.managed_ledger, rng, rng.choice([0.0, 0.1, 0.3]))
    log.writer.ledger = flaky  # the writer adds through the flaky wrapper; reads go to the real ledger
    return TransactionMetadataStore(log, clock_ms=clock)


def snapshot(tc):
    return {k: (m.status, tuple(m.partitions), tuple(m.subscriptions)) for k, m in tc.transactions().items()}


@pytest.mark.parametrize("chunk", range(5))
def test_coordinator_faults(store, clock, chunk):
    for seed in range(chunk * RUNS // 5, (chunk + 1) * RUNS // 5):
        rng = random.Random(seed)
        tc = open_tc(store, seed, rng, clock)
        model: dict = {}
        ended: set = set()
        issued: set = set()
        for _ in range(rng.randint(3, 14)):
            op = rng.random()
            live = sorted(model)
            try:
                if op < 0.3 or not live:
                    k = tc.new_transaction(rng.choice([10, 60_000]))
                    assert k not in issued, f"seed {seed}: id {k} reused"
                    issued.add(k)
                    model[k] = ("OPEN", (), ())
                elif op < 0.45:
                    k = rng.choice(live)
                    tc.add_produced_partition(k, [f"p{rng.randint(0, 3)}"])
                    st, ps, ss = model[k]
                    p = tc.get_txn_meta(k).partitions[-1]
                    model[k] = (st, ps + ((p,) if p not in ps else ()), ss)
                elif op < 0.55:
                    k = rng.choice(live)
                    sub = (f"t{rng.randint(0, 2)}", "s")
                    tc.add_acked_subscription(k, [sub])
                    st, ps, ss = model[k]
                    model[k] = (st, ps, ss + ((sub,) if sub not in ss else ()))
                elif op < 0.75:
                    k = rng.choice(live)
                    tc.end_transaction(k, commit=rng.random() < 0.5)
                    del model[k]
                    ended.add(k)
                elif op < 0.85:
                    clock.t += 100
                    for k in tc.abort_timed_out():
                        del model[k]
                        ended.add(k)
                    for k in tc.timeout_failures:  # a failed abort may have taken its first step
                        model[k] = (tc.get_txn_meta(k).status,) + model[k][1:]
                else:  # close mid-stream and reopen: replay must give the same state back
                    tc.close()
                    tc = open_tc(store, seed, rng, clock)
            except OSError:
                # The write failed: nothing changed, except a two-step end may have done its first step.
                for k, m in tc.transactions().items():
                    if k in model and m.status != model[k][0]:
                        model[k] = (m.status,) + model[k][1:]
            except (InvalidTxnStatusError, TransactionNotFoundError):
                pass
            state = snapshot(tc)
            assert {k: v[0] for k, v in state.items()} == {k: v[0] for k, v in model.items()}, f"seed {seed}"
        tc.close()
        tc = open_tc(store, seed, rng, clock)
        recovered = snapshot(tc)
        assert set(recovered) == set(model), f"seed {seed}: recovered {sorted(recovered)} != {sorted(model)}"
        assert not (set(recovered) & ended), f"seed {seed}: an ended transaction came back"
        for k, (st, ps, ss) in model.items():
            assert recovered[k] == (st, ps, ss), f"seed {seed}: {k}"
        tc.close()
