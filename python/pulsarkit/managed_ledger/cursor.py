"""Pulsar's durable cursor (``ManagedCursorImpl``): a subscription's position in a managed ledger.

A cursor keeps a mark-delete position, ``LongProperty`` properties stored with it, individually
deleted ranges (open-closed position ranges) and batch-index ack sets (``java.util.BitSet`` words, a
set bit = a message still to acknowledge); its state is stored as ``ManagedCursorInfo`` at
``/managed-ledgers/<name>/<cursor>`` with ``cursorsLedgerId = -1`` (the snapshot form Pulsar reads
back). Cursors written by Pulsar into cursor ledgers are recovered from the ledger's last
``PositionInfo`` entry. The cursor works hand in hand with its :class:`ManagedLedger` (as in Pulsar,
where both live in one package) and uses its package-internal members.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..bookkeeper.digest import unpack_entry
from ..errors import (
    BadVersionError,
    CursorNotFoundError,
    InvalidCursorPositionError,
    ManagedLedgerClosedError,
    ManagedLedgerFencedError,
)
from ..proto import ManagedCursorInfo, PositionInfo
from .ack_set import ack_set_for, bitset_from_words, bitset_words, lowest_bit
from .lock import synchronized
from .position import Position, PositionLike, PositionRangeSet, as_position

if TYPE_CHECKING:
    from .ledger import ManagedLedger


class ManagedCursor:
    """A durable cursor (a subscription's position); get one from :meth:`ManagedLedger.open_cursor`."""

    def __init__(self, ml: ManagedLedger, name: str, mark_delete: Position) -> None:
        self.ml = ml
        self.name = name
        self._md = mark_delete
        self._read_position = ml.next_valid_position(mark_delete)
        self._ranges = PositionRangeSet()
        self._batch: dict[Position, int] = {}
        self._properties: dict[str, int] = {}
        self._cursor_properties: dict[str, str] = {}
        self._version: int | None = None
        self._cursor_ledger = -1
        self._deleted = False
        self.last_active = ml.now()

    # --------------------------------------------------------------------- persistence

    @classmethod
    def recover(cls, ml: ManagedLedger, name: str) -> ManagedCursor:
        """The cursor as stored: its ``ManagedCursorInfo``, or the last ``PositionInfo`` of its cursor ledger."""
        r = ml._md.cursor_info(ml.name, name)
        if r is None:
            raise CursorNotFoundError(f"cursor {name!r} has no metadata")
        info, stat = r
        c = cls.__new__(cls)
        c.ml, c.name, c._version, c._deleted = ml, name, stat.version, False
        c._cursor_ledger = info.cursorsLedgerId
        c.last_active = info.lastActive
        c._cursor_properties = {p.name: p.value for p in info.cursorProperties}
        state: Any = info
        md = Position(info.markDeleteLedgerId, info.markDeleteEntryId)
        if info.cursorsLedgerId != -1:
            pi = c._read_cursor_ledger(info.cursorsLedgerId)
            if pi is not None:
                state, md = pi, Position(pi.ledgerId, pi.entryId)
        # recoveredCursor: a mark-delete in a ledger that is gone moves to the next ledger, one past
        # the last entry is clamped to it (entries lost in a crash before they were flushed)
        if md.entry_id == -1 and md.ledger_id not in ml._ledgers:
            i = bisect.bisect_right(ml._ids, md.ledger_id)
            if i < len(ml._ids):
                md = Position(ml._ids[i], -1)
        md = min(md, ml.last_confirmed_entry)
        c._md = md
        c._properties = {p.name: p.value for p in state.properties}
        c._ranges = PositionRangeSet()
        for rg in state.individualDeletedMessages:
            c._ranges.add(
                Position(rg.lowerEndpoint.ledgerId, rg.lowerEndpoint.entryId),
                Position(rg.upperEndpoint.ledgerId, rg.upperEndpoint.entryId),
            )
        for llm in getattr(state, "individualDeletedMessageRanges", ()):
            bits = bitset_from_words(llm.values)
            e = 0
            while bits:
                if bits & 1:
                    c._ranges.add(ml.previous_position(Position(llm.key, e)), Position(llm.key, e))
                bits >>= 1
                e += 1
        c._batch = {
            Position(b.position.ledgerId, b.position.entryId): bitset_from_words(b.deleteSet)
            for b in state.batchedEntryDeletionIndexInfo
        }
        c._read_position = ml.next_valid_position(md)
        return c

    def _read_cursor_ledger(self, lid: int) -> Any:
        """The last ``PositionInfo`` a Pulsar broker wrote into this cursor's ledger, if readable."""
        bk = self.ml._bk
        try:
            if not bk.ledger_exists(lid):
                return None
            last = bk.read_last(lid)
            if last is None:
                return None
            digest, password = self.ml._digest_of(lid)
            payload = unpack_entry(last[1], digest, password, verify=True).payload
            pi = PositionInfo()
            pi.ParseFromString(payload)
            return pi if pi.IsInitialized() else None
        except Exception:  # noqa: BLE001 - fall back to the metadata snapshot, as Pulsar does
            return None

    def mark_deleted(self) -> None:
        """The managed ledger deleted this cursor: its ledger goes, and every later call fails."""
        self._drop_cursor_ledger()
        self._deleted = True

    def _drop_cursor_ledger(self) -> None:
        if self._cursor_ledger != -1 and not self.ml.read_only:
            self.ml._delete_ledger_quietly(self._cursor_ledger)
            self._cursor_ledger = -1

    def _info(self) -> Any:
        info = ManagedCursorInfo(
            cursorsLedgerId=-1,
            markDeleteLedgerId=self._md.ledger_id,
            markDeleteEntryId=self._md.entry_id,
            lastActive=self.last_active,
        )
        for lo, hi in self._ranges:
            rg = info.individualDeletedMessages.add()
            rg.lowerEndpoint.ledgerId, rg.lowerEndpoint.entryId = lo
            rg.upperEndpoint.ledgerId, rg.upperEndpoint.entryId = hi
        for k, v in self._properties.items():
            p = info.properties.add()
            p.name, p.value = k, v
        if self.ml.config.deletion_at_batch_index_level_enabled:
            for pos in sorted(self._batch):
                b = info.batchedEntryDeletionIndexInfo.add()
                b.position.ledgerId, b.position.entryId = pos
                b.deleteSet.extend(bitset_words(self._batch[pos]))
        for k, text in self._cursor_properties.items():
            p = info.cursorProperties.add()
            p.name, p.value = k, text
        return info

    @synchronized
    def persist(self, create: bool = False) -> None:
        """Stores the cursor's state as a ``ManagedCursorInfo`` snapshot."""
        if self.ml.read_only or self._deleted:
            return
        self.last_active = self.ml.now()
        try:
            stat = self.ml._md.put_cursor_info(
                self.ml.name, self.name, self._info(), expected_version=-1 if create else self._version
            )
        except BadVersionError as e:
            raise ManagedLedgerFencedError(f"cursor {self.name!r} was changed by another writer: {e}") from None
        self._version = stat.version
        self._drop_cursor_ledger()  # the snapshot now supersedes a broker-written cursor ledger

    def _check(self) -> None:
        if self._deleted:
            raise CursorNotFoundError(f"cursor {self.name!r} was deleted")
        self.ml.check_open()
        if self.ml.read_only:
            raise ManagedLedgerClosedError(f"cursor {self.name!r}: managed ledger opened read-only")

    # ----------------------------------------------------------------------------- state

    @property
    def mark_delete_position(self) -> Position:
        return self._md

    @property
    def read_position(self) -> Position:
        return self._read_position

    @property
    def properties(self) -> dict[str, int]:
        """Properties stored with the mark-delete position (``LongProperty``)."""
        return dict(self._properties)

    @property
    def cursor_properties(self) -> dict[str, str]:
        """The cursor's own string properties (``StringProperty``)."""
        return dict(self._cursor_properties)

    @synchronized
    def set_cursor_properties(self, properties: Mapping[str, str]) -> None:
        self._check()
        self._cursor_properties = {str(k): str(v) for k, v in properties.items()}
        self.persist()

    @property
    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        """Individually deleted entries as open-closed ``(lo, hi]`` ranges."""
        return list(self._ranges)

    def deleted_batch_indexes(self, position: PositionLike) -> list[int] | None:
        """``getDeletedBatchIndexesAsLongArray``: the ack-set words kept for a partly acknowledged
        batch (set bit = not yet acknowledged), or None."""
        bits = self._batch.get(as_position(position))
        return None if bits is None else bitset_words(bits)

    def is_deleted(self, position: PositionLike) -> bool:
        p = as_position(position)
        return p <= self._md or self._ranges.contains(p)

    @property
    def number_of_entries_in_backlog(self) -> int:
        """Entries after the mark-delete position not individually deleted."""
        return self.backlog_after(self._md)

    def has_more_entries(self) -> bool:
        return self.ml._first_at_or_after(self._read_position) is not None

    # ---------------------------------------------------------------------------- reading

    @synchronized
    def read(self, n: int) -> list[tuple[Position, bytes]]:
        """Up to ``n`` entries from the read position on, skipping deleted ones; advances it."""
        if self._deleted:
            raise CursorNotFoundError(f"cursor {self.name!r} was deleted")
        self.ml.check_open()
        out: list[tuple[Position, bytes]] = []
        p = self.ml._first_at_or_after(self._read_position)
        while p is not None and len(out) < n:
            if not self.is_deleted(p):
                out.append((p, self.ml._read_payload(p)))
            self._read_position = self.ml.next_valid_position(p)
            p = self.ml._first_at_or_after(p.next())
        return out

    def seek(self, position: PositionLike) -> None:
        """Moves the read position only."""
        self._read_position = as_position(position)

    def rewind(self) -> None:
        """Read again from the first entry after the mark-delete position."""
        self._read_position = self.ml.next_valid_position(self._md)

    # ------------------------------------------------------------------------ acknowledging

    def acknowledged_position(self, position: PositionLike) -> Position:
        """Where the mark-delete would end up after a cumulative ack of ``position``: individually
        deleted entries that follow it are absorbed. Changes nothing (maintenance plans use it)."""
        new_md = as_position(position)
        ml = self.ml
        lac = ml.last_confirmed_entry
        nxt = ml.next_valid_position(new_md)
        while nxt <= lac:
            r = self._ranges.range_containing(nxt)
            if r is None:
                break
            new_md = r[1]
            nxt = ml.next_valid_position(new_md)
        return new_md

    def backlog_after(self, mark_delete: PositionLike) -> int:
        """``number_of_entries_in_backlog`` if the mark-delete were at ``mark_delete`` (not before the current one)."""
        md = max(as_position(mark_delete), self._md)
        n = self.ml.count_entries(md, self.ml.last_confirmed_entry)
        for lo, hi in self._ranges:
            if hi > md:
                n -= self.ml.count_entries(max(lo, md), hi)
        return n

    def _set_acknowledged(self, new_md: Position) -> None:
        """``setAcknowledgedPosition``: moves the mark-delete, absorbing individually deleted
        entries that follow it, and drops state at or below it."""
        if new_md < self._md:
            raise InvalidCursorPositionError(
                f"mark deleting an already mark-deleted position: current {self._md}, attempted {new_md}"
            )
        new_md = self.acknowledged_position(new_md)
        ml = self.ml
        self._md = new_md
        self._ranges.remove_at_most(new_md)
        for p in [p for p in self._batch if p <= new_md]:
            del self._batch[p]
        if self._read_position <= new_md:
            self._read_position = ml.next_valid_position(new_md)

    @synchronized
    def mark_delete(
        self, position: PositionLike, properties: Mapping[str, int] | None = None, ack_set: Iterable[int] | None = None
    ) -> None:
        """Cumulative acknowledgement up to ``position`` (inclusive). ``properties`` are stored with
        it and replace the previous ones (None clears them, as ``markDelete(position)`` does).
        With ``ack_set`` (batch-index words) only those batch indexes of ``position`` are acknowledged."""
        self._check()
        p = as_position(position)
        ml = self.ml
        if p > ml.last_confirmed_entry:
            raise InvalidCursorPositionError(
                f"mark-delete position {p} is after the last entry {ml.last_confirmed_entry}"
            )
        if ack_set is not None:
            if ml.config.deletion_at_batch_index_level_enabled:
                given = bitset_from_words(ack_set)
                old = self._batch.get(p)
                # only move forward: keep the recorded set unless the new one starts later
                if old is None or lowest_bit(given) > lowest_bit(old):
                    self._batch[p] = given
            p = ml.previous_position(p)
        self._set_acknowledged(p)
        self._properties = {str(k): int(v) for k, v in (properties or {}).items()}
        self.persist()

    @synchronized
    def delete(self, positions: PositionLike | Iterable[PositionLike], ack_set: Iterable[int] | None = None) -> None:
        """Individual acknowledgement of one position or a list of them. With ``ack_set`` (batch
        words, a set bit = still to acknowledge) the batch indexes cleared in it are acknowledged;
        the entry counts as deleted once no bit is left."""
        self._check()
        ml = self.ml
        plist = (
            [positions]
            if isinstance(positions, Position)
            or (isinstance(positions, tuple) and len(positions) == 2 and isinstance(positions[0], int))
            else list(positions)
        )
        lac = ml.last_confirmed_entry
        for raw in plist:
            p = as_position(raw)
            if p > lac or p.entry_id < 0:
                raise InvalidCursorPositionError(f"cannot delete {p}: last entry is {lac}")
            if self.is_deleted(p):
                continue
            if ack_set is None:
                self._batch.pop(p, None)
                self._ranges.add(ml.previous_position(p), p)
            elif ml.config.deletion_at_batch_index_level_enabled:
                given = bitset_from_words(ack_set)
                bits = self._batch.get(p)
                bits = given if bits is None else bits & given
                if bits == 0:
                    self._batch.pop(p, None)
                    self._ranges.add(ml.previous_position(p), p)
                else:
                    self._batch[p] = bits
        if self._ranges:
            lo, hi = self._ranges.ranges[0]
            if lo <= self._md or ml.count_entries(self._md, lo) == 0:
                self._set_acknowledged(hi)
        self.persist()

    def delete_batch_index(self, position: PositionLike, batch_index: int, batch_size: int) -> None:
        """Acknowledges one message of a batch entry."""
        self.delete(as_position(position), ack_set=ack_set_for(batch_size, [batch_index]))

    @synchronized
    def reset(self, position: PositionLike) -> None:
        """``resetCursor``: the next read is ``position``; the mark-delete moves just before it and
        individual and batch-index acks are forgotten."""
        self._check()
        p = as_position(position)
        ml = self.ml
        write_pos = ml.next_valid_position(ml.last_confirmed_entry)
        if not (ml.is_valid_position(p) or p == write_pos):
            raise InvalidCursorPositionError(f"cannot reset {self.name!r} to {p}: no such entry on {ml.name!r}")
        self._md = ml.previous_position(p)
        self._ranges.clear()
        self._batch.clear()
        self._read_position = p
        self.persist()

    def __repr__(self) -> str:
        return f"ManagedCursor({self.ml.name!r}/{self.name!r}, mark_delete={self._md}, read={self._read_position})"


__all__ = ["ManagedCursor"]
