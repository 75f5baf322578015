"""What a read needs of the coordinators: their transactions' states; and the read modes."""

from __future__ import annotations

from ..broker.topic_name import ml_kind
from ..broker.transaction.log import TxnLogState
from ..codec.txn import decode_txn_log_entry
from .datadir import DataDir
from .schema import MASK, Pos

#: What a read does with transactional messages: only committed ones (read-committed), or all, flagged.
TXN_MODES = ("committed", "all")


def coordinator_states(dd: DataDir) -> dict[Pos, str]:
    """txn -> its state in the coordinators' logs (what ``transactions(dd)`` calls
    ``coordinator_state``), without reading any other topic."""
    states: dict[Pos, TxnLogState] = {}
    for ml in dd.managed_ledger_names():
        if ml_kind(ml) != "transaction_log":
            continue
        for _, recs in dd.ml_records(ml, decode_txn_log_entry, "bad_txn_log_entry"):
            for r in recs:
                states.setdefault((r.txnid_most_bits & MASK, r.txnid_least_bits & MASK), TxnLogState()).apply(r)
    return {key: s.status for key, s in states.items() if s.status is not None}
