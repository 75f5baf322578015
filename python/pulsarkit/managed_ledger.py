"""Pulsar's managed ledger and durable cursors over the embedded metadata store and bookie.

Semantics follow ``ManagedLedgerImpl`` / ``ManagedCursorImpl``:

* a managed ledger is a list of BookKeeper ledgers (``ManagedLedgerInfo`` at
  ``/managed-ledgers/<name>``); the last one takes writes. Each data ledger's metadata carries
  Pulsar's custom metadata (``application``, ``component``, ``pulsar/managed-ledger``);
* the current ledger rolls over after an add once it is full (max entries, max size or max age,
  held back by the minimum age); the closed ledger's ``LedgerInfo`` gets entries, size and its
  close time, an empty one is dropped;
* opening recovers the last ledger (fencing it and closing it at its last entry if it was left
  open), drops empty ledgers and starts a new ledger;
* a cursor keeps a mark-delete position, ``LongProperty`` properties stored with it, individually
  deleted ranges (open-closed position ranges) and batch-index ack sets (``java.util.BitSet`` words,
  a set bit = a message still to acknowledge); its state is stored as ``ManagedCursorInfo`` at
  ``/managed-ledgers/<name>/<cursor>`` with ``cursorsLedgerId = -1`` (the snapshot form Pulsar reads
  back). Cursors written by Pulsar into cursor ledgers are recovered from the ledger's last
  ``PositionInfo`` entry.

Durability: an add is buffered in the bookie's write cache until :meth:`ManagedLedger.flush` (or the
cache fills, a rollover or close). Metadata updates are synced at once.

Not thread-safe: use one managed ledger from one thread at a time.
"""

from __future__ import annotations

import bisect
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from .bookie import master_key, pack_entry, unpack_entry
from .errors import (
    BadVersionError,
    CursorNotFoundError,
    InvalidCursorPositionError,
    LedgerNotFoundError,
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
    MetadataStoreError,
)
from .proto import (
    LedgerInfo as _PbLedgerInfo,
)
from .proto import (
    LedgerMetadataFormat,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    PositionInfo,
)

if TYPE_CHECKING:
    from .store import Store

MB = 1024 * 1024
_DIGEST_NAMES = {1: "CRC32", 2: "MAC", 3: "CRC32C", 4: "DUMMY"}
_DIGEST_VALUES = {"CRC32": 1, "MAC": 2, "HMAC": 2, "CRC32C": 3, "DUMMY": 4}
_LONG_MAX = 2**63 - 1
_MASK64 = (1 << 64) - 1


class Position(NamedTuple):
    """A managed-ledger position ``(ledger_id, entry_id)``, ordered like ``PositionImpl``."""

    ledger_id: int
    entry_id: int

    def next(self) -> Position:
        return Position(self.ledger_id, self.entry_id + 1)

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


Position.EARLIEST = Position(-1, -1)  # type: ignore[attr-defined]
Position.LATEST = Position(_LONG_MAX, _LONG_MAX)  # type: ignore[attr-defined]


def _pos(p: Any) -> Position:
    if isinstance(p, Position):
        return p
    try:
        lid, eid = p
        return Position(int(lid), int(eid))
    except (TypeError, ValueError):
        raise InvalidCursorPositionError(f"not a position: {p!r}") from None


class LedgerInfo(NamedTuple):
    """One ledger of a managed ledger. ``timestamp`` is its close time in ms (0 while open); for the
    current ledger ``entries`` and ``size`` are the live counts, as Pulsar's internal stats show."""

    ledger_id: int
    entries: int
    size: int
    timestamp: int
    offloaded: bool = False


