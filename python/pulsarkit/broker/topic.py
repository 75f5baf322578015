"""``PersistentTopic``: the broker's publish path over a managed ledger — client checksum check,
PIP-6 deduplication, PIP-70 interceptors, append — plus dispatch (stripping broker entry metadata)
and seek by publish time and by index."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .. import _native
from ..codec.entry import Buffer, strip_broker_entry_metadata
from ..errors import PulsarkitError
from ..managed_ledger.ledger import ManagedLedger
from ..managed_ledger.position import Position
from .dedup import DeduplicationConfig, MessageDeduplication, MessageDupStatus
from .finder import DEFAULT_MAX_CLOCK_SKEW_MS, LedgerSpan, find_position_by_index, find_position_by_time
from .interceptors import BrokerEntryMetadataInterceptor, ManagedLedgerInterceptorImpl, create_interceptors

#: Protocol version from which a client can be sent broker entry metadata (v18, client BEM support).
BROKER_ENTRY_METADATA_MIN_PROTOCOL_VERSION = 18
#: Below v11 the broker also strips the checksum (C++ checksum fix).
CHECKSUM_MIN_PROTOCOL_VERSION = 11


@dataclass(frozen=True, slots=True)
class MessageId:
    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


DUPLICATE_ID = MessageId(-1, -1)


@dataclass(frozen=True, slots=True)
class PublishResult:
    """What the broker answers a SEND with.

    ``status``: ``OK`` (a SendReceipt with ``message_id``), ``DUPLICATE`` (a SendReceipt with -1:-1),
    ``UNKNOWN`` (SendError PersistenceError: pushed but not yet persisted, the client retries),
    ``CHECKSUM_ERROR`` (SendError ChecksumError, nothing stored), ``ERROR`` (the add failed or the
    entry is unreadable; SendError, the client retries).
    """

    status: str
    message_id: MessageId
    sequence_id: int
    highest_sequence_id: int
    error: str | None = None

    @property
    def server_error(self) -> str | None:
        """The ServerError name the broker puts in CommandSendError, None for a receipt."""
        return {
            "CHECKSUM_ERROR": "ChecksumError",
            "UNKNOWN": "PersistenceError",
            "ERROR": "PersistenceError",
        }.get(self.status)


class PersistentTopic:
    """A topic's publish path and read helpers over one :class:`ManagedLedger`.

    ``interceptors`` are Pulsar class names from ``brokerEntryMetadataInterceptors`` (or instances);
    a new index interceptor is made per topic and recovered from the managed ledger's ``index``
    property and the last entry of the last ledger. ``deduplication`` turns PIP-6 deduplication on,
    with ``deduplication_config`` (the broker's ``brokerDeduplication*`` settings; default its defaults).
    """

    def __init__(
        self,
        ml: ManagedLedger,
        interceptors: Iterable[str | BrokerEntryMetadataInterceptor] = (),
        deduplication: bool = False,
        *,
        deduplication_config: DeduplicationConfig | None = None,
        exposing_broker_entry_metadata_to_client: bool = False,
        max_clock_skew_ms: int = DEFAULT_MAX_CLOCK_SKEW_MS,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.ml = ml
        self._clock_ms = clock or (lambda: int(time.time() * 1000))
        self.exposing_broker_entry_metadata_to_client = exposing_broker_entry_metadata_to_client
        self.max_clock_skew_ms = max_clock_skew_ms
        self._view = _ManagedLedgerView(ml)
        names = list(interceptors)
        existing = ml.interceptor
        if existing is not None:
            # The managed ledger was opened with interceptors (ManagedLedgerConfig): they are the
            # topic's, already recovered; a second set would stamp every entry twice.
            if names:
                raise PulsarkitError("the managed ledger already has broker entry metadata interceptors")
            self.interceptor = existing
        else:
            # Like BrokerService: a fresh index interceptor per topic, installed in the managed
            # ledger, recovered from its "index" property and its last entry.
            self.interceptor = ManagedLedgerInterceptorImpl(create_interceptors(names, clock=self._clock_ms))
            self.interceptor.on_managed_ledger_properties_initialize(self._view.properties())
            self.interceptor.on_managed_ledger_last_ledger_initialize(self._view.last_entry())
            if self.interceptor.interceptors:
                ml.interceptor = self.interceptor
        self.deduplication = MessageDeduplication(
            ml,
            enabled=deduplication,
            config=deduplication_config,
            clock=lambda: self._clock_ms() / 1000,
        )
        self.pending_write_ops = 0
        self.fenced = False
        self.closed = False

    # -- publish ------------------------------------------------------------------------------

    def publish(
        self,
        headers_and_payload: Buffer,
        producer_name: str,
        sequence_id: int,
        highest_sequence_id: int | None = None,
        num_messages: int = 1,
        is_chunk: bool = False,
    ) -> PublishResult:
        """Handles one SEND's payload as the broker does, returning the receipt or error."""
        if self.closed:
            raise PulsarkitError("topic is closed")
        highest = highest_sequence_id if highest_sequence_id is not None else 0

        def result(status: str, mid: MessageId = DUPLICATE_ID, error: str | None = None) -> PublishResult:
            return PublishResult(status, mid, sequence_id, max(highest, sequence_id), error)

        data = bytes(headers_and_payload)
        try:
            fields = _native.publish_fields(data)
        except _native.ChecksumMismatchError as e:
            return result("CHECKSUM_ERROR", error=str(e))
        except PulsarkitError as e:
            return result("ERROR", error=f"unreadable entry: {e}")
        if fields.has_broker_entry_metadata:
            return result("ERROR", error="a client's SEND must not carry broker entry metadata")
        is_last_chunk = (not is_chunk) or (fields.chunk_id or 0) == (fields.num_chunks_from_msg or 0) - 1
        status = self.deduplication.is_duplicate(
            producer_name,
            sequence_id,
            highest,
            is_chunk=is_chunk,
            is_last_chunk=is_last_chunk,
            is_marker=fields.is_marker,
        )
        if status is MessageDupStatus.Dup:
            return result("DUPLICATE")
        if status is MessageDupStatus.Unknown:
            return result("UNKNOWN", error="Cannot determine whether the message is a duplicate at this time")
        self.pending_write_ops += 1
        try:
            # The managed ledger runs the interceptors (beforeAddEntry) as it appends.
            position = self.ml.add_entry(data, num_messages=num_messages)
        except Exception as e:  # the broker fences the topic, then resets dedup once writes drain
            self.interceptor.after_failed_add_entry(num_messages)
            self.fenced = True
            self._decrement_pending_write_ops()
            return result("ERROR", error=f"add failed: {e}")
        self._decrement_pending_write_ops()
        self.deduplication.record_message_persisted(
            producer_name,
            sequence_id,
            highest,
            position,
            is_chunk=is_chunk,
            is_last_chunk=is_last_chunk,
            is_marker=fields.is_marker,
        )
        return result("OK", MessageId(position.ledger_id, position.entry_id))

    def _decrement_pending_write_ops(self) -> None:
        self.pending_write_ops -= 1
        if self.pending_write_ops == 0 and self.fenced:
            self.deduplication.reset_highest_sequence_id_pushed()
            self.fenced = False

    # -- dispatch -----------------------------------------------------------------------------

    def dispatch_bytes(self, entry_bytes: Buffer, protocol_version: int, supports_broker_entry_metadata: bool) -> bytes:
        """What a consumer receives: broker entry metadata stays only if the client's protocol version
        is at least 18, it advertised ``supports_broker_entry_metadata``, and exposing is enabled.
        Clients below v11 also get the checksum skipped. The stored bytes never change."""
        data = bytes(entry_bytes)
        expose = (
            protocol_version >= BROKER_ENTRY_METADATA_MIN_PROTOCOL_VERSION
            and supports_broker_entry_metadata
            and self.exposing_broker_entry_metadata_to_client
        )
        if not expose:
            data = strip_broker_entry_metadata(data)
            if protocol_version < CHECKSUM_MIN_PROTOCOL_VERSION and data[:2] == b"\x0e\x01":
                data = data[6:]
        return data

    # -- seek ---------------------------------------------------------------------------------

    def find_position_by_time(self, publish_time_ms: int) -> Position | None:
        """The position a cursor is reset to by ``seek(publish_time)`` (``PersistentMessageFinder``)."""
        pos = find_position_by_time(self._view.spans(), self._view.read_entry, publish_time_ms, self.max_clock_skew_ms)
        return None if pos is None else Position(*pos)

    def find_position_by_index(self, index: int) -> Position | None:
        """The position of the entry holding the message with broker index ``index``."""
        pos = find_position_by_index(self._view.spans(), self._view.read_entry, index)
        return None if pos is None else Position(*pos)

    def reset_cursor(
        self, cursor_name: str, publish_time_ms: int | None = None, index: int | None = None
    ) -> Position | None:
        """Resets a subscription's cursor to a publish time or a broker index; returns the position."""
        if (publish_time_ms is None) == (index is None):
            raise PulsarkitError("give exactly one of publish_time_ms and index")
        pos = (
            self.find_position_by_time(publish_time_ms)
            if publish_time_ms is not None
            else self.find_position_by_index(index)  # type: ignore[arg-type]  # not None: checked above
        )
        if pos is not None:
            self.ml.open_cursor(cursor_name).reset(pos)
        return pos

    # -- state ----------------------------------------------------------------------------------

    def last_sequence_id(self, producer_name: str) -> int:
        """What PRODUCER_SUCCESS reports to a reconnecting producer (-1 when unknown or dedup is off)."""
        return self.deduplication.last_published_sequence_id(producer_name)

    @property
    def index(self) -> int | None:
        """The broker index of the last message added, if the index interceptor is on (None too when the managed
        ledger was opened with an interceptor of its own, not the broker's)."""
        icp = self.interceptor
        i = icp.index_interceptor if isinstance(icp, ManagedLedgerInterceptorImpl) else None
        return None if i is None else i.index

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.ml.close()


class _ManagedLedgerView:
    """The few managed-ledger reads the interceptors and the finder use, in one place."""

    def __init__(self, ml: ManagedLedger) -> None:
        self.ml = ml

    def spans(self) -> list[LedgerSpan]:
        return [LedgerSpan(i.ledger_id, i.entries, i.timestamp) for i in self.ml.ledgers()]

    def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        return self.ml.read_entry(Position(ledger_id, entry_id))

    def last_entry(self) -> bytes | None:
        lac = self.ml.last_confirmed_entry
        return None if lac.entry_id < 0 else self.ml.read_entry(lac)

    def properties(self) -> dict[str, str]:
        return dict(self.ml.properties)
