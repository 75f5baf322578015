"""Pulsar's managed ledger (``ManagedLedgerImpl``) over a metadata store and a bookie's ledger storage:

* a managed ledger is a list of BookKeeper ledgers (``ManagedLedgerInfo`` at
  ``/managed-ledgers/<name>``); the last one takes writes. Each data ledger's metadata carries
  Pulsar's custom metadata (``application``, ``component``, ``pulsar/managed-ledger``);
* the current ledger rolls over after an add once it is full (max entries, max size or max age,
  held back by the minimum age); the closed ledger's ``LedgerInfo`` gets entries, size and its
  close time, an empty one is dropped;
* opening recovers the last ledger (fencing it and closing it at its last entry if it was left
  open), drops empty ledgers and starts a new ledger;
* cursors (:mod:`.cursor`) are opened, recovered and deleted through it.

Durability: an add is buffered in the bookie's write cache until :meth:`ManagedLedger.flush` (or the
cache fills, a rollover or close). Metadata updates are synced at once.

Thread-safe: adds, reads, cursor updates and closing are serialised on one lock per managed ledger
(the cursors share it), so concurrent adds get distinct, consecutive positions.
"""

from __future__ import annotations

import bisect
import itertools
import random
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from ..bookkeeper.digest import (
    BookieEntryPacker,
    digest_type_name,
    digest_type_value,
    master_key,
    pack_entry,
    unpack_entry,
)
from ..bookkeeper.ledger_storage import DbLedgerStorage
from ..errors import (
    BadVersionError,
    BookieError,
    CursorNotFoundError,
    InvalidCursorPositionError,
    LedgerNotFoundError,
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
    MetadataStoreError,
)
from ..metadata.store import MetadataStore
from ..proto import LedgerInfo as _PbLedgerInfo
from ..proto import LedgerMetadataFormat, ManagedLedgerInfo
from . import trim
from .config import MB, ManagedLedgerConfig, ledger_custom_metadata
from .cursor import ManagedCursor
from .interceptor import ManagedLedgerInterceptor
from .lock import synchronized
from .position import Position, PositionLike, as_position


def _digest_name(lmd: Any) -> str:
    try:
        return digest_type_name(lmd.digestType)
    except BookieError:
        return "CRC32C"


class LedgerInfo(NamedTuple):
    """One ledger of a managed ledger. ``timestamp`` is its close time in ms (0 while open); for the
    current ledger ``entries`` and ``size`` are the live counts, as Pulsar's internal stats show."""

    ledger_id: int
    entries: int
    size: int
    timestamp: int
    offloaded: bool = False


class _Handle:
    """The ledger being written: id, entries, cumulative length, creation time."""

    __slots__ = ("created", "entries", "ledger_id", "length")

    def __init__(self, ledger_id: int, created: int) -> None:
        self.ledger_id, self.entries, self.length, self.created = ledger_id, 0, 0, created