@dataclass
class ManagedLedgerConfig:
    """Managed-ledger settings. Defaults are the broker's (``managedLedger*`` in broker.conf)."""

    max_entries_per_ledger: int = 50_000
    max_size_per_ledger_mb: int = 2048
    #: A full ledger rolls only once it is older than this (``managedLedgerMinLedgerRolloverTimeMinutes``).
    minimum_rollover_time_ms: int = 10 * 60_000
    #: Rolls a ledger this old (``managedLedgerMaxLedgerRolloverTimeMinutes``), plus up to 5 % jitter.
    maximum_rollover_time_ms: int = 240 * 60_000
    #: Retention (``defaultRetentionTimeInMinutes``/``defaultRetentionSizeInMB``): -1 = unlimited,
    #: 0 = delete consumed ledgers at once. Applied by :mod:`pulsarkit.lifecycle` and, when
    #: ``trim_on_rollover`` is set, after each rollover as the broker does.
    retention_time_ms: int = 0
    retention_size_mb: int = 0
    trim_on_rollover: bool = False
    ensemble_size: int = 1
    write_quorum_size: int = 1
    ack_quorum_size: int = 1
    digest_type: str = "CRC32C"
    password: bytes = b""
    deletion_at_batch_index_level_enabled: bool = True
    #: Broker entry metadata interceptors (PIP-70): class names as in ``brokerEntryMetadataInterceptors``
    #: or instances from :mod:`pulsarkit.interceptors`.
    broker_entry_metadata_interceptors: tuple[Any, ...] = ()
    #: Extra ledger custom metadata (bytes values), merged over Pulsar's base map.
    ledger_metadata: Mapping[str, bytes] = field(default_factory=dict)
    #: Verify bookie digests on read.
    verify_digest: bool = True
    #: Clock in ms; defaults to the store's.
    clock: Callable[[], int] | None = None
    #: 0..1 fraction of jitter added to ``maximum_rollover_time_ms`` (Pulsar: up to 5 %).
    rollover_jitter: float = 0.05


def ledger_custom_metadata(ml_name: str, extra: Mapping[str, bytes] | None = None) -> dict[str, bytes]:
    """``LedgerMetadataUtils.buildBaseManagedLedgerMetadata``: what every data ledger carries."""
    md = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": ml_name.encode()}
    md.update({k: bytes(v) for k, v in (extra or {}).items()})
    return md


def ack_set_for(batch_size: int, acked_indexes: Iterable[int] = ()) -> list[int]:
    """A batch-index ack set: bits ``[0, batch_size)`` set except the acknowledged indexes, as the
    ``long[]`` words of a ``java.util.BitSet`` (``TxnBatchedPositionImpl.setAckSetByIndex``)."""
    bits = (1 << batch_size) - 1
    for i in acked_indexes:
        if not 0 <= i < batch_size:
            raise InvalidCursorPositionError(f"batch index {i} outside a batch of {batch_size}")
        bits &= ~(1 << i)
    return bitset_words(bits)


def bitset_words(bits: int) -> list[int]:
    """``BitSet.toLongArray()``: little-endian signed 64-bit words, trailing zero words dropped."""
    words = []
    while bits:
        w = bits & _MASK64
        words.append(w - (1 << 64) if w >> 63 else w)
        bits >>= 64
    return words


def bitset_from_words(words: Iterable[int]) -> int:
    bits = 0
    for i, w in enumerate(words):
        bits |= (int(w) & _MASK64) << (64 * i)
    return bits


class _RangeSet:
    """Individually deleted entries as merged open-closed ranges ``(lo, hi]`` (Guava semantics)."""

    __slots__ = ("ranges",)

    def __init__(self) -> None:
        self.ranges: list[tuple[Position, Position]] = []

    def add(self, lo: Position, hi: Position) -> None:
        if hi <= lo:
            return
        keep, nlo, nhi = [], lo, hi
        for a, b in self.ranges:
            if a <= nhi and nlo <= b:  # connected (overlapping or touching)
                nlo, nhi = min(a, nlo), max(b, nhi)
            else:
                keep.append((a, b))
        bisect.insort(keep, (nlo, nhi))
        self.ranges = keep

    def contains(self, p: Position) -> bool:
        return self.range_containing(p) is not None

    def range_containing(self, p: Position) -> tuple[Position, Position] | None:
        i = bisect.bisect_left(self.ranges, (p,)) - 1
        for j in (i, i + 1):
            if 0 <= j < len(self.ranges):
                a, b = self.ranges[j]
                if a < p <= b:
                    return a, b
        return None

    def remove_at_most(self, p: Position) -> None:
        out = []
        for a, b in self.ranges:
            if b <= p:
                continue
            out.append((max(a, p), b))
        self.ranges = out

    def clear(self) -> None:
        self.ranges = []

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __iter__(self) -> Iterator[tuple[Position, Position]]:
        return iter(list(self.ranges))


