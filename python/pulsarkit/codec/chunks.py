"""Reassembly of chunked messages, as Pulsar's consumer does it (``ConsumerImpl.processMessageChunk``)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import _native
from ..errors import CorruptEntryError
from .entry import DEFAULT_DECOMPRESSION_LIMIT, Entry, Message, compression_name, metadata_message


@dataclass
class _Ctx:
    total_chunks: int
    total_size: int
    buffer: bytearray
    first: Entry
    last_chunk_id: int = -1
    chunk_ids: list[Any] = field(default_factory=list)
    received_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class ChunkedMessage:
    """A reassembled message and the ids of the chunks it came from (first..last)."""

    message: Message
    chunk_message_ids: list[Any]
    uuid: str


class ChunkAssembler:
    """Reassembles chunked messages by ``uuid`` and ``chunk_id``.

    - chunk 0 opens a context sized ``total_chunk_msg_size``; each next chunk must be ``last + 1``;
    - a repeated chunk (id ≤ last) is a duplicate: counted and dropped, the context is kept;
    - a gap (or a chunk with no context) discards the context: counted in ``discarded``;
    - a new chunk 0 for an open uuid restarts it (the producer resent the whole message);
    - more than ``max_pending_chunked_messages`` open contexts evicts the oldest;
    - contexts idle for ``expire_incomplete_after_ms`` are dropped by :meth:`expire`;
    - after the last chunk the concatenation is decompressed once with the chunk metadata's codec (an
      encrypted message's is left as it is: the ciphertext a consumer without its key gets).
    """

    def __init__(
        self,
        max_pending_chunked_messages: int = 10,
        expire_incomplete_after_ms: int = 60_000,
        max_uncompressed_size: int = DEFAULT_DECOMPRESSION_LIMIT,
        clock: Callable[[], float] = lambda: time.monotonic() * 1000,
    ) -> None:
        self.max_pending = max_pending_chunked_messages
        self.expire_after_ms = expire_incomplete_after_ms
        self.max_uncompressed_size = max_uncompressed_size
        self._clock = clock
        self._ctx: OrderedDict[str, _Ctx] = OrderedDict()
        self.duplicates = 0
        self.discarded: list[tuple[str, str]] = []  # (uuid, reason)

    @property
    def pending(self) -> list[str]:
        """uuids of messages still being assembled, oldest first."""
        return list(self._ctx)

    def add(self, entry: Entry | bytes, message_id: Any = None) -> ChunkedMessage | None:
        """Adds one chunk; returns the whole message once its last chunk arrives."""
        e = entry if isinstance(entry, Entry) else Entry.parse(entry)
        md = e.metadata
        if not md.HasField("uuid") or not md.HasField("num_chunks_from_msg"):
            raise CorruptEntryError("not a chunk: MessageMetadata has no uuid/num_chunks_from_msg")
        uuid, cid, n, total = md.uuid, md.chunk_id, md.num_chunks_from_msg, md.total_chunk_msg_size
        if n <= 0 or total < 0 or not 0 <= cid < n:
            raise CorruptEntryError(f"chunk {cid} of {n} with total size {total} for uuid {uuid!r} is inconsistent")
        now = self._clock()
        ctx = self._ctx.get(uuid)
        if cid == 0:
            if ctx is not None:
                self._drop(uuid, "restarted by a new first chunk")
            if total > self.max_uncompressed_size:
                self.discarded.append((uuid, f"total_chunk_msg_size {total} exceeds the limit"))
                return None
            ctx = _Ctx(n, total, bytearray(), e, received_ms=now)
            self._ctx[uuid] = ctx
            while self.max_pending > 0 and len(self._ctx) > self.max_pending:
                oldest = next(iter(self._ctx))
                self._drop(oldest, "evicted: too many pending chunked messages")
        elif ctx is None:
            self.discarded.append((uuid, f"chunk {cid} arrived without chunk 0"))
            return None
        elif cid <= ctx.last_chunk_id:
            self.duplicates += 1
            return None
        elif cid != ctx.last_chunk_id + 1:
            self._drop(uuid, f"gap: chunk {cid} after {ctx.last_chunk_id}")
            return None
        if len(ctx.buffer) + len(e.payload) > ctx.total_size:
            self._drop(uuid, f"chunks exceed total_chunk_msg_size {ctx.total_size}")
            return None
        ctx.buffer += e.payload
        ctx.last_chunk_id = cid
        ctx.chunk_ids.append(message_id)
        ctx.received_ms = now
        if cid != n - 1:
            return None
        del self._ctx[uuid]
        if e.is_encrypted:
            # ConsumerImpl joins an undecryptable message's chunks too (CONSUME): the ciphertext, still
            # compressed, since decompression comes after decryption
            payload = bytes(ctx.buffer)
        else:
            codec = compression_name(md.compression)
            payload = _native.decompress(codec, bytes(ctx.buffer), md.uncompressed_size, self.max_uncompressed_size)
        return ChunkedMessage(metadata_message(ctx.first.metadata, payload), ctx.chunk_ids, uuid)

    def expire(self) -> list[str]:
        """Drops contexts idle longer than ``expire_incomplete_after_ms``; returns their uuids."""
        if self.expire_after_ms <= 0:
            return []
        now = self._clock()
        gone = [u for u, c in self._ctx.items() if now - c.received_ms > self.expire_after_ms]
        for u in gone:
            self._drop(u, "expired incomplete")
        return gone

    def _drop(self, uuid: str, reason: str) -> None:
        self._ctx.pop(uuid, None)
        self.discarded.append((uuid, reason))
