"""Transactions (PIP-31, batched by PIP-160): the coordinator's log and state, the buffered writer
that packs records into entries, and the subscriptions' pending-ack stores."""

from ...lazy import exports

# What type checkers see; at runtime each name is imported on first use (lazy.py says why).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .buffered_writer import TxnBatchedPosition, TxnLogBufferedWriter, TxnLogBufferedWriterConfig, TxnPositions
    from .coordinator import TransactionMetadataStore, TxnMeta
    from .log import TRANSACTION_LOG_CURSOR, BufferedLogOptions, TransactionLog, transaction_log_name
    from .metrics import COORDINATOR_PREFIX, PENDING_ACK_STORE_PREFIX, TxnLogBufferedWriterMetricsStats
    from .pending_ack import PENDING_ACK_CURSOR, PendingAckStore, pending_ack_store_name

# Hidden from type checkers, which would take every unknown name for a module attribute.
if not TYPE_CHECKING:
    __getattr__, __dir__ = exports(
        __name__,
        {
            ".buffered_writer": (
                "TxnBatchedPosition",
                "TxnLogBufferedWriter",
                "TxnLogBufferedWriterConfig",
                "TxnPositions",
            ),
            ".coordinator": ("TransactionMetadataStore", "TxnMeta"),
            ".log": ("TRANSACTION_LOG_CURSOR", "BufferedLogOptions", "TransactionLog", "transaction_log_name"),
            ".metrics": ("COORDINATOR_PREFIX", "PENDING_ACK_STORE_PREFIX", "TxnLogBufferedWriterMetricsStats"),
            ".pending_ack": ("PENDING_ACK_CURSOR", "PendingAckStore", "pending_ack_store_name"),
        },
    )

__all__ = [
    "COORDINATOR_PREFIX",
    "PENDING_ACK_CURSOR",
    "PENDING_ACK_STORE_PREFIX",
    "TRANSACTION_LOG_CURSOR",
    "BufferedLogOptions",
    "PendingAckStore",
    "TransactionLog",
    "TransactionMetadataStore",
    "TxnBatchedPosition",
    "TxnLogBufferedWriter",
    "TxnLogBufferedWriterConfig",
    "TxnLogBufferedWriterMetricsStats",
    "TxnMeta",
    "TxnPositions",
    "pending_ack_store_name",
    "transaction_log_name",
]
