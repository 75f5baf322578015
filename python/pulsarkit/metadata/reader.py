"""The read side every metadata source offers: Pulsar's RocksDB store (``store.MetadataStore``) and a
ZooKeeper data directory read offline (``zookeeper.ZkSnapshotStore``) both satisfy :class:`MetadataReader`,
so code that only reads metadata takes either.
"""

from __future__ import annotations

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
