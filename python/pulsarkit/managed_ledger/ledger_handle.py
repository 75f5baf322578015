"""A BookKeeper ledger outside any managed ledger (BookKeeper's ``LedgerHandle``), on the store's
metadata and bookie: what the compactor writes its compacted ledger to, and reads it back from.
Entries are packed with the ledger's digest (CRC32 and an empty password for compacted ledgers, as
``Compactor`` creates them); ``close()`` writes the CLOSED metadata with the last entry and length.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from ..bookkeeper.digest import digest_type_name, digest_type_value, master_key, pack_entry, unpack_entry
from ..errors import BookieError, ManagedLedgerClosedError
from ..proto import LedgerMetadataFormat

if TYPE_CHECKING:  # the caller's factory: a read of the compacted ledger does not import the bookie GC
    from .factory import ManagedLedgerFactory


class LedgerHandle:
    """One ledger: create it (writable until ``close()``) or open an existing one to read."""

    def __init__(
        self, factory: ManagedLedgerFactory, ledger_id: int, digest_type: str, password: bytes, writable: bool
    ) -> None:
        self.factory = factory
        self.ledger_id = ledger_id
        self.digest_type = digest_type
        self.password = bytes(password)
        self._writable = writable
        self._entries = 0
        self._length = 0
        if not writable:
            lmd, _ = factory.metadata.ledger_metadata(ledger_id)
            self._entries = lmd.lastEntryId + 1 if lmd.state == LedgerMetadataFormat.CLOSED else 0
            self._length = lmd.length

    @classmethod
    def create(
        cls,
        factory: ManagedLedgerFactory,
        custom_metadata: Mapping[str, bytes],
        digest_type: str = "CRC32",
        password: bytes = b"",
        ensemble_size: int = 1,
        write_quorum_size: int = 1,
        ack_quorum_size: int = 1,
    ) -> LedgerHandle:
        """A new, open ledger with ``custom_metadata`` (bytes values)."""
        md = factory.metadata  # a read-only store refuses the metadata write below
        lid = md.generate_ledger_id()
        lmd = LedgerMetadataFormat(
            quorumSize=write_quorum_size,
            ensembleSize=ensemble_size,
            ackQuorumSize=ack_quorum_size,
            length=0,
            state=LedgerMetadataFormat.OPEN,
            digestType=digest_type_value(digest_type),
            password=bytes(password),
            ctime=factory.clock(),
            cToken=0,
        )
        seg = lmd.segment.add()
        seg.ensembleMember.append(factory.bookie.bookie_id)
        seg.firstEntryId = 0
        for k, v in custom_metadata.items():
            e = lmd.customMetadata.add()
            e.key, e.value = k, bytes(v)
        md.put_ledger_metadata(lid, lmd, expected_version=-1)
        factory.bookie.create_ledger(lid, master_key(password))
        return cls(factory, lid, digest_type, password, writable=True)

    @classmethod
    def open(cls, factory: ManagedLedgerFactory, ledger_id: int) -> LedgerHandle:
        """An existing ledger, read-only (its digest type and password from its metadata)."""
        lmd, _ = factory.metadata.ledger_metadata(ledger_id)
        try:
            digest = digest_type_name(lmd.digestType)
        except BookieError:
            digest = "CRC32C"
        return cls(factory, ledger_id, digest, lmd.password, writable=False)

    def add_entry(self, data: bytes) -> int:
        """Appends one entry; returns its entry id."""
        if not self._writable:
            raise ManagedLedgerClosedError(f"ledger {self.ledger_id} is closed")
        eid = self._entries
        self._length += len(data)
        self.factory.bookie.add_entry(
            pack_entry(
                self.ledger_id,
                eid,
                bytes(data),
                last_add_confirmed=eid - 1,
                length=self._length,
                digest_type=self.digest_type,
                password=self.password,
            )
        )
        self._entries += 1
        return eid

    def close(self) -> None:
        """Makes the entries durable, then marks the ledger CLOSED at its last entry."""
        if not self._writable:
            return
        self.factory.bookie.flush()
        md = self.factory.metadata
        lmd, stat = md.ledger_metadata(self.ledger_id)
        lmd.state = LedgerMetadataFormat.CLOSED
        lmd.lastEntryId = self._entries - 1
        lmd.length = self._length
        md.put_ledger_metadata(self.ledger_id, lmd, expected_version=stat.version)
        self._writable = False

    @property
    def last_entry_id(self) -> int:
        return self._entries - 1

    @property
    def custom_metadata(self) -> dict[str, bytes]:
        lmd, _ = self.factory.metadata.ledger_metadata(self.ledger_id)
        return {e.key: bytes(e.value) for e in lmd.customMetadata}

    def read_entry(self, entry_id: int) -> bytes:
        stored = self.factory.bookie.read_entry(self.ledger_id, entry_id)
        return unpack_entry(
            stored, self.digest_type, self.password, verify=True, ledger_id=self.ledger_id, entry_id=entry_id
        ).payload

    def entries(self, first: int = 0, last: int | None = None) -> Iterator[tuple[int, bytes]]:
        """``(entry id, bytes)`` from ``first`` to ``last`` (default: the last entry), inclusive."""
        end = self.last_entry_id if last is None else min(last, self.last_entry_id)
        for eid in range(max(first, 0), end + 1):
            yield eid, self.read_entry(eid)


__all__ = ["LedgerHandle"]
