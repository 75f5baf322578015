"""BookKeeper's storage: entry digests, entry logs, ``DbLedgerStorage`` and its RocksDB indexes."""

from ..lazy import exports

# What type checkers see; at runtime each name is imported on first use (lazy.py says why).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .digest import (
        DIGEST_TYPES,
        BookieEntry,
        BookieEntryPacker,
        detect_digest_type,
        digest_length,
        mac_key,
        master_key,
        pack_entry,
        unpack_entry,
    )
    from .entrylog import (
        EntryLogMetadata,
        EntryLogReader,
        EntryLogWriter,
        ScanIssue,
        find_entry_logs,
        read_entry_log_metadata,
        scan_entry_logs,
    )
    from .ledger_storage import DbLedgerStorage, RecoveryReport, SingleDirectoryDbLedgerStorage, TornTail

# Hidden from type checkers, which would take every unknown name for a module attribute.
if not TYPE_CHECKING:
    __getattr__, __dir__ = exports(
        __name__,
        {
            ".digest": (
                "DIGEST_TYPES",
                "BookieEntry",
                "BookieEntryPacker",
                "detect_digest_type",
                "digest_length",
                "mac_key",
                "master_key",
                "pack_entry",
                "unpack_entry",
            ),
            ".entrylog": (
                "EntryLogMetadata",
                "EntryLogReader",
                "EntryLogWriter",
                "ScanIssue",
                "find_entry_logs",
                "read_entry_log_metadata",
                "scan_entry_logs",
            ),
            ".ledger_storage": ("DbLedgerStorage", "RecoveryReport", "SingleDirectoryDbLedgerStorage", "TornTail"),
        },
    )

__all__ = [
    "DIGEST_TYPES",
    "BookieEntry",
    "BookieEntryPacker",
    "DbLedgerStorage",
    "EntryLogMetadata",
    "EntryLogReader",
    "EntryLogWriter",
    "RecoveryReport",
    "ScanIssue",
    "SingleDirectoryDbLedgerStorage",
    "TornTail",
    "detect_digest_type",
    "digest_length",
    "find_entry_logs",
    "mac_key",
    "master_key",
    "pack_entry",
    "read_entry_log_metadata",
    "scan_entry_logs",
    "unpack_entry",
]
