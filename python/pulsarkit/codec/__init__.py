"""Pulsar's wire formats, pure functions over bytes: entries (headersAndPayload, MessageMetadata,
batches, compression, broker entry metadata), commands and frames, chunked messages."""

from ..lazy import exports

# What type checkers see; at runtime each name is imported on first use (lazy.py says why).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .chunks import ChunkAssembler, ChunkedMessage
    from .commands import FrameDecoder, command, encode_command
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

# Hidden from type checkers, which would take every unknown name for a module attribute.
if not TYPE_CHECKING:
    __getattr__, __dir__ = exports(
        __name__,
        {
            ".chunks": ("ChunkAssembler", "ChunkedMessage"),
            ".commands": ("FrameDecoder", "command", "encode_command"),
            ".entry": (
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
        },
    )

__all__ = [
    "COMPRESSION_TYPES",
    "DEFAULT_DECOMPRESSION_LIMIT",
    "BrokerEntryMetadata",
    "ChunkAssembler",
    "ChunkedMessage",
    "Entry",
    "FrameDecoder",
    "Message",
    "add_broker_entry_metadata",
    "command",
    "compress",
    "crc32c",
    "decompress",
    "encode_batch",
    "encode_command",
    "encode_entry",
    "message_metadata",
    "peek_broker_entry_metadata",
    "strip_broker_entry_metadata",
]
