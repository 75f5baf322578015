"""The read side every metadata source offers: Pulsar's RocksDB store (``store.MetadataStore``, or its pairs
already read, ``store.StoreItems``), a ZooKeeper data directory read offline (``zookeeper.ZkSnapshotStore``) and a
live ZooKeeper read once, read-only (``zookeeper_live.ZkLiveStore``) all satisfy :class:`MetadataReader`, so code
that only reads metadata takes any. :class:`MergedReader` shows a cluster's metadata store and its separate
configuration store as one tree; :class:`LedgerIndex` is BookKeeper's ledger manager (the ledger ids and their
metadata) over any of them.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from ..errors import LedgerNotFoundError, MetadataStoreError
from .store import (
    INSTANCE_ID_PATH,
    LEDGERS_ROOT,
    Stat,
    ledger_id_from_path,
    parse_instance_id,
    parse_ledger_metadata,
)


@runtime_checkable
class MetadataReader(Protocol):
    """Read-only access to a metadata tree keyed by absolute paths (``/ledgers/00/0000/L0005``)."""

    def get(self, path: str) -> tuple[bytes, Stat] | None:
        """``(data, stat)`` of a node, or None when there is no node at ``path``."""
        ...

    def exists(self, path: str) -> bool: ...

    def children(self, path: str) -> list[str]:
        """Names (not paths) of the direct children of ``path``, sorted."""
        ...

    def keys(self, prefix: str = "/") -> Iterator[str]:
        """Every node path starting with ``prefix``, in bytewise order of the UTF-8 path."""
        ...


def next_sequential(reader: MetadataReader, parent: str) -> int | None:
    """The suffix ``reader``'s store would give the next sequential child of ``parent`` (ZooKeeper: the
    parent's ``cversion``; Pulsar's RocksDB store: its one counter), so every sequential child created so far
    has a smaller one; None when the source does not say (a reader without ``next_sequential``)."""
    own = getattr(reader, "next_sequential", None)
    return own(parent) if own is not None else None


class MergedReader:
    """Several metadata trees read as one: a path is read from the first reader that has it. A Pulsar cluster
    may keep its configuration store (tenants, namespace policies, partitioned-topic metadata) apart from its
    metadata store (ledgers, managed ledgers, schemas); the two hold different paths, apart from shared
    parents such as ``/`` and ``/admin``."""

    def __init__(self, *readers: MetadataReader) -> None:
        self.readers = readers

    def get(self, path: str) -> tuple[bytes, Stat] | None:
        for r in self.readers:
            got = r.get(path)
            if got is not None:
                return got
        return None

    def exists(self, path: str) -> bool:
        return any(r.exists(path) for r in self.readers)

    def next_sequential(self, parent: str) -> int | None:
        """:func:`next_sequential` of the first reader holding ``parent``."""
        for r in self.readers:
            if r.exists(parent):
                return next_sequential(r, parent)
        return None

    def children(self, path: str) -> list[str]:
        return sorted({c for r in self.readers for c in r.children(path)})

    def keys(self, prefix: str = "/") -> Iterator[str]:
        last = None
        merged = heapq.merge(*(r.keys(prefix) for r in self.readers), key=lambda p: p.encode("utf-8", "surrogatepass"))
        for p in merged:
            if p != last:
                yield p
            last = p


class ChrootReader:
    """The tree below ``chroot`` of another reader, with the paths its clients see: a Pulsar cluster whose
    ``metadataStoreUrl`` ends in a chroot (``zk:zk1:2181/pulsar``) keeps ``/ledgers``, ``/managed-ledgers``...
    under ``/pulsar`` of its ZooKeeper."""

    def __init__(self, reader: MetadataReader, chroot: str) -> None:
        if not chroot.startswith("/") or chroot.endswith("/") or "//" in chroot:
            raise MetadataStoreError(f"chroot {chroot!r} is not an absolute path like /pulsar")
        if not reader.exists(chroot):
            raise MetadataStoreError(f"the chroot {chroot} does not exist in this ZooKeeper data")
        self.reader, self.chroot = reader, chroot

    def _full(self, path: str) -> str:
        return self.chroot if path == "/" else self.chroot + path

    def get(self, path: str) -> tuple[bytes, Stat] | None:
        return self.reader.get(self._full(path))

    def exists(self, path: str) -> bool:
        return self.reader.exists(self._full(path))

    def next_sequential(self, parent: str) -> int | None:
        return next_sequential(self.reader, self._full(parent))

    def children(self, path: str) -> list[str]:
        return self.reader.children(self._full(path))

    def keys(self, prefix: str = "/") -> Iterator[str]:
        n = len(self.chroot)
        for p in self.reader.keys(self._full(prefix) if prefix != "/" else self.chroot):
            if p == self.chroot:
                yield "/"
            elif p.startswith(self.chroot + "/"):
                yield p[n:]


class LedgerIndex:
    """BookKeeper's ledger manager over any metadata reader: the ledgers under ``/ledgers`` in whichever
    layout the cluster uses (hierarchical or long-hierarchical) and each one's metadata, which is what bookie
    GC asks (:class:`pulsarkit.bookkeeper.gc.LedgerManager`). Read once, when first asked."""

    def __init__(self, reader: MetadataReader) -> None:
        self.reader = reader
        self._paths: dict[int, str] | None = None

    def _index(self) -> dict[int, str]:
        if self._paths is None:
            self._paths = {lid: p for p in self.reader.keys("/ledgers/") if (lid := ledger_id_from_path(p)) is not None}
        return self._paths

    def ledger_ids(self) -> list[int]:
        return sorted(self._index())

    def next_ledger_id(self) -> int | None:
        """The lowest ledger id the id generator had not issued when the tree was read (every ledger created
        by then has a smaller one): the next sequential suffix under ``/ledgers/idgen``, where
        ``PulsarLedgerIdGenerator`` and BookKeeper's ``ZkLedgerIdGenerator`` take 31-bit ids. None once the
        cluster has moved on to 63-bit ids (``/ledgers/idgen-long``), or when the source does not say."""
        if self.reader.exists(LEDGERS_ROOT + "/idgen-long"):
            return None
        return next_sequential(self.reader, LEDGERS_ROOT + "/idgen")

    def cluster_instance_id(self) -> str | None:
        """``/ledgers/INSTANCEID``: the cluster every bookie's cookie names, or None."""
        got = self.reader.get(INSTANCE_ID_PATH)
        return parse_instance_id(got[0] if got is not None else None)

    def ledger_metadata(self, ledger_id: int) -> tuple[Any, Stat]:
        """``(LedgerMetadataFormat, stat)``; :class:`LedgerNotFoundError` (a ``KeyError``) if absent."""
        path = self._index().get(ledger_id)
        got = self.reader.get(path) if path is not None else None
        if got is None:
            raise LedgerNotFoundError(f"ledger {ledger_id} has no metadata")
        return parse_ledger_metadata(got[0], ledger_id), got[1]