class ManagedLedger:
    """A managed ledger; get one from :meth:`ManagedLedgerFactory.managed_ledger
    <pulsarkit.managed_ledger.factory.ManagedLedgerFactory.managed_ledger>`.

    It holds only what it uses: the metadata store, the bookie's ledger storage and a clock;
    ``on_close`` tells its owner (the factory) that it closed.
    """

    def __init__(
        self,
        metadata: MetadataStore,
        bookie: DbLedgerStorage,
        name: str,
        config: ManagedLedgerConfig | None = None,
        *,
        clock: Callable[[], int],
        read_only: bool = False,
        on_close: Callable[[ManagedLedger], None] | None = None,
    ) -> None:
        self.name = name
        self.config = config or ManagedLedgerConfig()
        self._md = metadata
        self._bk = bookie
        self._default_clock = clock
        self._clock = self.config.clock or clock
        self._on_close = on_close
        self.read_only = read_only
        #: Serialises every change (and the reads that walk the ledger list); cursors share it.
        self.lock = threading.RLock()
        self._ledgers: dict[int, Any] = {}  # ledger id -> LedgerInfo protobuf
        self._ids: list[int] = []
        self._digests: dict[int, tuple[str, bytes]] = {}
        self._current: _Handle | None = None
        self._cursors: dict[str, ManagedCursor] = {}
        self._properties: dict[str, str] = {}
        self._terminated: Position | None = None
        self._version: int | None = None
        self._state = "opening"
        self.number_of_entries = 0
        self.total_size = 0
        self._max_rollover_ms = int(
            self.config.maximum_rollover_time_ms * (1 + random.random() * self.config.rollover_jitter)
        )
        self._interceptor: ManagedLedgerInterceptor | None = self.config.managed_ledger_interceptor
        self._initialize()

    # ------------------------------------------------------------------------ initialization

    def _initialize(self) -> None:
        r = self._md.managed_ledger_info(self.name)
        if r is None:
            if self.read_only:
                raise ManagedLedgerError(f"managed ledger {self.name!r} does not exist (store opened read-only)")
            stat = self._md.put(f"/managed-ledgers/{self.name}", b"", expected_version=-1)
            info = ManagedLedgerInfo()
        else:
            info, stat = r
        self._version = stat.version
        if info.HasField("terminatedPosition"):
            self._terminated = Position(info.terminatedPosition.ledgerId, info.terminatedPosition.entryId)
        self._properties = {kv.key: kv.value for kv in info.properties}
        if self._interceptor is not None:
            self._interceptor.on_managed_ledger_properties_initialize(self._properties)
        for li in info.ledgerInfo:
            c = _PbLedgerInfo()
            c.CopyFrom(li)
            self._ledgers[li.ledgerId] = c
        self._ids = sorted(self._ledgers)
        if self._ids:
            self._recover_last_ledger(self._ids[-1])
        # initializeBookKeeper: totals, and drop (and delete) empty ledgers
        for lid in list(self._ids):
            li = self._ledgers[lid]
            if li.entries > 0:
                self.number_of_entries += li.entries
                self.total_size += li.size
            else:
                self._remove_ledger(lid)
                if not self.read_only:
                    self._delete_ledger_quietly(lid)
        if self._interceptor is not None:
            last = self._last_existing()
            data = None
            if last is not None:
                try:
                    data = self._read_payload(last)
                except Exception:  # noqa: BLE001 - index recovery is best effort, as in Pulsar
                    data = None
            self._interceptor.on_managed_ledger_last_ledger_initialize(data)
        if self._terminated is not None:
            self._state = "terminated"
        elif self.read_only:
            self._state = "read_only"
        else:
            self._create_ledger()
            self._state = "open"
        for cname in self._md.cursor_names(self.name):
            self._cursors[cname] = ManagedCursor.recover(self, cname)

    def _recover_last_ledger(self, lid: int) -> None:
        """``asyncOpenLedger`` with recovery on the last ledger: its entries and length, fencing and
        closing it if it was left open. Its LedgerInfo timestamp becomes now, as in Pulsar."""
        try:
            lmd, lstat = self._md.ledger_metadata(lid)
        except LedgerNotFoundError:
            self._remove_ledger(lid)
            return
        self._digests[lid] = (_digest_name(lmd), bytes(lmd.password))
        if lmd.state == LedgerMetadataFormat.CLOSED:
            lac, length = lmd.lastEntryId, lmd.length
        else:
            lac, length = -1, 0
            if self._bk.ledger_exists(lid):
                last = self._bk.read_last(lid)
                if last is not None:
                    lac = last[0]
                    digest = self._digests[lid][0]
                    length = unpack_entry(last[1], digest, self._digests[lid][1], verify=False).length
                if not self.read_only:
                    self._bk.fence_ledger(lid)
            if not self.read_only:
                lmd.state = LedgerMetadataFormat.CLOSED
                lmd.lastEntryId = lac
                lmd.length = length
                self._md.put_ledger_metadata(lid, lmd, expected_version=lstat.version)
        li = _PbLedgerInfo(ledgerId=lid, entries=lac + 1, size=length, timestamp=self._clock())
        self._ledgers[lid] = li

    def _remove_ledger(self, lid: int) -> None:
        self._ledgers.pop(lid, None)
        i = bisect.bisect_left(self._ids, lid)
        if i < len(self._ids) and self._ids[i] == lid:
            del self._ids[i]

    def _delete_ledger_quietly(self, lid: int) -> None:
        """``bookKeeper.asyncDeleteLedger``: metadata first, then the bookie; missing parts are fine."""
        try:
            self._md.delete_ledger_metadata(lid)
        except LedgerNotFoundError:
            pass
        if self._bk.ledger_exists(lid):
            self._bk.delete_ledger(lid)

    # ---------------------------------------------------------------------- ledgers / metadata

    def _store_info(self) -> None:
        info = ManagedLedgerInfo()
        for lid in self._ids:
            info.ledgerInfo.add().CopyFrom(self._ledgers[lid])
        if self._terminated is not None:
            info.terminatedPosition.ledgerId = self._terminated.ledger_id
            info.terminatedPosition.entryId = self._terminated.entry_id
        if self._interceptor is not None:
            self._interceptor.on_update_managed_ledger_info(self._properties)
        for k, v in self._properties.items():
            kv = info.properties.add()
            kv.key, kv.value = k, v
        try:
            stat = self._md.put_managed_ledger_info(self.name, info, expected_version=self._version)
        except BadVersionError as e:
            self._state = "fenced"
            raise ManagedLedgerFencedError(f"managed ledger {self.name!r} was changed by another writer: {e}") from None
        self._version = stat.version

    def _create_ledger(self) -> None:
        cfg = self.config
        try:
            digest_value = digest_type_value(cfg.digest_type)
        except BookieError:
            raise ManagedLedgerError(f"unknown digest type {cfg.digest_type!r}") from None
        now = self._clock()
        lid = self._md.generate_ledger_id()
        lmd = LedgerMetadataFormat(
            quorumSize=cfg.write_quorum_size,
            ensembleSize=cfg.ensemble_size,
            ackQuorumSize=cfg.ack_quorum_size,
            length=0,
            state=LedgerMetadataFormat.OPEN,
            digestType=digest_value,
            password=bytes(cfg.password),
            ctime=now,
            cToken=0,
        )
        seg = lmd.segment.add()
        seg.ensembleMember.append(self._bk.bookie_id)
        seg.firstEntryId = 0
        for k, v in ledger_custom_metadata(self.name, cfg.ledger_metadata).items():
            e = lmd.customMetadata.add()
            e.key, e.value = k, v
        self._md.put_ledger_metadata(lid, lmd, expected_version=-1)
        self._bk.create_ledger(lid, master_key(cfg.password))
        self._digests[lid] = (digest_type_name(cfg.digest_type), bytes(cfg.password))
        self._ledgers[lid] = _PbLedgerInfo(ledgerId=lid, timestamp=0)
        bisect.insort(self._ids, lid)
        self._current = _Handle(lid, now)
        self._store_info()

    def _close_current(self, update_info: bool) -> None:
        """Closes the current ledger (metadata CLOSED at its last entry). With ``update_info`` (a
        rollover) its LedgerInfo gets entries, size and close time, or it is dropped if empty."""
        h = self._current
        if h is None:
            return
        self._bk.flush()  # a closed ledger's entries must be durable before its metadata says so
        lmd, lstat = self._md.ledger_metadata(h.ledger_id)
        lmd.state = LedgerMetadataFormat.CLOSED
        lmd.lastEntryId = h.entries - 1
        lmd.length = h.length
        self._md.put_ledger_metadata(h.ledger_id, lmd, expected_version=lstat.version)
        self._current = None
        if update_info:
            if h.entries > 0:
                self._ledgers[h.ledger_id] = _PbLedgerInfo(
                    ledgerId=h.ledger_id, entries=h.entries, size=h.length, timestamp=self._clock()
                )
            else:
                self._remove_ledger(h.ledger_id)
                self._delete_ledger_quietly(h.ledger_id)

    @synchronized
    def delete_ledgers(self, ledger_ids: list[int]) -> None:
        """Retention's delete: out of the managed ledger's list first, then out of BookKeeper. The
        current ledger is refused."""
        self.check_mutable()
        cur = self.current_ledger_id
        for lid in ledger_ids:
            if lid == cur:
                raise ManagedLedgerError(f"ledger {lid} is the current ledger of {self.name!r}")
            li = self._ledgers.get(lid)
            if li is None:
                continue
            self.number_of_entries -= li.entries
            self.total_size -= li.size
            self._remove_ledger(lid)
        self._store_info()
        for lid in ledger_ids:
            self._delete_ledger_quietly(lid)

    @synchronized
    def trim_consumed_ledgers(self, dry_run: bool = False) -> trim.TrimResult:
        """Applies the configured retention now (see :func:`pulsarkit.managed_ledger.trim.trim_ledgers`)."""
        return trim.trim_ledgers(self, dry_run=dry_run)

    def _roll(self) -> None:
        self._close_current(update_info=True)
        self._create_ledger()
        if self.config.trim_on_rollover:
            trim.trim_ledgers(self)

    def current_ledger_is_full(self) -> bool:
        """``currentLedgerIsFull``: space or age reached, and (if set) older than the minimum."""
        h = self._current
        if h is None:
            return False
        return self._is_full(h.entries, h.length, self._clock() - h.created)

    def _is_full(self, entries: int, length: int, age: int) -> bool:
        cfg = self.config
        full = (
            entries >= cfg.max_entries_per_ledger
            or length >= cfg.max_size_per_ledger_mb * MB
            or age >= self._max_rollover_ms
        )
        if full and cfg.minimum_rollover_time_ms > 0:
            return age > cfg.minimum_rollover_time_ms
        return full

    @synchronized
    def roll_current_ledger_if_full(self) -> bool:
        """``rollCurrentLedgerIfFull`` (the broker's periodic check): rolls a non-empty full ledger."""
        self._check_writable()
        if self._current is not None and self._current.entries > 0 and self.current_ledger_is_full():
            self._roll()
            return True
        return False

    # ------------------------------------------------------------------------------- writing

    def check_open(self) -> None:
        """Raises unless the managed ledger is usable (not closed, not fenced)."""
        if self._state == "closed":
            raise ManagedLedgerClosedError(f"managed ledger {self.name!r} is closed")
        if self._state == "fenced":
            raise ManagedLedgerFencedError(f"managed ledger {self.name!r} is fenced")

    def _check_writable(self) -> None:
        self.check_open()
        if self._state == "read_only":
            raise ManagedLedgerClosedError(f"managed ledger {self.name!r} was opened read-only")
        if self._state == "terminated":
            raise ManagedLedgerTerminatedError(f"managed ledger {self.name!r} is terminated at {self._terminated}")

    def add_entry(self, data: bytes | bytearray | memoryview, num_messages: int = 1) -> Position:
        """Appends one entry (a Pulsar entry: one message or one batch); returns its position."""
        with self.lock:  # inline, not @synchronized: the hot path, one call frame less
            self._check_writable()
            h = self._current
            assert h is not None
            payload = bytes(data)
            if self._interceptor is not None:
                payload = self._interceptor.before_add_entry(payload, num_messages)
            eid = h.entries
            length = h.length + len(payload)
            digest, password = self._digests[h.ledger_id]
            self._bk.add_entry(
                pack_entry(
                    h.ledger_id,
                    eid,
                    payload,
                    last_add_confirmed=eid - 1,
                    length=length,
                    digest_type=digest,
                    password=password,
                )
            )
            h.entries += 1
            h.length = length
            self.number_of_entries += 1
            self.total_size += len(payload)
            pos = Position(h.ledger_id, eid)
            if self.current_ledger_is_full():
                self._roll()
            return pos

    def add_entries(
        self, entries: Sequence[bytes | bytearray | memoryview], num_messages: int | Sequence[int] = 1
    ) -> list[Position]:
        """Appends entries in order, exactly as that many :meth:`add_entry` calls would (the same
        positions, bytes and ledger rollovers; the clock is read once per ledger run), but packs and
        caches each run of entries that fits the current ledger in one native call: the path for a
        bulk import. ``num_messages`` is one count for all or one per entry. Returns the positions.

        Unlike a loop of :meth:`add_entry`, the interceptor sees every entry before any is written,
        so if it refuses one, none is added (its index may have moved, as after a failed add in
        Pulsar); the storage checks each ledger's run of entries before adding any of that run."""
        n = len(entries)
        counts = [num_messages] * n if isinstance(num_messages, int) else list(num_messages)
        if len(counts) != n:
            raise ManagedLedgerError(f"num_messages has {len(counts)} counts for {n} entries")
        out: list[Position] = []
        with self.lock:
            self._check_writable()
            if self._interceptor is not None:
                before = self._interceptor.before_add_entry
                payloads = [before(bytes(e), c) for e, c in zip(entries, counts)]
            else:
                payloads = [bytes(e) for e in entries]
            cum = list(itertools.accumulate(map(len, payloads), initial=0))
            i = 0
            while i < n:
                h = self._current
                assert h is not None
                age = self._clock() - h.created
                j = self._run_end(h, i, n, cum, age)
                count, length = h.entries + (j - i), h.length + cum[j] - cum[i]
                digest, password = self._digests[h.ledger_id]
                packer = BookieEntryPacker(
                    h.ledger_id,
                    digest,
                    password,
                    next_entry_id=h.entries,
                    last_add_confirmed=h.entries - 1,
                    length=h.length,
                )
                self._bk.add_entries(packer.pack_many(payloads[i:j]))
                # tuple.__new__ skips NamedTuple's Python-level __new__: no Python frame per entry
                ids = zip(itertools.repeat(h.ledger_id), range(h.entries, count))
                out.extend(map(tuple.__new__, itertools.repeat(Position), ids))
                self.number_of_entries += count - h.entries
                self.total_size += length - h.length
                h.entries, h.length = count, length
                i = j
                if self._is_full(count, length, age):
                    self._roll()
        return out

    def _run_end(self, h: Any, i: int, n: int, cum: list[int], age: int) -> int:
        """Where the run of entries ``[i, end)`` for ledger ``h`` ends: at the entry after which
        :meth:`_is_full` first holds (by count, size or the ledger's ``age``), else at ``n``.
        ``cum`` holds the cumulative payload sizes."""
        cfg = self.config
        if cfg.minimum_rollover_time_ms > 0 and age <= cfg.minimum_rollover_time_ms:
            return n  # younger than the minimum: never full during this call
        if age >= self._max_rollover_ms:
            return i + 1  # the first add finds it full
        by_count = i + max(1, cfg.max_entries_per_ledger - h.entries)
        # the first j with h.length + cum[j] - cum[i] >= the size limit
        by_size = bisect.bisect_left(cum, cfg.max_size_per_ledger_mb * MB - h.length + cum[i], lo=i + 1)
        return min(n, by_count, by_size)

    @synchronized
    def flush(self) -> None:
        """Makes every added entry durable (a bookie checkpoint)."""
        self.check_open()
        if not self.read_only:
            self._bk.flush()

    @synchronized
    def terminate(self) -> Position:
        """Terminates the managed ledger at its last entry; further adds fail."""
        self._check_writable()
        self._close_current(update_info=True)
        self._terminated = self.last_confirmed_entry
        self._store_info()
        self._state = "terminated"
        return self._terminated

    @synchronized
    def close(self) -> None:
        """Persists cursors, closes the current ledger's metadata (its LedgerInfo is completed at
        the next open, as in Pulsar) and flushes the bookie."""
        if self._state == "closed":
            return
        try:
            if not self.read_only and self._state in ("open", "terminated"):
                for c in self._cursors.values():
                    c.persist()
                self._close_current(update_info=False)
                self._bk.flush()
        finally:
            self._state = "closed"
            if self._on_close is not None:
                self._on_close(self)

    def check_mutable(self) -> None:
        """Metadata changes (cursors, retention, deletion) are allowed on a terminated ledger too."""
        self.check_open()
        if self.read_only:
            raise ManagedLedgerClosedError(f"managed ledger {self.name!r} was opened read-only")

    @synchronized
    def set_config(self, config: ManagedLedgerConfig) -> None:
        """``ManagedLedger.setConfig``: new rollover and retention settings take effect at once."""
        self.config = config
        self._clock = config.clock or self._default_clock
        self._max_rollover_ms = int(config.maximum_rollover_time_ms * (1 + random.random() * config.rollover_jitter))

    @synchronized
    def delete(self) -> None:
        """Deletes the managed ledger: its cursors, all its ledgers and its metadata node."""
        self.check_mutable()
        for name in list(self._cursors):
            self.delete_cursor(name)
        self._current = None
        for lid in list(self._ids):
            self._delete_ledger_quietly(lid)
        self._ledgers.clear()
        self._ids.clear()
        self._md.delete(f"/managed-ledgers/{self.name}")
        self._state = "closed"
        if self._on_close is not None:
            self._on_close(self)

    def __enter__(self) -> ManagedLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------------------- positions

    def _count(self, lid: int) -> int:
        h = self._current
        if h is not None and h.ledger_id == lid:
            return h.entries
        li = self._ledgers.get(lid)
        return 0 if li is None else li.entries

    def _first_at_or_after(self, p: Position) -> Position | None:
        i = bisect.bisect_left(self._ids, p.ledger_id)
        for lid in self._ids[i:]:
            n = self._count(lid)
            e = max(p.entry_id, 0) if lid == p.ledger_id else 0
            if e < n:
                return Position(lid, e)
        return None

    def _last_existing(self) -> Position | None:
        for lid in reversed(self._ids):
            n = self._count(lid)
            if n > 0:
                return Position(lid, n - 1)
        return None

    @property
    def last_confirmed_entry(self) -> Position:
        """The last entry added (``(ledger, -1)`` of the first ledger when there is none)."""
        last = self._last_existing()
        if last is not None:
            return last
        if self._current is not None:
            return Position(self._current.ledger_id, -1)
        return Position(self._ids[0], -1) if self._ids else Position(-1, -1)

    @property
    def first_position(self) -> Position | None:
        """The oldest readable entry, or None when the managed ledger holds none."""
        return self._first_at_or_after(Position(-1, -1))

    def previous_position(self, p: Position) -> Position:
        """``getPreviousPosition``: the entry before ``p``, across ledgers."""
        p = as_position(p)
        if p.entry_id > 0:
            return Position(p.ledger_id, p.entry_id - 1)
        i = bisect.bisect_left(self._ids, p.ledger_id)
        if i == 0:
            return Position(p.ledger_id, -1)
        for lid in reversed(self._ids[:i]):
            n = self._count(lid)
            if n > 0:
                return Position(lid, n - 1)
        return Position(self._ids[0], -1)

    def next_valid_position(self, p: Position) -> Position:
        """``getNextValidPosition``: the first entry after ``p``, or the next write position."""
        nxt = self._first_at_or_after(as_position(p).next())
        if nxt is not None:
            return nxt
        if self._current is not None:
            return Position(self._current.ledger_id, self._current.entries)
        return self.last_confirmed_entry.next()

    def count_entries(self, lo_exclusive: Position, hi_inclusive: Position) -> int:
        """Entries in the open-closed range ``(lo, hi]`` (``getNumberOfEntries(Range.openClosed)``)."""
        lo, hi = as_position(lo_exclusive), as_position(hi_inclusive)
        total = 0
        for lid in self._ids:
            if lid < lo.ledger_id or lid > hi.ledger_id:
                continue
            n = self._count(lid)
            first = lo.entry_id + 1 if lid == lo.ledger_id else 0
            last = min(hi.entry_id, n - 1) if lid == hi.ledger_id else n - 1
            if last >= first:
                total += last - first + 1
        return total

    def is_valid_position(self, p: Position) -> bool:
        p = as_position(p)
        return p.entry_id >= 0 and p.entry_id < self._count(p.ledger_id) and p.ledger_id in self._ledgers

    # ------------------------------------------------------------------------------- reading

    def _digest_of(self, lid: int) -> tuple[str, bytes]:
        d = self._digests.get(lid)
        if d is None:
            lmd, _ = self._md.ledger_metadata(lid)
            d = self._digests[lid] = (_digest_name(lmd), bytes(lmd.password))
        return d

    def _read_payload(self, p: Position) -> bytes:
        digest, password = self._digest_of(p.ledger_id)
        stored = self._bk.read_entry(p.ledger_id, p.entry_id)
        return unpack_entry(
            stored,
            digest,
            password,
            verify=self.config.verify_digest,
            ledger_id=p.ledger_id,
            entry_id=p.entry_id,
        ).payload

    @synchronized
    def read_entry(self, position: PositionLike) -> bytes:
        """The Pulsar entry bytes at ``position``."""
        self.check_open()
        p = as_position(position)
        if not self.is_valid_position(p):
            raise InvalidCursorPositionError(f"{self.name}: no entry at {p}")
        return self._read_payload(p)

    @synchronized
    def read(self, start: PositionLike, max_entries: int) -> list[tuple[Position, bytes]]:
        """Up to ``max_entries`` entries from ``start`` on (inclusive; positions past the end of a
        ledger continue in the next one)."""
        self.check_open()
        out: list[tuple[Position, bytes]] = []
        p = self._first_at_or_after(as_position(start))
        while p is not None and len(out) < max_entries:
            out.append((p, self._read_payload(p)))
            p = self._first_at_or_after(p.next())
        return out

    def read_after(self, position: PositionLike) -> Iterator[tuple[Position, bytes]]:
        """Every entry after ``position``, lazily."""
        p = self._first_at_or_after(as_position(position).next())
        while p is not None:
            yield p, self._read_payload(p)
            p = self._first_at_or_after(p.next())

    # ------------------------------------------------------------------------------ metadata

    @synchronized
    def ledgers(self) -> list[LedgerInfo]:
        """The managed ledger's ledgers, oldest first."""
        out = []
        for lid in self._ids:
            li = self._ledgers[lid]
            h = self._current
            if h is not None and h.ledger_id == lid:
                out.append(LedgerInfo(lid, h.entries, h.length, 0))
            else:
                out.append(
                    LedgerInfo(
                        lid,
                        li.entries,
                        li.size,
                        li.timestamp,
                        li.HasField("offloadContext") and li.offloadContext.complete,
                    )
                )
        return out

    def now(self) -> int:
        """The managed ledger's clock, in ms."""
        return self._clock()

    def ledger_metadata(self, ledger_id: int) -> Any:
        """BookKeeper's ``LedgerMetadataFormat`` of one of the ledgers (:class:`LedgerNotFoundError`)."""
        return self._md.ledger_metadata(ledger_id)[0]

    @property
    def interceptor(self) -> ManagedLedgerInterceptor | None:
        """The interceptor called around adds (from the config, or installed by the broker)."""
        return self._interceptor

    @interceptor.setter
    def interceptor(self, interceptor: ManagedLedgerInterceptor | None) -> None:
        # The broker installs its interceptor on an open managed ledger and recovers it itself.
        self._interceptor = interceptor

    @property
    def current_ledger_id(self) -> int | None:
        return None if self._current is None else self._current.ledger_id

    @property
    def properties(self) -> dict[str, str]:
        return dict(self._properties)

    @synchronized
    def set_properties(self, properties: Mapping[str, str]) -> None:
        """Replaces the managed ledger's properties (``ManagedLedgerInfo.properties``)."""
        self._check_writable()
        self._properties = {str(k): str(v) for k, v in properties.items()}
        self._store_info()

    @property
    def terminated_position(self) -> Position | None:
        return self._terminated

    @property
    def state(self) -> str:
        return self._state

    def __repr__(self) -> str:
        return (
            f"ManagedLedger({self.name!r}, ledgers={self._ids}, entries={self.number_of_entries}, state={self._state})"
        )

    # ------------------------------------------------------------------------------- cursors

    @synchronized
    def open_cursor(self, name: str, initial_position: str = "latest") -> ManagedCursor:
        """Opens (or creates) a durable cursor. A new cursor starts at the end (``"latest"``, the
        default, as Pulsar's) or before the first entry (``"earliest"``)."""
        self.check_open()
        c = self._cursors.get(name)
        if c is not None:
            return c
        if self.read_only:
            raise ManagedLedgerClosedError(f"cannot create cursor {name!r}: managed ledger opened read-only")
        if initial_position not in ("latest", "earliest"):
            raise ManagedLedgerError(f"initial_position must be 'latest' or 'earliest', not {initial_position!r}")
        if initial_position == "latest":
            md = self.last_confirmed_entry
        else:
            first = self._ids[0] if self._ids else (self._current.ledger_id if self._current else -1)
            md = Position(first, -1)
        c = ManagedCursor(self, name, md)
        c.persist(create=True)
        self._cursors[name] = c
        return c

    @synchronized
    def delete_cursor(self, name: str) -> None:
        self.check_mutable()
        c = self._cursors.pop(name, None)
        if c is None:
            raise CursorNotFoundError(f"cursor {name!r} not found on {self.name!r}")
        try:
            self._md.delete_cursor_info(self.name, name)
        except MetadataStoreError:
            pass
        c.mark_deleted()

    def cursors(self) -> list[ManagedCursor]:
        return list(self._cursors.values())

    def cursor(self, name: str) -> ManagedCursor:
        c = self._cursors.get(name)
        if c is None:
            raise CursorNotFoundError(f"cursor {name!r} not found on {self.name!r}")
        return c

    @property
    def slowest_reader_position(self) -> Position | None:
        """The lowest mark-delete position among the durable cursors."""
        return min((c.mark_delete_position for c in self._cursors.values()), default=None)


__all__ = ["LedgerInfo", "ManagedLedger"]
