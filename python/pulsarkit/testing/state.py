"""The fake broker's protocol state: what a client sent and was sent, and the per-topic bookkeeping
of its dispatcher (entries by position, subscriptions, consumers, permits, redeliveries)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import proto
from ..broker.topic import PersistentTopic
from ..managed_ledger import Position

if TYPE_CHECKING:
    from .connection import _Connection

_LATEST = (2**63 - 1, 2**63 - 1)  # MessageId.latest as the Java/C++ clients encode it


class BrokerError(Exception):
    """A ServerError the broker answers with (``error`` is a ServerError name or number)."""

    def __init__(self, error: str | int, message: str = "") -> None:
        self.code = proto.ServerError[error] if isinstance(error, str) else int(error)
        super().__init__(message or str(error))


OnSend = Callable[[str, Any, bytes], Any]


@dataclass(frozen=True)
class _EntryRef:
    """Where an entry of the topic's managed ledger is, and how many permits delivering it takes."""

    position: Position
    num_messages: int = 1
    is_batch: bool = False


@dataclass
class RecordedSend:
    """A SEND exactly as received; ``ledger_id``/``entry_id`` are None when it was rejected."""

    topic: str
    producer_id: int
    producer_name: str
    send: Any  # CommandSend
    headers_and_payload: bytes
    ledger_id: int | None = None
    entry_id: int | None = None
    error: BrokerError | None = None


@dataclass
class DispatchedMessage:
    """A MESSAGE frame the broker wrote: the command and the bytes that followed it."""

    topic: str
    subscription: str
    consumer_id: int
    message: Any  # CommandMessage
    data: bytes


@dataclass
class _Topic:
    name: str
    persistent: PersistentTopic
    entries: list[_EntryRef] = field(default_factory=list)
    subscriptions: dict[str, _Subscription] = field(default_factory=dict)
    positions: dict[tuple[int, int], int] = field(default_factory=dict)

    def append(self, e: _EntryRef) -> None:
        self.positions[(e.position.ledger_id, e.position.entry_id)] = len(self.entries)
        self.entries.append(e)

    def index_of(self, ledger_id: int, entry_id: int) -> int:
        """Position of the first entry at or after (ledger_id, entry_id)."""
        i = self.positions.get((ledger_id, entry_id))
        if i is not None:
            return i
        for i, e in enumerate(self.entries):
            if tuple(e.position) >= (ledger_id, entry_id):
                return i
        return len(self.entries)

    def read(self, i: int) -> bytes:
        return self.persistent.ml.read_entry(self.entries[i].position)


@dataclass
class _Subscription:
    name: str
    topic: _Topic
    sub_type: int
    durable: bool
    read_pos: int = 0
    acked: set[int] = field(default_factory=set)
    consumers: list[_Consumer] = field(default_factory=list)
    redeliveries: dict[int, int] = field(default_factory=dict)
    redeliver_queue: list[int] = field(default_factory=list)
    rr: int = 0
    #: A durable subscription's cursor: acknowledgements move it as the broker's do.
    cursor: Any = None
    #: For a ``read_compacted`` subscription: entry index -> the compacted ledger's bytes for it
    #: (entries below the horizon that compaction dropped are skipped), and the view itself.
    compacted: dict[int, bytes] | None = None
    compacted_view: Any = None

    @property
    def mark_delete(self) -> int:
        """Index of the last entry of the acked prefix, -1 if none."""
        i = -1
        while i + 1 in self.acked:
            i += 1
        return i

    def rewind(self) -> None:
        self.read_pos = self.mark_delete + 1
        self.redeliver_queue.clear()


@dataclass(eq=False)
class _Consumer:
    conn: _Connection
    consumer_id: int
    sub: _Subscription
    name: str
    permits: int = 0
    epoch: int | None = None


def _copy(msg: Any) -> Any:
    c = type(msg)()
    c.CopyFrom(msg)
    return c


def _start_position(topic: _Topic, mid: Any) -> int:
    """Where a cursor starts for a given message id: ``earliest`` -> 0, ``latest`` -> end; otherwise the
    id's entry itself, batch index or not, as a real broker starts a Reader (one entry back from the id,
    then the next valid position) and seeks: the client drops what comes before the id (before or up to
    it, for an exclusive start; checked against a real standalone by test_handoff_real.py)."""
    lid, eid = mid.ledgerId, mid.entryId
    if (lid, eid) == _LATEST:
        return len(topic.entries)
    if lid >= 2**63:  # -1 as uint64: earliest
        return 0
    return topic.index_of(lid, eid)
