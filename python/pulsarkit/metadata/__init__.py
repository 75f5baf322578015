"""Pulsar's metadata: the RocksDB store (Pulsar's paths and protobuf values), a ZooKeeper data directory read
offline or a live ZooKeeper read read-only, and the read interface they satisfy (``MetadataReader``)."""

from ..lazy import exports

# What type checkers see; at runtime each name is imported on first use (lazy.py says why).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .reader import MetadataReader
    from .store import (
        LEDGERS_ROOT,
        MANAGED_LEDGERS_ROOT,
        MetadataStore,
        Stat,
        cursor_path,
        decode_meta_value,
        encode_meta_value,
        ledger_id_from_path,
        ledger_path,
        managed_ledger_path,
        parse_ledger_metadata,
        parse_managed_cursor_info,
        parse_managed_ledger_info,
        serialize_ledger_metadata,
    )
    from .zookeeper import ZkSnapshotStore
    from .zookeeper_live import ZkLiveStore

# Hidden from type checkers, which would take every unknown name for a module attribute.
if not TYPE_CHECKING:
    __getattr__, __dir__ = exports(
        __name__,
        {
            ".reader": ("MetadataReader",),
            ".store": (
                "LEDGERS_ROOT",
                "MANAGED_LEDGERS_ROOT",
                "MetadataStore",
                "Stat",
                "cursor_path",
                "decode_meta_value",
                "encode_meta_value",
                "ledger_id_from_path",
                "ledger_path",
                "managed_ledger_path",
                "parse_ledger_metadata",
                "parse_managed_cursor_info",
                "parse_managed_ledger_info",
                "serialize_ledger_metadata",
            ),
            ".zookeeper": ("ZkSnapshotStore",),
            ".zookeeper_live": ("ZkLiveStore",),
        },
    )

__all__ = [
    "LEDGERS_ROOT",
    "MANAGED_LEDGERS_ROOT",
    "MetadataReader",
    "MetadataStore",
    "Stat",
    "ZkLiveStore",
    "ZkSnapshotStore",
    "cursor_path",
    "decode_meta_value",
    "encode_meta_value",
    "ledger_id_from_path",
    "ledger_path",
    "managed_ledger_path",
    "parse_ledger_metadata",
    "parse_managed_cursor_info",
    "parse_managed_ledger_info",
    "serialize_ledger_metadata",
]
