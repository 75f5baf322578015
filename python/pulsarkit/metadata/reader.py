"""The read side every metadata source offers: Pulsar's RocksDB store (``store.MetadataStore``, or its pairs
already read, ``store.StoreItems``), a ZooKeeper data directory read offline (``zookeeper.ZkSnapshotStore``) and a
live ZooKeeper read once, read-only (``zookeeper_live.ZkLiveStore``) all satisfy :class:`MetadataReader`, so code
that only reads metadata takes any. :class:`MergedReader` shows a cluster's metadata store and its separate
configuration store as one tree.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from .store import Stat


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

    def children(self, path: str) -> list[str]:
        return sorted({c for r in self.readers for c in r.children(path)})

    def keys(self, prefix: str = "/") -> Iterator[str]:
        last = None
        merged = heapq.merge(*(r.keys(prefix) for r in self.readers), key=lambda p: p.encode("utf-8", "surrogatepass"))
        for p in merged:
            if p != last:
                yield p
            last = p