class _Handle:
    """The ledger being written: id, entries, cumulative length, creation time."""

    __slots__ = ("created", "entries", "ledger_id", "length")

    def __init__(self, ledger_id: int, created: int) -> None:
        self.ledger_id, self.entries, self.length, self.created = ledger_id, 0, 0, created


class ManagedLedger:
    """A managed ledger; get one from :meth:`pulsarkit.Store.managed_ledger`."""

    def __init__(self, store: Store, name: str, config: ManagedLedgerConfig | None = None) -> None:
        from .interceptors import ManagedLedgerInterceptor, create_interceptors

        self.store = store
        self.name = name
        self.config = config or ManagedLedgerConfig()
        self._md = store.metadata
        self._bk = store.bookie
        self._clock = self.config.clock or store.clock
        self.read_only = store.read_only
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
        self._max_rollover_ms = int(self.config.maximum_rollover_time_ms * (1 + random.random() * self.config.rollover_jitter))
        itc = create_interceptors(self.config.broker_entry_metadata_interceptors, self._clock) if self.config.broker_entry_metadata_interceptors else []
        self._interceptor = ManagedLedgerInterceptor(itc) if itc else None
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
            self._cursors[cname] = ManagedCursor._recover(self, cname)

    def _recover_last_ledger(self, lid: int) -> None:
        """``asyncOpenLedger`` with recovery on the last ledger: its entries and length, fencing and
        closing it if it was left open. Its LedgerInfo timestamp becomes now, as in Pulsar."""
        try:
            lmd, lstat = self._md.ledger_metadata(lid)
        except LedgerNotFoundError:
            self._remove_ledger(lid)
            return
        self._digests[lid] = (_DIGEST_NAMES.get(lmd.digestType, "CRC32C"), bytes(lmd.password))
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
        if cfg.digest_type not in _DIGEST_VALUES:
            raise ManagedLedgerError(f"unknown digest type {cfg.digest_type!r}")
        now = self._clock()
        lid = self._md.generate_ledger_id()
        lmd = LedgerMetadataFormat(
            quorumSize=cfg.write_quorum_size, ensembleSize=cfg.ensemble_size, ackQuorumSize=cfg.ack_quorum_size,
            length=0, state=LedgerMetadataFormat.OPEN, digestType=_DIGEST_VALUES[cfg.digest_type],
            password=bytes(cfg.password), ctime=now, cToken=0,
        )
        seg = lmd.segment.add()
        seg.ensembleMember.append(self._bk.bookie_id)
        seg.firstEntryId = 0
        for k, v in ledger_custom_metadata(self.name, cfg.ledger_metadata).items():
            e = lmd.customMetadata.add()
            e.key, e.value = k, v
        self._md.put_ledger_metadata(lid, lmd, expected_version=-1)
        self._bk.create_ledger(lid, master_key(cfg.password))
        self._digests[lid] = ("MAC" if cfg.digest_type == "HMAC" else cfg.digest_type, bytes(cfg.password))
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
                    ledgerId=h.ledger_id, entries=h.entries, size=h.length, timestamp=self._clock())
            else:
                self._remove_ledger(h.ledger_id)
                self._delete_ledger_quietly(h.ledger_id)

    def _drop_ledgers(self, ledger_ids: list[int]) -> None:
        """Retention's delete: out of the managed ledger's list first, then out of BookKeeper."""
        self._check_mutable()
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

    def trim_consumed_ledgers(self, dry_run: bool = False) -> Any:
        """Applies the configured retention now (see :func:`pulsarkit.lifecycle.trim_ledgers`)."""
        from .lifecycle import trim_ledgers

        return trim_ledgers(self, dry_run=dry_run)

    def _roll(self) -> None:
        self._close_current(update_info=True)
        self._create_ledger()
        if self.config.trim_on_rollover:
            from .lifecycle import trim_ledgers

            trim_ledgers(self)

    def current_ledger_is_full(self) -> bool:
        """``currentLedgerIsFull``: space or age reached, and (if set) older than the minimum."""
        h = self._current
        if h is None:
            return False
        cfg = self.config
        age = self._clock() - h.created
        full = h.entries >= cfg.max_entries_per_ledger or h.length >= cfg.max_size_per_ledger_mb * MB or age >= self._max_rollover_ms
        if full and cfg.minimum_rollover_time_ms > 0:
            return age > cfg.minimum_rollover_time_ms
        return full

    def roll_current_ledger_if_full(self) -> bool:
        """``rollCurrentLedgerIfFull`` (the broker's periodic check): rolls a non-empty full ledger."""
        self._check_writable()
        if self._current is not None and self._current.entries > 0 and self.current_ledger_is_full():
            self._roll()
            return True
        return False

    # ------------------------------------------------------------------------------- writing

    def _check_open(self) -> None:
        if self._state == "closed":
            raise ManagedLedgerClosedError(f"managed ledger {self.name!r} is closed")
        if self._state == "fenced":
            raise ManagedLedgerFencedError(f"managed ledger {self.name!r} is fenced")

    def _check_writable(self) -> None:
        self._check_open()
        if self._state == "read_only":
            raise ManagedLedgerClosedError(f"managed ledger {self.name!r} was opened read-only")
        if self._state == "terminated":
            raise ManagedLedgerTerminatedError(f"managed ledger {self.name!r} is terminated at {self._terminated}")

    def add_entry(self, data: bytes | bytearray | memoryview, num_messages: int = 1) -> Position:
        """Appends one entry (a Pulsar entry: one message or one batch); returns its position."""
        self._check_writable()
        h = self._current
        assert h is not None
        payload = bytes(data)
        if self._interceptor is not None:
            payload = self._interceptor.before_add_entry(payload, num_messages)
        eid = h.entries
        length = h.length + len(payload)
        digest, password = self._digests[h.ledger_id]
        self._bk.add_entry(pack_entry(h.ledger_id, eid, eid - 1, length, payload, digest, password))
        h.entries += 1
        h.length = length
        self.number_of_entries += 1
        self.total_size += len(payload)
        pos = Position(h.ledger_id, eid)
        if self.current_ledger_is_full():
            self._roll()
        return pos

    def flush(self) -> None:
        """Makes every added entry durable (a bookie checkpoint)."""
        self._check_open()
        if not self.read_only:
            self._bk.flush()

    def terminate(self) -> Position:
        """Terminates the managed ledger at its last entry; further adds fail."""
        self._check_writable()
        self._close_current(update_info=True)
        self._terminated = self.last_confirmed_entry
        self._store_info()
        self._state = "terminated"
        return self._terminated

    def close(self) -> None:
        """Persists cursors, closes the current ledger's metadata (its LedgerInfo is completed at
        the next open, as in Pulsar) and flushes the bookie."""
        if self._state == "closed":
            return
        try:
            if not self.read_only and self._state in ("open", "terminated"):
                for c in self._cursors.values():
                    c._persist()
                self._close_current(update_info=False)
                self._bk.flush()
        finally:
            self._state = "closed"
            self.store._forget(self)

    def _check_mutable(self) -> None:
        """Metadata changes (cursors, retention, deletion) are allowed on a terminated ledger too."""
        self._check_open()
        if self.read_only:
            raise ManagedLedgerClosedError(f"managed ledger {self.name!r} was opened read-only")

    def set_config(self, config: ManagedLedgerConfig) -> None:
        """``ManagedLedger.setConfig``: new rollover and retention settings take effect at once."""
        self.config = config
        self._clock = config.clock or self.store.clock
        self._max_rollover_ms = int(config.maximum_rollover_time_ms * (1 + random.random() * config.rollover_jitter))

    def delete(self) -> None:
        """Deletes the managed ledger: its cursors, all its ledgers and its metadata node."""
        self._check_mutable()
        for name in list(self._cursors):
            self.delete_cursor(name)
        self._current = None
        for lid in list(self._ids):
            self._delete_ledger_quietly(lid)
        self._ledgers.clear()
        self._ids.clear()
        self._md.delete(f"/managed-ledgers/{self.name}")
        self._state = "closed"
        self.store._forget(self)

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
        p = _pos(p)
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
        nxt = self._first_at_or_after(_pos(p).next())
        if nxt is not None:
            return nxt
        if self._current is not None:
            return Position(self._current.ledger_id, self._current.entries)
        return self.last_confirmed_entry.next()

    def count_entries(self, lo_exclusive: Position, hi_inclusive: Position) -> int:
        """Entries in the open-closed range ``(lo, hi]`` (``getNumberOfEntries(Range.openClosed)``)."""
        lo, hi = _pos(lo_exclusive), _pos(hi_inclusive)
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
        p = _pos(p)
        return p.entry_id >= 0 and p.entry_id < self._count(p.ledger_id) and p.ledger_id in self._ledgers

    # ------------------------------------------------------------------------------- reading

    def _digest_of(self, lid: int) -> tuple[str, bytes]:
        d = self._digests.get(lid)
        if d is None:
            lmd, _ = self._md.ledger_metadata(lid)
            d = self._digests[lid] = (_DIGEST_NAMES.get(lmd.digestType, "CRC32C"), bytes(lmd.password))
        return d

    def _read_payload(self, p: Position) -> bytes:
        digest, password = self._digest_of(p.ledger_id)
        stored = self._bk.read_entry(p.ledger_id, p.entry_id)
        return unpack_entry(stored, digest, password, self.config.verify_digest, p.ledger_id, p.entry_id).payload

    def read_entry(self, position: Any) -> bytes:
        """The Pulsar entry bytes at ``position``."""
        self._check_open()
        p = _pos(position)
        if not self.is_valid_position(p):
            raise InvalidCursorPositionError(f"{self.name}: no entry at {p}")
        return self._read_payload(p)

    def read(self, start: Any, max_entries: int) -> list[tuple[Position, bytes]]:
        """Up to ``max_entries`` entries from ``start`` on (inclusive; positions past the end of a
        ledger continue in the next one)."""
        self._check_open()
        out: list[tuple[Position, bytes]] = []
        p = self._first_at_or_after(_pos(start))
        while p is not None and len(out) < max_entries:
            out.append((p, self._read_payload(p)))
            p = self._first_at_or_after(p.next())
        return out

    def read_after(self, position: Any) -> Iterator[tuple[Position, bytes]]:
        """Every entry after ``position``, lazily."""
        p = self._first_at_or_after(_pos(position).next())
        while p is not None:
            yield p, self._read_payload(p)
            p = self._first_at_or_after(p.next())

    # ------------------------------------------------------------------------------ metadata

    def ledgers(self) -> list[LedgerInfo]:
        """The managed ledger's ledgers, oldest first."""
        out = []
        for lid in self._ids:
            li = self._ledgers[lid]
            h = self._current
            if h is not None and h.ledger_id == lid:
                out.append(LedgerInfo(lid, h.entries, h.length, 0))
            else:
                out.append(LedgerInfo(lid, li.entries, li.size, li.timestamp,
                                      li.HasField("offloadContext") and li.offloadContext.complete))
        return out

    @property
    def current_ledger_id(self) -> int | None:
        return None if self._current is None else self._current.ledger_id

    @property
    def properties(self) -> dict[str, str]:
        return dict(self._properties)

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
        return f"ManagedLedger({self.name!r}, ledgers={self._ids}, entries={self.number_of_entries}, state={self._state})"

    # ------------------------------------------------------------------------------- cursors

    def open_cursor(self, name: str, initial_position: str = "latest") -> ManagedCursor:
        """Opens (or creates) a durable cursor. A new cursor starts at the end (``"latest"``, the
        default, as Pulsar's) or before the first entry (``"earliest"``)."""
        self._check_open()
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
        c._persist(create=True)
        self._cursors[name] = c
        return c

    def delete_cursor(self, name: str) -> None:
        self._check_mutable()
        c = self._cursors.pop(name, None)
        if c is None:
            raise CursorNotFoundError(f"cursor {name!r} not found on {self.name!r}")
        try:
            self._md.delete_cursor_info(self.name, name)
        except MetadataStoreError:
            pass
        c._drop_cursor_ledger()
        c._deleted = True

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


