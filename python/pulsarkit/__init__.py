"""pulsarkit: Apache Pulsar and BookKeeper storage formats from Python, with a Rust core.

Byte-compatible with Pulsar 2.8+ and BookKeeper 4.x. The codec::

    import pulsarkit
    e = pulsarkit.Entry.parse(stored_bytes)
    for m in e.messages():
        print(m.sequence_id, m.key, m.payload)

The top level holds the names most work starts from: the codec's entry points, the managed-ledger
factory (``Store``) and its ledgers and cursors, ``PersistentTopic``, ``open_data_dir`` for a real
Pulsar data directory, and the errors. Everything else is in its subpackage, named after the
Pulsar or BookKeeper concept it holds (see ARCHITECTURE.md): :mod:`pulsarkit.codec`,
:mod:`pulsarkit.bookkeeper`, :mod:`pulsarkit.metadata`, :mod:`pulsarkit.managed_ledger`,
:mod:`pulsarkit.broker`, :mod:`pulsarkit.scan`, :mod:`pulsarkit.analysis`, :mod:`pulsarkit.spark`; bulk work over Arrow
columns is :mod:`pulsarkit.bulk`.

The root is light: ``import pulsarkit`` (and so ``import pulsarkit.codec``) loads only the native
module, the errors and the lazy hook (``lazy.py``). Every other name here, and each subpackage, is imported on
first use (PEP 562), as each subpackage's own names are, so codec users do not pay for RocksDB, Arrow datasets
or the broker.
"""

from __future__ import annotations

import importlib

from ._native import __version__, build_info
from .errors import (
    BadVersionError,
    BookieError,
    ChecksumMismatchError,
    CorruptEntryError,
    CorruptFrameError,
    CursorNotFoundError,
    DecompressionError,
    DigestMismatchError,
    EntryNotFoundError,
    InvalidCursorPositionError,
    LedgerNotFoundError,
    LifecycleError,
    LimitExceededError,
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
    MetadataNotFoundError,
    MetadataStoreError,
    PulsarkitError,
    UnsupportedCompressionError,
)
from .lazy import submodules

# What type checkers and IDEs see; at runtime these names come from __getattr__. A local constant rather
# than typing.TYPE_CHECKING, which would import typing (mypy and pyright honour the name either way).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import bulk, proto
    from .broker.topic import MessageId, PersistentTopic, PublishResult
    from .codec.commands import FrameDecoder, command, encode_command
    from .codec.entry import (
        COMPRESSION_TYPES,
        DEFAULT_DECOMPRESSION_LIMIT,
        BrokerEntryMetadata,
        Entry,
        Message,
        add_broker_entry_metadata,
        compress,
        crc32c,
        decompress,
        encode_batch,
        encode_entry,
        message_metadata,
        peek_broker_entry_metadata,
        strip_broker_entry_metadata,
    )
    from .managed_ledger import (
        ManagedCursor,
        ManagedLedger,
        ManagedLedgerConfig,
        ManagedLedgerFactory,
        Position,
        Store,
    )
    from .scan.datadir import DataDir, DataDirSpec, open_data_dir
    from .scan.records import DataDirError

#: Re-exported name -> the module that defines it, imported on first access.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("DataDir", "DataDirSpec", "open_data_dir"), ".scan.datadir"),
    "DataDirError": ".scan.records",  # its defining module (importing the scan package loads scan.datadir too)
    **dict.fromkeys(("MessageId", "PersistentTopic", "PublishResult"), ".broker.topic"),
    **dict.fromkeys(("FrameDecoder", "command", "encode_command"), ".codec.commands"),
    **dict.fromkeys(
        (
            "COMPRESSION_TYPES",
            "DEFAULT_DECOMPRESSION_LIMIT",
            "BrokerEntryMetadata",
            "Entry",
            "Message",
            "add_broker_entry_metadata",
            "compress",
            "crc32c",
            "decompress",
            "encode_batch",
            "encode_entry",
            "message_metadata",
            "peek_broker_entry_metadata",
            "strip_broker_entry_metadata",
        ),
        ".codec.entry",
    ),
    **dict.fromkeys(
        ("ManagedCursor", "ManagedLedger", "ManagedLedgerConfig", "ManagedLedgerFactory", "Position", "Store"),
        ".managed_ledger",
    ),
}


#: Classes whose hook a higher layer fills: ``Store.open`` hands a real Pulsar data directory to
#: ``open_data_dir``, registered by ``scan.datadir`` (loaded with them, as the eager root did).
_WIRED: dict[str, str] = {"Store": ".scan.datadir", "ManagedLedgerFactory": ".scan.datadir"}


def __getattr__(name: str) -> object:
    if name in _WIRED:
        importlib.import_module(_WIRED[name], __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    elif name in submodules(__path__):  # pk.bookkeeper, pk.bulk, ... without importing them first
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later accesses skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | submodules(__path__))


__all__ = [
    "COMPRESSION_TYPES",
    "DEFAULT_DECOMPRESSION_LIMIT",
    "BadVersionError",
    "BookieError",
    "BrokerEntryMetadata",
    "ChecksumMismatchError",
    "CorruptEntryError",
    "CorruptFrameError",
    "CursorNotFoundError",
    "DataDir",
    "DataDirError",
    "DataDirSpec",
    "DecompressionError",
    "DigestMismatchError",
    "Entry",
    "EntryNotFoundError",
    "FrameDecoder",
    "InvalidCursorPositionError",
    "LedgerNotFoundError",
    "LifecycleError",
    "LimitExceededError",
    "ManagedCursor",
    "ManagedLedger",
    "ManagedLedgerClosedError",
    "ManagedLedgerConfig",
    "ManagedLedgerError",
    "ManagedLedgerFactory",
    "ManagedLedgerFencedError",
    "ManagedLedgerTerminatedError",
    "Message",
    "MessageId",
    "MetadataNotFoundError",
    "MetadataStoreError",
    "PersistentTopic",
    "Position",
    "PublishResult",
    "PulsarkitError",
    "Store",
    "UnsupportedCompressionError",
    "__version__",
    "add_broker_entry_metadata",
    "build_info",
    "bulk",
    "command",
    "compress",
    "crc32c",
    "decompress",
    "encode_batch",
    "encode_command",
    "encode_entry",
    "message_metadata",
    "open_data_dir",
    "peek_broker_entry_metadata",
    "proto",
    "strip_broker_entry_metadata",
]
