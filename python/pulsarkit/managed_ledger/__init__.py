"""Pulsar's managed ledger: positions, configuration, ledgers, cursors, retention trimming, the
interceptor hook and the factory over a metadata store and a bookie."""

from ..lazy import exports

# What type checkers see; at runtime each name is imported on first use (lazy.py says why).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .ack_set import ack_set_for, bitset_from_words, bitset_words
    from .config import ManagedLedgerConfig, ledger_custom_metadata
    from .cursor import ManagedCursor
    from .factory import ManagedLedgerFactory, Store
    from .interceptor import ManagedLedgerInterceptor
    from .ledger import LedgerInfo, ManagedLedger
    from .position import Position, PositionLike

# Hidden from type checkers, which would take every unknown name for a module attribute.
if not TYPE_CHECKING:
    __getattr__, __dir__ = exports(
        __name__,
        {
            ".ack_set": ("ack_set_for", "bitset_from_words", "bitset_words"),
            ".config": ("ManagedLedgerConfig", "ledger_custom_metadata"),
            ".cursor": ("ManagedCursor",),
            ".factory": ("ManagedLedgerFactory", "Store"),
            ".interceptor": ("ManagedLedgerInterceptor",),
            ".ledger": ("LedgerInfo", "ManagedLedger"),
            ".position": ("Position", "PositionLike"),
        },
    )

__all__ = [
    "LedgerInfo",
    "ManagedCursor",
    "ManagedLedger",
    "ManagedLedgerConfig",
    "ManagedLedgerFactory",
    "ManagedLedgerInterceptor",
    "Position",
    "PositionLike",
    "Store",
    "ack_set_for",
    "bitset_from_words",
    "bitset_words",
    "ledger_custom_metadata",
]
