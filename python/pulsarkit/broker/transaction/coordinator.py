"""The transaction coordinator's state (``MLTransactionMetadataStore``) over its :class:`TransactionLog`.

Every change is a log record written before it takes effect: NEW, ADD_PARTITION, ADD_SUBSCRIPTION,
UPDATE (OPEN → COMMITTING → COMMITTED, OPEN → ABORTING → ABORTED; a transaction past its timeout
is aborted). When a transaction ends its records are deleted from the log and it is forgotten,
so a reopened coordinator recovers exactly the transactions still in flight, and the highest id it
ever handed out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ...codec.txn import decode_txn_log_entry, txn_metadata_record
from ...errors import InvalidTxnStatusError, PulsarkitError, TransactionNotFoundError
from ...managed_ledger.position import Position
from .log import ENDED, TRANSITIONS, TransactionLog, TxnLogState

MANAGED_LEDGER_SEQUENCE_PROPERTY = "max_local_txn_id"


@dataclass
class TxnMeta:
    """``TxnMetaImpl``: one transaction in flight."""

    txn_id: tuple[int, int]
    status: str = "OPEN"
    timeout_ms: int = 0
    start_time: int = 0
    last_modification_time: int = 0
    owner: str | None = None
    partitions: list[str] = field(default_factory=list)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)
    #: Log positions of its records (deleted from the log when it ends).
    positions: list[Position] = field(default_factory=list)


class TransactionMetadataStore:
    """One coordinator's transactions, recovered from its log when created."""

    def __init__(self, log: TransactionLog, clock_ms: Callable[[], int] | None = None) -> None:
        self.log = log
        self.tc_id = log.tc_id
        self._clock = clock_ms or (lambda: int(time.time() * 1000))
        self._txns: dict[tuple[int, int], TxnMeta] = {}
        self._sequence = -1
        self._lock = threading.RLock()
        self.recover()

    # ---------------------------------------------------------------- recovery

    def recover(self) -> None:
        """Replays the log (``MLTransactionMetadataStore.init``)."""
        with self._lock:
            self._txns.clear()
            self._sequence = int(self.log.managed_ledger.properties.get(MANAGED_LEDGER_SEQUENCE_PROPERTY, -1))
            dead: list[Position] = []  # records to delete: of ended or unknown transactions, or rejected
            live: dict[tuple[int, int], tuple[TxnLogState, list[Position]]] = {}
            for pos, r in self.log.replay():
                key = (r.txnid_most_bits, r.txnid_least_bits)
                self._sequence = max(self._sequence, key[1], r.max_local_txn_id or -1)
                if r.op == "NEW" and key not in live:
                    live[key] = (TxnLogState(), [])
                got = live.get(key)
                if got is None:  # records of a transaction whose NEW was already deleted
                    dead.append(pos)
                    continue
                state, positions = got
                if not state.apply(r):  # rejected, deleted as handleMetadataEntry does
                    dead.append(pos)
                    continue
                positions.append(pos)
                if state.status in ENDED:
                    dead.extend(positions)
                    del live[key]
            for key, (state, positions) in live.items():
                self._txns[key] = TxnMeta(
                    key,
                    status=state.status or "OPEN",
                    timeout_ms=state.timeout_ms or 0,
                    start_time=state.start_time or 0,
                    last_modification_time=state.last_modification_time or 0,
                    owner=state.owner,
                    partitions=state.partitions,
                    subscriptions=[(s.topic, s.subscription) for s in state.subscriptions],
                    positions=positions,
                )
            if dead:
                self.log.delete_positions(dead)
            self._sequence = max(self._sequence, self._last_entry_sequence())

    def _last_entry_sequence(self) -> int:
        """The highest id in the log's last entry, deleted or not: ended transactions' records are
        deleted, so replay alone could hand an id out twice (``MLTransactionSequenceIdGenerator``)."""
        ml = self.log.managed_ledger
        last = ml.last_confirmed_entry
        if last.entry_id < 0:
            return -1
        try:
            records = decode_txn_log_entry(ml.read_entry(last))
        except PulsarkitError:
            return -1
        return max((max(r.txnid_least_bits, r.max_local_txn_id or -1) for r in records), default=-1)

    # ---------------------------------------------------------------- operations

    def _write(self, meta: TxnMeta, record: bytes) -> Position:
        pos = self.log.append(record).result()
        meta.positions.append(pos)
        return pos

    def new_transaction(self, timeout_ms: int, owner: str | None = None) -> tuple[int, int]:
        """A new transaction id ``(tc id, sequence)``, durable in the log before it is returned."""
        with self._lock:
            self._sequence += 1
            key = (self.tc_id, self._sequence)
            now = self._clock()
            meta = TxnMeta(key, timeout_ms=timeout_ms, start_time=now, last_modification_time=now, owner=owner)
            self._write(
                meta,
                txn_metadata_record(
                    "NEW",
                    key,
                    timeout_ms=timeout_ms,
                    start_time=now,
                    last_modification_time=now,
                    max_local_txn_id=self._sequence,
                    owner=owner,
                ),
            )
            self._txns[key] = meta
            return key

    def get_txn_meta(self, txn_id: tuple[int, int]) -> TxnMeta:
        meta = self._txns.get(tuple(txn_id))  # type: ignore[arg-type]
        if meta is None:
            raise TransactionNotFoundError(f"transaction ({txn_id[0]},{txn_id[1]}) is not in coordinator {self.tc_id}")
        return meta

    def _open_meta(self, txn_id: tuple[int, int]) -> TxnMeta:
        meta = self.get_txn_meta(txn_id)
        if meta.status != "OPEN":
            raise InvalidTxnStatusError(f"transaction {meta.txn_id} is {meta.status}, expected OPEN")
        return meta

    def add_produced_partition(self, txn_id: tuple[int, int], partitions: Iterable[str]) -> None:
        self._add_to_open(txn_id, "ADD_PARTITION", "partitions", list(partitions))

    def add_acked_subscription(self, txn_id: tuple[int, int], subscriptions: Iterable[tuple[str, str]]) -> None:
        self._add_to_open(txn_id, "ADD_SUBSCRIPTION", "subscriptions", list(subscriptions))

    def _add_to_open(self, txn_id: tuple[int, int], op: str, member: str, items: list[Any]) -> None:
        """Adds ``items`` to an open transaction's ``member`` list (partitions, subscriptions): logged first, then
        kept once each in its metadata."""
        with self._lock:
            meta = self._open_meta(txn_id)
            now = self._clock()
            added: dict[str, Any] = {member: items}  # partitions= or subscriptions=
            self._write(
                meta,
                txn_metadata_record(op, meta.txn_id, last_modification_time=now, expected_status="OPEN", **added),
            )
            held = getattr(meta, member)
            held.extend(x for x in items if x not in held)
            meta.last_modification_time = now

    def update_txn_status(self, txn_id: tuple[int, int], new_status: str, expected_status: str) -> None:
        """Moves a transaction on; a finished one is removed and its log records deleted."""
        with self._lock:
            meta = self.get_txn_meta(txn_id)
            if meta.status == new_status:  # already there: nothing written (MLTransactionMetadataStore)
                return
            if meta.status != expected_status:
                raise InvalidTxnStatusError(f"transaction {meta.txn_id} is {meta.status}, expected {expected_status}")
            if new_status not in TRANSITIONS[meta.status]:
                raise InvalidTxnStatusError(f"transaction {meta.txn_id} cannot go from {meta.status} to {new_status}")
            now = self._clock()
            self._write(
                meta,
                txn_metadata_record(
                    "UPDATE",
                    meta.txn_id,
                    expected_status=expected_status,
                    new_status=new_status,
                    last_modification_time=now,
                    # is_timeout (field 13) is newer than Pulsar 4.0: not written, so the log stays
                    # byte-identical to what a 4.0 coordinator writes (its readers skip the field).
                ),
            )
            meta.status, meta.last_modification_time = new_status, now
            if new_status in ("COMMITTED", "ABORTED"):
                del self._txns[meta.txn_id]
                self.log.delete_positions(meta.positions)

    def end_transaction(self, txn_id: tuple[int, int], commit: bool) -> None:
        """OPEN → COMMITTING → COMMITTED, or OPEN → ABORTING → ABORTED (each step a record)."""
        mid, end = ("COMMITTING", "COMMITTED") if commit else ("ABORTING", "ABORTED")
        with self._lock:
            if self.get_txn_meta(txn_id).status == "OPEN":
                self.update_txn_status(txn_id, mid, "OPEN")
            self.update_txn_status(txn_id, end, mid)

    def abort_timed_out(self, now_ms: int | None = None) -> list[tuple[int, int]]:
        """Aborts the open transactions past their timeout (``TransactionTimeoutTracker``) and returns
        the ones it aborted. A transaction whose abort fails stays as it is, to be retried next time;
        the failures are kept in ``timeout_failures``."""
        now = self._clock() if now_ms is None else now_ms
        aborted: list[tuple[int, int]] = []
        self.timeout_failures: dict[tuple[int, int], BaseException] = {}
        with self._lock:
            late = [
                k
                for k, m in self._txns.items()
                if m.status in ("OPEN", "ABORTING") and m.start_time + m.timeout_ms < now
            ]
            for k in late:
                try:
                    self.end_transaction(k, commit=False)
                except Exception as e:  # one failed abort must not stop the others
                    self.timeout_failures[k] = e
                else:
                    aborted.append(k)
            return aborted

    def transactions(self) -> dict[tuple[int, int], TxnMeta]:
        with self._lock:
            return dict(self._txns)

    @property
    def sequence_id(self) -> int:
        """The highest local transaction id handed out."""
        return self._sequence

    def close(self) -> None:
        with self._lock:
            self.log.close()
            ml = self.log.managed_ledger
            props = dict(ml.properties)
            props[MANAGED_LEDGER_SEQUENCE_PROPERTY] = str(self._sequence)
            ml.set_properties(props)

    def __enter__(self) -> TransactionMetadataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["MANAGED_LEDGER_SEQUENCE_PROPERTY", "TransactionMetadataStore", "TxnMeta"]
