"""Entry heads: an entry's Pulsar bytes up to the end of its MessageMetadata, read at its location
without its payload (what the metadata pass decodes)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from .. import _native
from ..bookkeeper.entrylog import EntryLogReader
from ..errors import PulsarkitError
from .partition import ReadStats

#: Bytes first read at an entry's location while no head was seen: the length field, the bookie
#: header and digest, broker entry metadata, Pulsar's magic, checksum and metadata size and a small
#: MessageMetadata fit; after that each read asks for the size of the last head of its ledger (or of
#: any ledger) and some slack, and reads the rest when the metadata declares more.
HEAD_GUESS = 256
_HEAD_SLACK = 24
#: A head read costs about as much time as the native pass takes over this many bytes of entry logs
#: (measured warm: ~10 us for a positioned read and its share of a decode call, against several GB/s
#: for the pass over mapped files): ``auto`` reads heads when the selected entries times this are
#: fewer than the entry logs' bytes, i.e. when they are a small part of the directory or large.
HEAD_COST_BYTES = 16 << 10


def read_heads(
    reader: EntryLogReader, wants: Sequence[tuple[int, int, int, int | None]], stats: ReadStats
) -> list[bytes | None]:
    """The head of each entry ``(ledger, entry, location, digest length or None: unknown)``: its Pulsar
    entry up to the end of its MessageMetadata (broker entry metadata included), what
    :func:`pulsarkit.bulk.decode_metadata` needs, without its payload. Read with ``os.pread`` from the
    entry log at the location (``log_id << 32 | offset of the record's data``, the 4-byte big-endian
    record length just before it), in location order; None when the record there is not that entry
    or not a Pulsar entry (the caller reads such an entry whole). The digest is not verified: a
    transactional entry's head decides nothing until the entry is read whole and verified
    (:func:`pulsarkit.scan.facts.topic_facts`)."""
    out: list[bytes | None] = [None] * len(wants)
    fds: dict[int, int] = {}
    guess: dict[int, int] = {}  # per ledger: its last head's size and some slack
    last = HEAD_GUESS  # any ledger's, for a ledger's first head
    try:
        for i in sorted(range(len(wants)), key=lambda i: wants[i][2]):
            lid, eid, loc, dlen = wants[i]
            log_id, off = loc >> 32, (loc & 0xFFFFFFFF) - 4
            try:
                fd = fds.get(log_id)
                if fd is None:
                    fd = fds[log_id] = os.open(reader.path_of(log_id), os.O_RDONLY)
                buf = os.pread(fd, guess.get(lid, last), off)
                stats.head_reads += 1
                stats.head_bytes += len(buf)
            except (OSError, PulsarkitError):
                continue
            # the record's ids, digest length and head are checked by the core (untrusted bytes)
            head = _native.record_head(buf, lid, eid, dlen)
            while head is not None and head[0] < 0:  # the head goes on past what was read
                more = os.pread(fd, head[1] - len(buf) + _HEAD_SLACK, off + len(buf))
                stats.head_bytes += len(more)
                if not more:
                    head = None
                    break
                buf += more
                head = _native.record_head(buf, lid, eid, head[2])
            if head is None:
                continue
            start, end, _ = head
            guess[lid] = last = min(end + _HEAD_SLACK, 1 << 20)
            out[i] = buf[start:end]
    finally:
        for fd in fds.values():
            os.close(fd)
    return out
