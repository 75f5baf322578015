"""The per-topic transaction facts a read needs: an entry's transaction, the coordinators' states."""

from __future__ import annotations

from typing import Any

from ..broker.topic_name import ml_kind
from ..codec.entry import Entry
from ..codec.txn import MARKER_TYPES, TXN_ABORT_MARKER, TXN_COMMIT_MARKER, decode_txn_log_entry
from ..errors import PulsarkitError
from ..managed_ledger.position import Position
from .datadir import DataDir
from .records import DataDirError
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
                key = (r["txnid_most_bits"] & MASK, r["txnid_least_bits"] & MASK)
                if r["op"] == "NEW":
                    out[key] = out.get(key) or "OPEN"
                elif r["op"] == "UPDATE" and r["new_status"] is not None:
                    out[key] = r["new_status"]
    return out


def entry_txn(md: Any) -> tuple[int, int] | None:
    """The transaction of a message's metadata, or None."""
    if md.HasField("txnid_most_bits") or md.HasField("txnid_least_bits"):
        return (md.txnid_most_bits, md.txnid_least_bits)
    return None


def topic_markers(dd: DataDir, ml: str) -> tuple[dict[tuple[int, int], str], dict[tuple[int, int], Position]]:
    """(txn -> TXN_COMMIT/TXN_ABORT marker, txn -> position of its first message) of one topic (cached)."""
    cache: dict[str, Any] = dd.__dict__.setdefault("_marker_cache", {})
    if ml in cache:
        return cache[ml]
    out: dict[tuple[int, int], str] = {}
    used: dict[tuple[int, int], Position] = {}
    for pos, data in dd.ml_entries(ml):
        if isinstance(data, DataDirError):
            continue
        try:
            e = Entry.parse(data, verify_checksum=False)
        except PulsarkitError:
            continue
        md = e.metadata
        key = entry_txn(md)
        if key is None:
            continue
        if md.HasField("marker_type") and md.marker_type in (TXN_COMMIT_MARKER, TXN_ABORT_MARKER):
            out[key] = MARKER_TYPES[md.marker_type]
        elif not md.marker_type:
            used.setdefault(key, pos)
    cache[ml] = (out, used)
    return out, used