class ManagedCursor:
    """A durable cursor (a subscription's position); get one from :meth:`ManagedLedger.open_cursor`."""

    def __init__(self, ml: ManagedLedger, name: str, mark_delete: Position) -> None:
        self.ml = ml
        self.name = name
        self._md = mark_delete
        self._read_position = ml.next_valid_position(mark_delete)
        self._ranges = _RangeSet()
        self._batch: dict[Position, int] = {}
        self._properties: dict[str, int] = {}
        self._cursor_properties: dict[str, str] = {}
        self._version: int | None = None
        self._cursor_ledger = -1
        self._deleted = False
        self.last_active = ml._clock()

    # --------------------------------------------------------------------- persistence

    @classmethod
    def _recover(cls, ml: ManagedLedger, name: str) -> ManagedCursor:
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
        c._ranges = _RangeSet()
        for rg in state.individualDeletedMessages:
            c._ranges.add(Position(rg.lowerEndpoint.ledgerId, rg.lowerEndpoint.entryId),
                          Position(rg.upperEndpoint.ledgerId, rg.upperEndpoint.entryId))
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

    def _drop_cursor_ledger(self) -> None:
        if self._cursor_ledger != -1 and not self.ml.read_only:
            self.ml._delete_ledger_quietly(self._cursor_ledger)
            self._cursor_ledger = -1

    def _info(self) -> Any:
        info = ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=self._md.ledger_id,
                                 markDeleteEntryId=self._md.entry_id, lastActive=self.last_active)
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
        for k, v in self._cursor_properties.items():
            p = info.cursorProperties.add()
            p.name, p.value = k, v
        return info

    def _persist(self, create: bool = False) -> None:
        if self.ml.read_only or self._deleted:
            return
        self.last_active = self.ml._clock()
        try:
            stat = self.ml._md.put_cursor_info(self.ml.name, self.name, self._info(),
                                               expected_version=-1 if create else self._version)
        except BadVersionError as e:
            raise ManagedLedgerFencedError(f"cursor {self.name!r} was changed by another writer: {e}") from None
        self._version = stat.version
        self._drop_cursor_ledger()  # the snapshot now supersedes a broker-written cursor ledger

    def _check(self) -> None:
        if self._deleted:
            raise CursorNotFoundError(f"cursor {self.name!r} was deleted")
        self.ml._check_open()
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

    def set_cursor_properties(self, properties: Mapping[str, str]) -> None:
        self._check()
        self._cursor_properties = {str(k): str(v) for k, v in properties.items()}
        self._persist()

    @property
    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        """Individually deleted entries as open-closed ``(lo, hi]`` ranges."""
        return list(self._ranges)

    def deleted_batch_indexes(self, position: Any) -> list[int] | None:
        """``getDeletedBatchIndexesAsLongArray``: the ack-set words kept for a partly acknowledged
        batch (set bit = not yet acknowledged), or None."""
        bits = self._batch.get(_pos(position))
        return None if bits is None else bitset_words(bits)

    def is_deleted(self, position: Any) -> bool:
        p = _pos(position)
        return p <= self._md or self._ranges.contains(p)

    @property
    def number_of_entries_in_backlog(self) -> int:
        """Entries after the mark-delete position not individually deleted."""
        lac = self.ml.last_confirmed_entry
        n = self.ml.count_entries(self._md, lac)
        for lo, hi in self._ranges:
            n -= self.ml.count_entries(lo, hi)
        return n

    def has_more_entries(self) -> bool:
        return self.ml._first_at_or_after(self._read_position) is not None

    # ---------------------------------------------------------------------------- reading

    def read(self, n: int) -> list[tuple[Position, bytes]]:
        """Up to ``n`` entries from the read position on, skipping deleted ones; advances it."""
        if self._deleted:
            raise CursorNotFoundError(f"cursor {self.name!r} was deleted")
        self.ml._check_open()
        out: list[tuple[Position, bytes]] = []
        p = self.ml._first_at_or_after(self._read_position)
        while p is not None and len(out) < n:
            if not self.is_deleted(p):
                out.append((p, self.ml._read_payload(p)))
            self._read_position = self.ml.next_valid_position(p)
            p = self.ml._first_at_or_after(p.next())
        return out

    def seek(self, position: Any) -> None:
        """Moves the read position only."""
        self._read_position = _pos(position)

    def rewind(self) -> None:
        """Read again from the first entry after the mark-delete position."""
        self._read_position = self.ml.next_valid_position(self._md)

    # ------------------------------------------------------------------------ acknowledging

    def _set_acknowledged(self, new_md: Position) -> None:
        """``setAcknowledgedPosition``: moves the mark-delete, absorbing individually deleted
        entries that follow it, and drops state at or below it."""
        if new_md < self._md:
            raise InvalidCursorPositionError(
                f"mark deleting an already mark-deleted position: current {self._md}, attempted {new_md}")
        ml = self.ml
        lac = ml.last_confirmed_entry
        nxt = ml.next_valid_position(new_md)
        while nxt <= lac:
            r = self._ranges.range_containing(nxt)
            if r is None:
                break
            new_md = r[1]
            nxt = ml.next_valid_position(new_md)
        self._md = new_md
        self._ranges.remove_at_most(new_md)
        for p in [p for p in self._batch if p <= new_md]:
            del self._batch[p]
        if self._read_position <= new_md:
            self._read_position = ml.next_valid_position(new_md)

    def mark_delete(self, position: Any, properties: Mapping[str, int] | None = None,
                    ack_set: Iterable[int] | None = None) -> None:
        """Cumulative acknowledgement up to ``position`` (inclusive). ``properties`` are stored with
        it and replace the previous ones (None clears them, as ``markDelete(position)`` does).
        With ``ack_set`` (batch-index words) only those batch indexes of ``position`` are acknowledged."""
        self._check()
        p = _pos(position)
        ml = self.ml
        if p > ml.last_confirmed_entry:
            raise InvalidCursorPositionError(f"mark-delete position {p} is after the last entry {ml.last_confirmed_entry}")
        if ack_set is not None:
            if ml.config.deletion_at_batch_index_level_enabled:
                given = bitset_from_words(ack_set)
                old = self._batch.get(p)
                # only move forward: keep the recorded set unless the new one starts later
                if old is None or _lowest_bit(given) > _lowest_bit(old):
                    self._batch[p] = given
            p = ml.previous_position(p)
        self._set_acknowledged(p)
        self._properties = {str(k): int(v) for k, v in (properties or {}).items()}
        self._persist()

    def delete(self, positions: Any, ack_set: Iterable[int] | None = None) -> None:
        """Individual acknowledgement of one position or a list of them. With ``ack_set`` (batch
        words, a set bit = still to acknowledge) the batch indexes cleared in it are acknowledged;
        the entry counts as deleted once no bit is left."""
        self._check()
        ml = self.ml
        plist = [positions] if isinstance(positions, Position) or (
            isinstance(positions, tuple) and len(positions) == 2 and isinstance(positions[0], int)) else list(positions)
        lac = ml.last_confirmed_entry
        for raw in plist:
            p = _pos(raw)
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
        self._persist()

    def delete_batch_index(self, position: Any, batch_index: int, batch_size: int) -> None:
        """Acknowledges one message of a batch entry."""
        self.delete(_pos(position), ack_set=ack_set_for(batch_size, [batch_index]))

    def reset(self, position: Any) -> None:
        """``resetCursor``: the next read is ``position``; the mark-delete moves just before it and
        individual and batch-index acks are forgotten."""
        self._check()
        p = _pos(position)
        ml = self.ml
        write_pos = ml.next_valid_position(ml.last_confirmed_entry)
        if not (ml.is_valid_position(p) or p == write_pos):
            raise InvalidCursorPositionError(f"cannot reset {self.name!r} to {p}: no such entry on {ml.name!r}")
        self._md = ml.previous_position(p)
        self._ranges.clear()
        self._batch.clear()
        self._read_position = p
        self._persist()

    def __repr__(self) -> str:
        return f"ManagedCursor({self.ml.name!r}/{self.name!r}, mark_delete={self._md}, read={self._read_position})"


def _lowest_bit(bits: int) -> int:
    return (bits & -bits).bit_length() - 1 if bits else -1


def now_ms() -> int:
    return int(time.time() * 1000)


__all__ = [
    "LedgerInfo",
    "ManagedCursor",
    "ManagedLedger",
    "ManagedLedgerConfig",
    "Position",
    "ack_set_for",
    "bitset_from_words",
    "bitset_words",
    "ledger_custom_metadata",
]
