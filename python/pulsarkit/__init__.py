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
:mod:`pulsarkit.broker`, :mod:`pulsarkit.analysis`, :mod:`pulsarkit.spark`; bulk work over Arrow
columns is :mod:`pulsarkit.bulk`.
"""

from . import bulk, proto
from ._native import __version__, build_info
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
from .managed_ledger import (
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    Position,
    Store,
)
from .scan.datadir import DataDir, DataDirError, open_data_dir

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
