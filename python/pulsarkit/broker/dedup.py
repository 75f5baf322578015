"""PIP-6 message deduplication, as ``MessageDeduplication`` does it in the broker.

Two maps per producer: the highest sequence id *pushed* (accepted for persisting) and *persisted*
(the add completed). A message whose sequence id is not above the pushed value is a duplicate if it
is also not above the persisted value, and "unknown" (pushed, not yet persisted: the client must
retry) otherwise. The persisted map is snapshotted as mark-delete properties of the ``pulsar.dedup``
cursor every N entries and every T seconds, and rebuilt after a restart from the snapshot plus a
replay of the entries after it.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..codec.entry import Buffer, Entry
from ..errors import PulsarkitError
from ..managed_ledger.cursor import ManagedCursor
from ..managed_ledger.ledger import ManagedLedger
from ..managed_ledger.position import Position

DEDUPLICATION_CURSOR_NAME = "pulsar.dedup"


class MessageDupStatus(enum.Enum):
    Unknown = "Unknown"
    NotDup = "NotDup"
    Dup = "Dup"


class Status(enum.Enum):
    Initialized = "Initialized"
    Disabled = "Disabled"
    Recovering = "Recovering"
    Enabled = "Enabled"
    Removing = "Removing"
    Failed = "Failed"


@dataclass(frozen=True)
class DeduplicationConfig:
    """The broker's ``brokerDeduplication*`` settings, with its defaults."""

    #: brokerDeduplicationEntriesInterval: entries between two snapshots
    entries_interval: int = 1000
    #: brokerDeduplicationMaxNumberOfProducers: producers a snapshot keeps
    max_number_of_producers: int = 10_000
    #: brokerDeduplicationProducerInactivityTimeoutMinutes
    producer_inactivity_timeout_minutes: int = 360
    #: brokerDeduplicationSnapshotIntervalSeconds: a snapshot at least this often when entries came
    snapshot_interval_seconds: int = 120


