"""pulsarkit: Apache Pulsar and BookKeeper storage formats from Python, with a Rust core.

Byte-compatible with Pulsar 2.8+ and BookKeeper 4.x. The codec::

    import pulsarkit
    e = pulsarkit.Entry.parse(stored_bytes)
    for m in e.messages():
        print(m.sequence_id, m.key, m.payload)

Bulk work over Arrow columns lives in :mod:`pulsarkit.bulk`, Spark wrappers in :mod:`pulsarkit.spark`.
"""

from . import bulk, proto
from ._native import __version__, build_info
from .chunks import ChunkAssembler, ChunkedMessage
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
from .bookie import Bookie
from .managed_ledger import ManagedCursor, ManagedLedger, ManagedLedgerConfig, Position
from .metadata import MetadataStore
from .store import Store
from . import lifecycle
from .frames import FrameDecoder, command, encode_command
from . import entrylog
from .entrylog import DigestMismatchError, EntryLogReader, EntryLogWriter, scan_entry_logs
from . import audit
from .dedup import MessageDeduplication, MessageDupStatus
from .interceptors import (
    INDEX_INTERCEPTOR,
    TIMESTAMP_INTERCEPTOR,
    AppendBrokerTimestampMetadataInterceptor,
    AppendIndexMetadataInterceptor,
)
from .topic import MessageId, PersistentTopic, PublishResult

__all__ = [
    "INDEX_INTERCEPTOR",
    "TIMESTAMP_INTERCEPTOR",
    "AppendBrokerTimestampMetadataInterceptor",
    "AppendIndexMetadataInterceptor",
    "MessageDeduplication",
    "MessageDupStatus",
    "MessageId",
    "PersistentTopic",
    "PublishResult",
    "audit",
    "DigestMismatchError",
    "EntryLogReader",
    "EntryLogWriter",
    "entrylog",
    "scan_entry_logs",
    "BadVersionError",
    "Bookie",
    "BookieError",
    "CursorNotFoundError",
    "EntryNotFoundError",
    "InvalidCursorPositionError",
    "LedgerNotFoundError",
    "LifecycleError",
    "ManagedCursor",
    "ManagedLedger",
    "ManagedLedgerClosedError",
    "ManagedLedgerConfig",
    "ManagedLedgerError",
    "ManagedLedgerFencedError",
    "ManagedLedgerTerminatedError",
    "MetadataNotFoundError",
    "MetadataStore",
    "MetadataStoreError",
    "Position",
    "Store",
    "lifecycle",
    "COMPRESSION_TYPES",
    "DEFAULT_DECOMPRESSION_LIMIT",
    "BrokerEntryMetadata",
    "ChecksumMismatchError",
    "ChunkAssembler",
    "ChunkedMessage",
    "CorruptEntryError",
    "CorruptFrameError",
    "DecompressionError",
    "Entry",
    "FrameDecoder",
    "LimitExceededError",
    "Message",
    "PulsarkitError",
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
    "peek_broker_entry_metadata",
    "proto",
    "strip_broker_entry_metadata",
]
