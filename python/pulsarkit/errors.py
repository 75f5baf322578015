"""pulsarkit's exceptions. All derive from :class:`PulsarkitError`, itself a ``ValueError``.

Errors about bytes carry ``offset`` (from the start of the buffer passed in); checksum errors also
carry ``stored`` and ``computed``.
"""

from ._native import (
    ChecksumMismatchError,
    CorruptEntryError,
    CorruptFrameError,
    DecompressionError,
    DigestMismatchError,
    LimitExceededError,
    PulsarkitError,
    UnsupportedCompressionError,
)


# Storage-engine errors (bookie, metadata store, managed ledger, lifecycle). The "not found" ones are
# also KeyErrors so that mapping-style callers can catch them as such.
class _NotFound(KeyError):
    __str__ = Exception.__str__


class EncryptedMessageError(PulsarkitError):
    """An end-to-end encrypted entry was asked for its clear text, which needs the private key."""


class MetadataStoreError(PulsarkitError):
    """A metadata-store operation failed (bad stored value, read-only store, ...)."""


class BadVersionError(MetadataStoreError):
    """A conditional metadata update found another version than the one expected."""


class MetadataNotFoundError(MetadataStoreError, _NotFound):
    """No value at this metadata path."""


class ZooKeeperDataError(MetadataStoreError):
    """A ZooKeeper data directory (snapshot or transaction log) cannot be read, or cannot give the state asked
    for; the message names the file and the byte offset (``offset``, -1 when it concerns a whole file)."""

    offset: int = -1


class ZooKeeperServerError(MetadataStoreError):
    """A live ZooKeeper could not be read (pulsarkit only reads it): a reply that is not ZooKeeper's protocol, an
    error code the read cannot go on after (``code``, ZooKeeper's, None when the server gave none), a chroot that
    does not exist, or a tree that kept changing through every attempt at one consistent read."""

    code: int | None = None
    offset: int = -1


class ZooKeeperConnectionError(ZooKeeperServerError):
    """No server of a ZooKeeper connect string could be reached (each one's reason in the message), or the
    connection was lost or timed out mid-read."""


class BookieError(PulsarkitError):
    """A bookie (ledger storage) operation failed."""


class LedgerNotFoundError(BookieError, _NotFound):
    """The ledger does not exist (in the bookie or in the metadata store)."""


class EntryNotFoundError(BookieError, _NotFound):
    """The ledger exists but does not hold this entry."""


class ManagedLedgerError(PulsarkitError):
    """A managed-ledger or cursor operation failed."""


class ManagedLedgerClosedError(ManagedLedgerError):
    """The managed ledger (or store) was closed, or was opened read-only."""


class ManagedLedgerFencedError(ManagedLedgerError):
    """Another writer changed the managed ledger's metadata; this instance stopped writing."""


class ManagedLedgerTerminatedError(ManagedLedgerError):
    """The managed ledger was terminated: no more entries can be added."""


class CursorNotFoundError(ManagedLedgerError, _NotFound):
    """No cursor with this name."""


class InvalidCursorPositionError(ManagedLedgerError):
    """A mark-delete, reset or delete position the managed ledger cannot hold."""


class LifecycleError(PulsarkitError):
    """TTL or retention refused to act on inconsistent inputs."""


class StalePlanError(LifecycleError):
    """A plan was made on a state that has changed since: it is refused, with nothing done."""


class PlanFormatError(PulsarkitError):
    """A plan file is not a valid plan (malformed JSON, wrong kind or version, a missing or mistyped
    field). ``field`` names the offending field (``bookies[0].compaction.logs[2].log_id``), or is
    None when the file is not JSON at all."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class InvalidTopicNameError(PulsarkitError):
    """A topic or managed-ledger name Pulsar's ``TopicName`` would refuse (``IllegalArgumentException``)."""


class SchemaStorageError(PulsarkitError):
    """Bytes of the broker's schema storage (a ``/schemas`` locator, a schema ledger entry) that do not decode."""


class TransactionError(PulsarkitError):
    """A transaction-coordinator or pending-ack operation was refused."""


class TransactionNotFoundError(TransactionError, _NotFound):
    """The coordinator has no such transaction (it may have ended and been removed)."""


class InvalidTxnStatusError(TransactionError):
    """A status change the transaction's current status does not allow (``InvalidTxnStatusException``)."""


class BufferedWriterClosedError(ManagedLedgerFencedError):
    """The transaction-log buffered writer was closed before the record was written."""


__all__ = [
    "BadVersionError",
    "BookieError",
    "BufferedWriterClosedError",
    "ChecksumMismatchError",
    "CorruptEntryError",
    "CorruptFrameError",
    "CursorNotFoundError",
    "DecompressionError",
    "DigestMismatchError",
    "EncryptedMessageError",
    "EntryNotFoundError",
    "InvalidCursorPositionError",
    "InvalidTopicNameError",
    "InvalidTxnStatusError",
    "LedgerNotFoundError",
    "LifecycleError",
    "LimitExceededError",
    "ManagedLedgerClosedError",
    "ManagedLedgerError",
    "ManagedLedgerFencedError",
    "ManagedLedgerTerminatedError",
    "PlanFormatError",
    "MetadataNotFoundError",
    "MetadataStoreError",
    "PulsarkitError",
    "SchemaStorageError",
    "StalePlanError",
    "TransactionError",
    "TransactionNotFoundError",
    "UnsupportedCompressionError",
    "ZooKeeperConnectionError",
    "ZooKeeperDataError",
    "ZooKeeperServerError",
]