class MessageDeduplication:
    """Deduplication state of one topic over its managed ledger.

    The snapshot is the ``pulsar.dedup`` cursor's mark-delete properties on ``ml``; ``config`` the
    broker's settings (default: its defaults).
    """

    def __init__(
        self,
        ml: ManagedLedger,
        enabled: bool = False,
        config: DeduplicationConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        config = config or DeduplicationConfig()
        self.ml = ml
        self.entries_interval = config.entries_interval
        self.max_number_of_producers = config.max_number_of_producers
        self.producer_inactivity_timeout_ms = max(1, config.producer_inactivity_timeout_minutes) * 60_000
        self.snapshot_interval_seconds = config.snapshot_interval_seconds
        self._clock = clock
        self.pushed: dict[str, int] = {}
        self.persisted: dict[str, int] = {}
        self.inactive_producers: dict[str, float] = {}
        self.snapshot_counter = 0
        self.last_snapshot_time = clock()
        self.cursor: ManagedCursor | None = None
        self.status = Status.Initialized
        self.replayed_entries = 0
        self._enabled_config = enabled
        self.check_status()

    # -- enabling and disabling -------------------------------------------------------------

    @property
    def is_enabled(self) -> bool:
        return self.status is Status.Enabled

    def set_enabled(self, enabled: bool) -> None:
        """Turns deduplication on (open cursor, recover) or off (delete cursor, clear maps) at run time."""
        self._enabled_config = enabled
        self.check_status()

    def check_status(self) -> None:
        if self._enabled_config and self.status in (Status.Initialized, Status.Disabled, Status.Failed):
            self.status = Status.Recovering
            try:
                self.cursor = self.ml.open_cursor(DEDUPLICATION_CURSOR_NAME)
                self._replay_cursor(self.cursor)
            except Exception:
                self.status = Status.Failed
                raise
            self.status = Status.Enabled
        elif not self._enabled_config and self.status in (Status.Initialized, Status.Enabled, Status.Failed):
            self.status = Status.Removing
            try:
                self.ml.delete_cursor(DEDUPLICATION_CURSOR_NAME)
            except (KeyError, PulsarkitError):  # CursorNotFound counts as success
                pass
            self.cursor = None
            self.pushed.clear()
            self.persisted.clear()
            self.inactive_producers.clear()
            self.status = Status.Disabled

    def _replay_cursor(self, cursor: ManagedCursor) -> None:
        """``replayCursor``: the snapshot, then every entry after it; each producer seen starts inactive
        (``producerRemoved``) until it connects, and the entries replayed count towards the next snapshot."""
        self.pushed.clear()
        self.persisted.clear()
        self.inactive_producers.clear()
        now = self._clock()
        for name, seq in (cursor.properties or {}).items():
            self.pushed[name] = seq
            self.persisted[name] = seq
            self.inactive_producers[name] = now
        replayed = 0
        last: Position | None = None
        for last, data in self._entries_after(cursor.mark_delete_position):
            md = Entry.parse(data, verify_checksum=False).metadata
            seq = max(md.highest_sequence_id, md.sequence_id)
            self.pushed[md.producer_name] = seq
            self.persisted[md.producer_name] = seq
            self.inactive_producers[md.producer_name] = now
            replayed += 1
        self.replayed_entries = replayed
        self.snapshot_counter = replayed
        if last is not None and replayed >= self.entries_interval:
            self.take_snapshot(last)

    def _entries_after(self, position: Position) -> Iterator[tuple[Position, bytes]]:
        yield from self.ml.read_after(position)

    def _last_position(self) -> Position | None:
        lac = self.ml.last_confirmed_entry
        return None if lac is None or lac.entry_id < 0 else lac

    # -- the publish path ---------------------------------------------------------------------

    def is_duplicate(
        self,
        producer_name: str,
        sequence_id: int,
        highest_sequence_id: int = 0,
        is_chunk: bool = False,
        is_last_chunk: bool = True,
        is_marker: bool = False,
    ) -> MessageDupStatus:
        """Checks a message before it is persisted, and records it as pushed when it is not a duplicate."""
        if not self.is_enabled or is_marker:
            return MessageDupStatus.NotDup
        if is_chunk and not is_last_chunk:
            return MessageDupStatus.NotDup
        highest = max(highest_sequence_id, sequence_id)
        last_pushed = self.pushed.get(producer_name)
        if last_pushed is not None and sequence_id <= last_pushed:
            last_persisted = self.persisted.get(producer_name)
            if last_persisted is not None and sequence_id <= last_persisted:
                return MessageDupStatus.Dup
            return MessageDupStatus.Unknown
        self.pushed[producer_name] = highest
        return MessageDupStatus.NotDup

    def record_message_persisted(
        self,
        producer_name: str,
        sequence_id: int,
        highest_sequence_id: int,
        position: Position,
        is_chunk: bool = False,
        is_last_chunk: bool = True,
        is_marker: bool = False,
    ) -> None:
        """After an add completed (``recordMessagePersisted``): a marker counts for nothing; every other
        entry, each chunk included, counts towards the next snapshot, and the last chunk of a message
        (or a whole message) moves the producer's persisted sequence id."""
        if not self.is_enabled or is_marker:
            return
        if not is_chunk or is_last_chunk:
            self.persisted[producer_name] = max(highest_sequence_id, sequence_id)
        self.snapshot_counter += 1
        if self.snapshot_counter >= self.entries_interval:
            self.take_snapshot(position)

    def reset_highest_sequence_id_pushed(self) -> None:
        """After failed adds have drained: forget what was pushed but never persisted."""
        if not self.is_enabled:
            return
        self.pushed = dict(self.persisted)

    def last_published_sequence_id(self, producer_name: str) -> int:
        """The sequence id a reconnecting producer resumes after (-1 when unknown)."""
        return self.pushed.get(producer_name, -1)

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, int]:
        """The persisted map, limited to ``max_number_of_producers`` in name order."""
        out: dict[str, int] = {}
        for name in sorted(self.persisted):
            if len(out) >= self.max_number_of_producers:
                break
            out[name] = self.persisted[name]
        return out

    def take_snapshot(self, position: Position | None) -> None:
        if self.cursor is None or position is None:
            return
        self.snapshot_counter = 0
        self.cursor.mark_delete(position, properties=self.snapshot())
        self.last_snapshot_time = self._clock()

    def take_snapshot_if_due(self) -> bool:
        """The periodic time-based snapshot: at the last confirmed entry when the interval has
        elapsed and it is beyond the mark-delete position."""
        if not self.is_enabled or self.snapshot_interval_seconds <= 0:
            return False
        if self._clock() - self.last_snapshot_time < self.snapshot_interval_seconds:
            return False
        lac = self._last_position()
        if lac is None or self.cursor is None or not _after(lac, self.cursor.mark_delete_position):
            return False
        self.take_snapshot(lac)
        return True

    # -- producers ----------------------------------------------------------------------------

    def producer_added(self, producer_name: str) -> None:
        self.inactive_producers.pop(producer_name, None)

    def producer_removed(self, producer_name: str) -> None:
        self.inactive_producers[producer_name] = self._clock()

    def purge_inactive_producers(self) -> list[str]:
        """Forgets producers inactive longer than the timeout, then snapshots at the mark-delete."""
        now = self._clock()
        gone = [p for p, t in self.inactive_producers.items() if (now - t) * 1000 > self.producer_inactivity_timeout_ms]
        for p in gone:
            del self.inactive_producers[p]
            self.pushed.pop(p, None)
            self.persisted.pop(p, None)
        if gone and self.cursor is not None and self.cursor.mark_delete_position is not None:
            self.take_snapshot(self.cursor.mark_delete_position)
        return gone


def _after(a: Position, b: Position | None) -> bool:
    if b is None:
        return True
    return (a.ledger_id, a.entry_id) > (b.ledger_id, b.entry_id)


def entry_sequence_range(data: Buffer) -> tuple[str, int, int]:
    """(producer_name, sequence_id, max(highest_sequence_id, sequence_id)) of a stored entry."""
    md = Entry.parse(data, verify_checksum=False).metadata
    return md.producer_name, md.sequence_id, max(md.highest_sequence_id, md.sequence_id)
