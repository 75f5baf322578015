"""Expected answers for compacted topics, for people who test Pulsar clients and brokers.

Build a topic the way your test does, compact it exactly as Pulsar does, and ask what a
``readCompacted`` reader must get: its messages, the last message id ``GetLastMessageId`` answers
(PIP-429), and ``hasMessageAvailable`` after any message::

    from pulsarkit.testing.compaction import CompactedTopicOracle

    with CompactedTopicOracle() as t:
        t.send_batch([("a", b"1"), ("b", b"2"), ("a", b"")])   # one batch; the empty value is a tombstone
        t.send("b", b"3")
        t.compact()
        assert t.expected_last_message_id() == (t.positions[1].ledger_id, t.positions[1].entry_id, -1)
        assert [m.key for m in t.expected_messages()] == ["b"]

With pytest, the ``compacted_topic_oracle`` fixture (:mod:`pulsarkit.testing.pytest_plugin`, loaded
automatically) gives a fresh one per test.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..broker.compaction import EARLIEST, CompactedTopic, CompactionOptions, CompactionResult, Compactor
from ..codec.entry import Entry, encode_batch, encode_entry, message_metadata
from ..managed_ledger import ManagedLedgerConfig, Position, Store


@dataclass(frozen=True)
class ExpectedMessage:
    ledger_id: int
    entry_id: int
    batch_index: int
    key: str | None
    payload: bytes

    @property
    def message_id(self) -> tuple[int, int, int]:
        return (self.ledger_id, self.entry_id, self.batch_index)


class CompactedTopicOracle:
    """One topic in a private, temporary store (removed on ``close``)."""

    def __init__(
        self,
        topic: str = "persistent://public/default/compacted",
        compression: str = "NONE",
        retain_null_key: bool = False,
        retained_only: bool = False,
        clock_start_ms: int = 1_700_000_000_000,
    ) -> None:
        self._dir = tempfile.mkdtemp(prefix="pulsarkit-compacted-")
        self.store = Store.open(self._dir)
        domain, rest = topic.split("://", 1)
        tenant, ns, local = rest.split("/", 2)
        self.ml = self.store.managed_ledger(f"{tenant}/{ns}/{domain}/{local}", ManagedLedgerConfig())
        self.compression = compression
        self.retain_null_key = retain_null_key
        self.retained_only = retained_only
        self._t = clock_start_ms
        self._seq = 0
        #: The position of every entry sent, in order.
        self.positions: list[Position] = []

    def _md(self, **kw: Any) -> Any:
        self._t += 1
        md = message_metadata("pulsarkit-oracle", self._seq, self._t, **kw)
        return md

    def send(self, key: str | None, value: bytes) -> Position:
        """One unbatched message (an empty ``value`` is a tombstone)."""
        kw = {"partition_key": key} if key is not None else {}
        p = self.ml.add_entry(encode_entry(self._md(**kw), value, compression=self.compression))
        self._seq += 1
        self.positions.append(p)
        return p

    def send_batch(self, messages: Sequence[tuple[str | None, bytes]]) -> Position:
        """One batch of ``(key, value)`` messages."""
        items = [{"payload": v, **({"key": k} if k is not None else {})} for k, v in messages]
        p = self.ml.add_entry(encode_batch(self._md(), items, compression=self.compression), num_messages=len(items))
        self._seq += len(items)
        self.positions.append(p)
        return p

    def compact(self, event_time_order: bool = False) -> CompactionResult:
        """Both phases of Pulsar's compactor, as the broker runs them."""
        options = CompactionOptions(
            retain_null_key=self.retain_null_key, event_time_order=event_time_order, retained_only=self.retained_only
        )
        return Compactor(self.store, self.ml, options).compact()

    def view(self) -> CompactedTopic:
        return CompactedTopic.open(self.store, self.ml)

    def expected_messages(self) -> list[ExpectedMessage]:
        """What a ``readCompacted`` reader reads from the start, in order."""
        out = []
        for pos, data in self.view().read_entries():
            for m in Entry.parse(data).messages(ciphertext=True):  # encrypted: one message, as CONSUME
                out.append(ExpectedMessage(pos.ledger_id, pos.entry_id, m.batch_index, m.key, bytes(m.payload)))
        return out

    def expected_last_message_id(self) -> tuple[int, int, int] | None:
        """``(ledger, entry, batch index)`` the broker answers a ``readCompacted`` reader's
        ``GetLastMessageId``; None for ``MessageId.earliest`` (nothing to read)."""
        last = self.view().last_message_id()
        return None if last == EARLIEST else (last.ledger_id, last.entry_id, last.batch_index)

    def has_message_available(self, after: tuple[int, int, int] | None = None) -> bool:
        """``hasMessageAvailable`` of a ``readCompacted`` reader whose last message was ``after``
        (None: before the first read)."""
        if after is None:
            return self.view().has_message_available(Position(-1, -1))
        return self.view().has_message_available(Position(after[0], after[1]), after[2])

    def close(self) -> None:
        self.store.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> CompactedTopicOracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["CompactedTopicOracle", "ExpectedMessage"]
