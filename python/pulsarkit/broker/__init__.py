"""The broker's mechanisms over a managed ledger: the topic's publish and dispatch paths, message
deduplication (PIP-6), broker entry metadata interceptors (PIP-70), seek by time and index, TTL."""

from ..lazy import exports

# What type checkers see; at runtime each name is imported on first use (lazy.py says why).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .dedup import DEDUPLICATION_CURSOR_NAME, DeduplicationConfig, MessageDeduplication, MessageDupStatus
    from .interceptors import (
        INDEX_INTERCEPTOR,
        TIMESTAMP_INTERCEPTOR,
        AppendBrokerTimestampMetadataInterceptor,
        AppendIndexMetadataInterceptor,
        ManagedLedgerInterceptorImpl,
        create_interceptors,
        managed_ledger_interceptor,
    )
    from .topic import MessageId, PersistentTopic, PublishResult

# Hidden from type checkers, which would take every unknown name for a module attribute.
if not TYPE_CHECKING:
    __getattr__, __dir__ = exports(
        __name__,
        {
            ".dedup": ("DEDUPLICATION_CURSOR_NAME", "DeduplicationConfig", "MessageDeduplication", "MessageDupStatus"),
            ".interceptors": (
                "INDEX_INTERCEPTOR",
                "TIMESTAMP_INTERCEPTOR",
                "AppendBrokerTimestampMetadataInterceptor",
                "AppendIndexMetadataInterceptor",
                "ManagedLedgerInterceptorImpl",
                "create_interceptors",
                "managed_ledger_interceptor",
            ),
            ".topic": ("MessageId", "PersistentTopic", "PublishResult"),
        },
    )

__all__ = [
    "DEDUPLICATION_CURSOR_NAME",
    "INDEX_INTERCEPTOR",
    "TIMESTAMP_INTERCEPTOR",
    "AppendBrokerTimestampMetadataInterceptor",
    "AppendIndexMetadataInterceptor",
    "ManagedLedgerInterceptorImpl",
    "DeduplicationConfig",
    "MessageDeduplication",
    "MessageDupStatus",
    "MessageId",
    "PersistentTopic",
    "PublishResult",
    "create_interceptors",
    "managed_ledger_interceptor",
]
