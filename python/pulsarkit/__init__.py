"""pulsarkit: Apache Pulsar and BookKeeper storage formats from Python, with a Rust core.

Byte-compatible with Pulsar 2.8+ and BookKeeper 4.x. The codec::

    import pulsarkit
    e = pulsarkit.Entry.parse(stored_bytes)
    for m in e.messages():
        print(m.sequence_id, m.key, m.payload)

Bulk work over Arrow columns lives in :mod:`pulsarkit.bulk`, Spark wrappers in :mod:`pulsarkit.spark`.
"""

from . import audit, bulk, entrylog, lifecycle, proto
from .analysis.datadir import DataDir, DataDirError, open_data_dir
from ._native import __version__, build_info
from .bookie import Bookie
from .chunks import ChunkAssembler, ChunkedMessage
from .dedup import MessageDeduplication, MessageDupStatus
from .entry import (
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
from .entrylog import DigestMismatchError, EntryLogReader, EntryLogWriter, scan_entry_logs
from .errors import (
    BadVersionError,
    BookieError,
    ChecksumMismatchError,
    CorruptEntryError,
    CorruptFrameError,
    CursorNotFoundError,
    DecompressionError,
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
from .frames import FrameDecoder, command, encode_command
from .interceptors import (
    INDEX_INTERCEPTOR,
    TIMESTAMP_INTERCEPTOR,
    AppendBrokerTimestampMetadataInterceptor,
    AppendIndexMetadataInterceptor,
)
from .managed_ledger import ManagedCursor, ManagedLedger, ManagedLedgerConfig, Position
from .metadata import MetadataStore
from .store import Store
from .topic import MessageId, PersistentTopic, PublishResult

__all__ = [
    "COMPRESSION_TYPES",
    "DEFAULT_DECOMPRESSION_LIMIT",
    "INDEX_INTERCEPTOR",
    "TIMESTAMP_INTERCEPTOR",
    "AppendBrokerTimestampMetadataInterceptor",
    "AppendIndexMetadataInterceptor",
    "BadVersionError",
    "Bookie",
    "BookieError",
    "BrokerEntryMetadata",
    "ChecksumMismatchError",
    "ChunkAssembler",
    "ChunkedMessage",
    "CorruptEntryError",
    "CorruptFrameError",
    "CursorNotFoundError",
    "DataDir",
    "DataDirError",
    "DecompressionError",
    "DigestMismatchError",
    "Entry",
    "EntryLogReader",
    "EntryLogWriter",
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
    "ManagedLedgerFencedError",
    "ManagedLedgerTerminatedError",
    "Message",
    "MessageDeduplication",
    "MessageDupStatus",
    "MessageId",
    "MetadataNotFoundError",
    "MetadataStore",
    "MetadataStoreError",
    "PersistentTopic",
    "Position",
    "PublishResult",
    "PulsarkitError",
    "Store",
    "UnsupportedCompressionError",
    "__version__",
    "add_broker_entry_metadata",
    "audit",
    "build_info",
    "bulk",
    "command",
    "compress",
    "crc32c",
    "decompress",
    "encode_batch",
    "encode_command",
    "encode_entry",
    "entrylog",
    "lifecycle",
    "message_metadata",
    "open_data_dir",
    "peek_broker_entry_metadata",
    "proto",
    "scan_entry_logs",
    "strip_broker_entry_metadata",
]
