"""What a read needs of the coordinators: their transactions' states; and the read modes."""

from __future__ import annotations

from ..broker.topic_name import ml_kind
from ..codec.txn import decode_txn_log_entry
from .datadir import DataDir
from .schema import MASK, Pos

#: What a read does with transactional messages: only committed ones (read-committed), or all, flagged.
TXN_MODES = ("committed", "all")


def coordinator_states(dd: DataDir) -> dict[Pos, str]:
    """txn -> its state in the coordinators' logs (what ``transactions(dd)`` calls
    ``coordinator_state``), without reading any other topic."""
    out: dict[Pos, str] = {}
    for ml in dd.managed_ledger_names():
        if ml_kind(ml) != "transaction_log":
            continue
        for _, recs in dd.ml_records(ml, decode_txn_log_entry, "bad_txn_log_entry"):
            for r in recs:
                key = (r.txnid_most_bits & MASK, r.txnid_least_bits & MASK)
                if r.op == "NEW":
                    out[key] = out.get(key) or "OPEN"
                elif r.op == "UPDATE" and r.new_status is not None:
                    out[key] = r.new_status
    return out
