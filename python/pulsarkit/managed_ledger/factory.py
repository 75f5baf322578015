"""``ManagedLedgerFactory``: the managed ledgers of a metadata store and one bookie's ledger storage,
and the embedded Pulsar storage directory they live in.

::

    <path>/metadata/          RocksDB metadata store (Pulsar's paths and values)
    <path>/bookie/current/    entry logs, lastId, ledgers/ and locations/ (DbLedgerStorage)

``ManagedLedgerFactory(metadata_dir, bookie_dirs)`` (also named ``Store``) opens other layouts, e.g. a Pulsar
standalone's
``data/metadata`` and ``data/standalone/bookkeeper`` (read-only is the safe way to look at those).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..bookkeeper.gc import GcConfig, GcRequest, GcState
from ..bookkeeper.gc_cluster import BookieGcRun, execute_bookies, plan_bookies
from ..bookkeeper.ledger_storage import (
    DEFAULT_BOOKIE_ID,
    DEFAULT_LOG_SIZE_LIMIT,
    DEFAULT_WRITE_CACHE_SIZE,
    DbLedgerStorage,
    RecoveryReport,
)
from ..errors import LedgerNotFoundError, ManagedLedgerClosedError, ManagedLedgerError
from ..metadata.store import MetadataStore
from . import foreign
from .config import ManagedLedgerConfig
from .ledger import ManagedLedger


def _now_ms() -> int:
    return int(time.time() * 1000)


class ManagedLedgerFactory:
    """Metadata store + bookie + the managed ledgers opened on them (``ManagedLedgerFactoryImpl``)."""

    def __init__(
        self,
        metadata_dir: str | os.PathLike[str],
        bookie_dirs: str | os.PathLike[str] | Sequence[Any],
        *,
        read_only: bool = False,
        clock: Callable[[], int] | None = None,
        log_size_limit: int = DEFAULT_LOG_SIZE_LIMIT,
        write_cache_size: int = DEFAULT_WRITE_CACHE_SIZE,
        bookie_id: str = DEFAULT_BOOKIE_ID,
        sync: bool = True,
    ) -> None:
        self.read_only = read_only
        self.clock: Callable[[], int] = clock or _now_ms
        self._lock = threading.RLock()
        self._gc_state: dict[str, GcState] = {}
        self._mls: dict[str, ManagedLedger] = {}
        self._closed = False
        self.metadata = MetadataStore(metadata_dir, read_only=read_only, sync=sync, clock=self.clock)
        try:
            self.bookie = DbLedgerStorage(
                bookie_dirs,
                log_size_limit=log_size_limit,
                write_cache_size=write_cache_size,
                read_only=read_only,
                sync=sync,
                bookie_id=bookie_id,
            )
        except BaseException:
            self.metadata.close()
            raise

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, read_only: bool = False, **kw: Any) -> ManagedLedgerFactory:
        """Opens (creating it unless ``read_only``) the store under ``path``."""
        path = os.fspath(path)
        if foreign.accepts(path):  # a directory pulsarkit did not create
            if foreign.opener is None:  # never create our bookie/ inside it
                raise ManagedLedgerError(
                    f"{path} is a Pulsar data directory, not a pulsarkit store: open it with "
                    "pulsarkit.open_data_dir (importing pulsarkit.scan lets Store.open do it)"
                )
            return foreign.opener(path)  # the read-only reader (scan.datadir's)
        if not read_only:
            os.makedirs(path, mode=0o700, exist_ok=True)
        return cls(os.path.join(path, "metadata"), [os.path.join(path, "bookie")], read_only=read_only, **kw)

    # ------------------------------------------------------------------------ managed ledgers

    def managed_ledger(self, name: str, config: ManagedLedgerConfig | None = None) -> ManagedLedger:
        """Opens a managed ledger (created if absent, unless read-only). Opening a name that is
        already open returns the same object."""
        with self._lock:
            self._check()
            ml = self._mls.get(name)
            if ml is not None:
                if config is not None and config is not ml.config:
                    ml.set_config(config)
                return ml
            ml = ManagedLedger(
                self.metadata,
                self.bookie,
                name,
                config,
                clock=self.clock,
                read_only=self.read_only,
                on_close=self._forget,
            )
            self._mls[name] = ml
            return ml

    def managed_ledgers(self) -> list[str]:
        """Names of all managed ledgers in the metadata store."""
        return self.metadata.managed_ledger_names()

    def _forget(self, ml: ManagedLedger) -> None:
        with self._lock:
            if self._mls.get(ml.name) is ml:
                del self._mls[ml.name]

    # ------------------------------------------------------------------------------ ledgers

    def ledger_owner(self, ledger_id: int) -> str | None:
        """The managed ledger named in a ledger's custom metadata (``pulsar/managed-ledger``)."""
        md, _ = self.metadata.ledger_metadata(ledger_id)
        for e in md.customMetadata:
            if e.key == "pulsar/managed-ledger":
                return e.value.decode("utf-8", "replace")
        return None

    def delete_ledger(self, ledger_id: int) -> None:
        """Deletes a ledger as the BookKeeper client and a bookie's GC would: its metadata, then its
        index entries on the bookie. :class:`LedgerNotFoundError` if neither holds it."""
        self._check(write=True)
        found = False
        try:
            self.metadata.delete_ledger_metadata(ledger_id)
            found = True
        except LedgerNotFoundError:
            pass
        if self.bookie.ledger_exists(ledger_id):
            self.bookie.delete_ledger(ledger_id)
            found = True
        if not found:
            raise LedgerNotFoundError(f"ledger {ledger_id} exists neither in metadata nor on the bookie")

    # ----------------------------------------------------------------------------- lifecycle

    @property
    def recovery(self) -> RecoveryReport:
        """What opening found at the tail of the entry logs (torn tails, re-indexed entries)."""
        return self.bookie.recovery

    def _check(self, write: bool = False) -> None:
        if self._closed:
            raise ManagedLedgerClosedError("store is closed")
        if write and self.read_only:
            raise ManagedLedgerError("store was opened read-only")

    def flush(self) -> None:
        """Makes every entry added so far durable."""
        self._check()
        self.bookie.flush()

    def garbage_collect(
        self, config: GcConfig | None = None, *, force: bool = False, dry_run: bool = False
    ) -> list[BookieGcRun]:
        """One run of the bookie's garbage collector on each of this store's ledger directories, as its
        GC thread would make it now (``force``: the manual trigger, intervals ignored): ledgers retention
        deleted leave the index, emptied logs go, logs under a threshold are compacted. Returns per
        directory the plan and, unless ``dry_run``, the result. Call it between writes, not during."""
        self._check(write=not dry_run)
        with self._lock:
            self.bookie.flush()
            dirs = self.bookie.dirs
            states = {s.ledger_dir: self._gc_state.setdefault(s.ledger_dir, GcState()) for s in dirs}
            plans = plan_bookies(
                dirs, self.metadata, config, GcRequest(force=force), states=states, clock_ms=self.clock
            )
            if dry_run:
                return [BookieGcRun(p.ledger_dir, p, None) for p in plans.bookies]
            return execute_bookies(dirs, self.metadata, plans, config, states=states, clock_ms=self.clock)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                for ml in list(self._mls.values()):
                    ml.close()
            finally:
                self._closed = True
                try:
                    self.bookie.close()
                finally:
                    self.metadata.close()

    def __enter__(self) -> ManagedLedgerFactory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        dirs = [s.ledger_dir for s in self.bookie.dirs]
        return f"ManagedLedgerFactory(metadata={self.metadata.path!r}, bookie={dirs!r})"


#: The name pulsarkit's first releases used; ``pulsarkit.Store.open(path)`` stays the entry point.
Store = ManagedLedgerFactory

__all__ = ["ManagedLedgerFactory", "Store"]
