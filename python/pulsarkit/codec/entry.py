"""Entries and messages: parse what a bookie stores (or a SEND carries), encode what a producer sends."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from google.protobuf.message import DecodeError
from google.protobuf.message import Message as _PbMessage

from .. import _native
from ..errors import CorruptEntryError, EncryptedMessageError, LimitExceededError, PulsarkitError
from ..proto import MessageMetadata, SingleMessageMetadata
from .txn import MARKER_TYPES

Buffer = Union[bytes, bytearray, memoryview]

#: Default ceiling on one decompressed payload: Pulsar's 5 MiB max message size plus 10 KiB frame padding.
DEFAULT_DECOMPRESSION_LIMIT: int = _native.DEFAULT_DECOMPRESSION_LIMIT

COMPRESSION_TYPES = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")


@dataclass(frozen=True, slots=True)
class BrokerEntryMetadata:
    """PIP-70 broker entry metadata. Each field is None when the broker did not set it."""

    broker_timestamp: int | None = None
    index: int | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """One message as a Pulsar consumer receives it (batches already split, payload decompressed)."""

    payload: bytes
    key: str | None = None
    ordering_key: bytes | None = None
    properties: dict[str, str] = field(default_factory=dict)
    event_time: int | None = None
    publish_time: int = 0
    producer_name: str = ""
    sequence_id: int = 0
    batch_index: int = -1
    batch_size: int = 0
    null_value: bool = False
    compacted_out: bool = False
    partition_key_b64_encoded: bool = False
    null_partition_key: bool = False
    #: The broker's index of this message (PIP-70, ``index - batch_size + batch_index + 1``), if recorded.
    index: int | None = None
    #: The broker timestamp of the entry holding this message, if recorded.
    broker_timestamp: int | None = None
    #: The entry is end-to-end encrypted: ``payload`` is the ciphertext as stored (compressed after
    #: decryption, a whole batch when ``batch_size``), handed over only on request (``ciphertext=True``).
    encrypted: bool = False
    #: The names of the data key's encryptions (``EncryptionKeys.key``) and the algorithm, when encrypted.
    encryption_keys: tuple[str, ...] = ()
    encryption_algo: str | None = None


def compression_name(code: int) -> str:
    """The name of a ``MessageMetadata.compression`` code (one pulsarkit does not know: its number)."""
    return COMPRESSION_TYPES[code] if code < 5 else str(code)


def metadata_message(md: Any, payload: bytes, **extra: Any) -> Message:
    """A message whose fields are its entry's own ``MessageMetadata`` (a message that is not a batch's:
    an encrypted entry handed over whole, a chunked message from its first chunk); ``extra`` adds the
    rest (batch size, broker entry metadata, encryption)."""
    return Message(
        payload=payload,
        key=md.partition_key if md.HasField("partition_key") else None,
        ordering_key=md.ordering_key if md.HasField("ordering_key") else None,
        properties={kv.key: kv.value for kv in md.properties},
        event_time=md.event_time or None,
        publish_time=md.publish_time,
        producer_name=md.producer_name,
        sequence_id=md.sequence_id,
        null_value=md.null_value,
        partition_key_b64_encoded=md.partition_key_b64_encoded,
        **extra,
    )


class Entry:
    """A stored Pulsar entry: ``[broker entry metadata][checksum][metadata size][MessageMetadata][payload]``.

    Use :meth:`parse`. ``payload`` is the raw payload as stored (compressed, and a whole batch for
    batched entries); :meth:`messages` decodes it.
    """

    __slots__ = (
        "_data",
        "_headers_start",
        "_md_start",
        "_payload_start",
        "broker_entry_metadata",
        "checksum",
        "metadata",
    )
    # The slots' types (annotations only: no class attribute shadows a slot).
    _data: bytes
    _headers_start: int
    _md_start: int
    _payload_start: int
    broker_entry_metadata: BrokerEntryMetadata | None
    checksum: int | None
    #: The entry's ``MessageMetadata`` (a protobuf message: :mod:`pulsarkit.proto`).
    metadata: Any

    def __init__(self) -> None:  # use Entry.parse
        raise TypeError("use Entry.parse(data)")

    @classmethod
    def parse(cls, data: Buffer, verify_checksum: bool = True) -> Entry:
        """Parses entry bytes. Raises :class:`ChecksumMismatchError` when ``verify_checksum`` and the
        stored CRC32C does not match, and :class:`CorruptEntryError` (with ``offset``) for bad framing."""
        raw = bytes(data)
        lay = _native.parse_entry_layout(raw, verify_checksum)
        md_start, md_end, payload_start, has_bem = (
            lay.metadata_start,
            lay.metadata_end,
            lay.payload_start,
            lay.has_broker_entry_metadata,
        )
        self = object.__new__(cls)
        self._data = raw
        self.broker_entry_metadata = BrokerEntryMetadata(lay.broker_timestamp, lay.index) if has_bem else None
        self.checksum = lay.checksum
        md = MessageMetadata()
        try:
            md.ParseFromString(raw[md_start:md_end])
        except DecodeError as e:  # the native scan accepted it, so this is protobuf-level detail
            err = CorruptEntryError(f"corrupt input at offset {md_start}: invalid MessageMetadata: {e}")
            err.offset = md_start  # every CorruptEntryError carries one
            raise err from e
        _check_strings(md, md_start)
        self.metadata = md
        self._md_start = md_start
        self._payload_start = payload_start
        self._headers_start = 0 if not has_bem else _headers_start(raw)
        return self

    @property
    def data(self) -> bytes:
        """The entry bytes exactly as given."""
        return self._data

    @property
    def headers_and_payload(self) -> bytes:
        """The entry without broker entry metadata: what a producer sent."""
        return self._data[self._headers_start :]

    @property
    def payload(self) -> bytes:
        """The payload as stored (compressed; a whole batch for batched entries)."""
        return self._data[self._payload_start :]

    @property
    def is_batch(self) -> bool:
        """True when ``num_messages_in_batch`` (field 11) is present, even with value 1."""
        return self.metadata.HasField("num_messages_in_batch")

    @property
    def is_marker(self) -> bool:
        """A marker the broker wrote (transaction commit/abort, replicated-subscription snapshot...): not a
        message a consumer receives. Any entry with the field, as ``Markers.isServerOnlyMarker`` (the
        dispatcher drops it whatever its value)."""
        return self.metadata.HasField("marker_type")

    @property
    def marker(self) -> str | None:
        """The marker's type name (``TXN_COMMIT``...), None for a message."""
        t = self.metadata.marker_type
        return MARKER_TYPES.get(t, str(t)) if self.is_marker else None

    @property
    def is_chunk(self) -> bool:
        """One chunk of a message split over several entries (``uuid`` and ``num_chunks_from_msg > 1``)."""
        md = self.metadata
        return bool(md.HasField("uuid") and md.HasField("num_chunks_from_msg") and md.num_chunks_from_msg > 1)

    @property
    def txn_id(self) -> tuple[int, int] | None:
        """``(most_bits, least_bits)`` of the transaction the entry belongs to, or None."""
        md = self.metadata
        if md.HasField("txnid_most_bits") or md.HasField("txnid_least_bits"):
            return (md.txnid_most_bits, md.txnid_least_bits)
        return None

    @property
    def num_messages(self) -> int:
        return self.metadata.num_messages_in_batch if self.is_batch else 1

    @property
    def compression(self) -> str:
        return compression_name(self.metadata.compression)

    @property
    def entry_timestamp(self) -> int:
        """Broker timestamp when present, else publish time (``Entry.getEntryTimestamp``)."""
        b = self.broker_entry_metadata
        if b is not None and b.broker_timestamp is not None:
            return b.broker_timestamp
        return self.metadata.publish_time

    @property
    def is_encrypted(self) -> bool:
        """True when the payload is end-to-end encrypted (``encryption_keys`` present)."""
        return len(self.metadata.encryption_keys) > 0

    def messages(
        self,
        include_compacted_out: bool = False,
        max_uncompressed_size: int = DEFAULT_DECOMPRESSION_LIMIT,
        ciphertext: bool = False,
    ) -> list[Message]:
        """The messages a consumer would receive, in batch order.

        An encrypted entry cannot be decompressed or split without its key: by default it raises
        :class:`EncryptedMessageError` (ciphertext never passes for a message's clear text); with
        ``ciphertext=True`` it is one message flagged ``encrypted``, its payload the stored ciphertext,
        which is what a Java consumer whose crypto failure action is CONSUME receives."""
        md = self.metadata
        if self.is_encrypted:
            return [self._encrypted_message(ciphertext)]
        records = _native.entry_messages(self._data, include_compacted_out, False, max_uncompressed_size)
        batch_size = md.num_messages_in_batch if self.is_batch else 0
        bem = self.broker_entry_metadata
        ts = bem.broker_timestamp if bem else None
        out = []
        for r in records:
            out.append(
                Message(
                    payload=r.payload,
                    key=r.key,
                    ordering_key=r.ordering_key,
                    properties=r.properties,
                    event_time=r.event_time,
                    publish_time=md.publish_time,
                    producer_name=md.producer_name,
                    sequence_id=r.sequence_id,
                    batch_index=r.batch_index,
                    batch_size=batch_size,
                    null_value=r.null_value,
                    compacted_out=r.compacted_out,
                    partition_key_b64_encoded=r.partition_key_b64_encoded,
                    null_partition_key=r.null_partition_key,
                    index=r.index,  # PIP-70, computed in the core (wrapping like Java's long)
                    broker_timestamp=ts,
                )
            )
        return out

    def _encrypted_message(self, ciphertext: bool) -> Message:
        md = self.metadata
        keys = tuple(k.key for k in md.encryption_keys)
        algo = md.encryption_algo if md.HasField("encryption_algo") else None
        if not ciphertext:
            raise EncryptedMessageError(
                f"the entry is encrypted (keys {list(keys)}, algorithm {algo or 'unnamed'}): its payload cannot be "
                "read without the private key; pass ciphertext=True for the encrypted payload, flagged"
            )
        bem = self.broker_entry_metadata
        return metadata_message(
            md,
            self.payload,
            batch_size=md.num_messages_in_batch if self.is_batch else 0,
            index=bem.index if bem else None,
            broker_timestamp=bem.broker_timestamp if bem else None,
            encrypted=True,
            encryption_keys=keys,
            encryption_algo=algo,
        )

    def __repr__(self) -> str:
        md = self.metadata
        return (
            f"Entry(producer_name={md.producer_name!r}, sequence_id={md.sequence_id}, publish_time={md.publish_time}, "
            f"num_messages={self.num_messages}, compression={self.compression}, size={len(self._data)}, "
            f"broker_entry_metadata={self.broker_entry_metadata})"
        )


_STRING_FIELDS = ("producer_name", "replicated_from", "partition_key", "encryption_algo", "uuid")


def _check_strings(md: Any, offset: int) -> None:
    """Python's protobuf hands invalid UTF-8 in proto2 strings back as bytes; Pulsar rejects them."""
    bad = [f for f in _STRING_FIELDS if isinstance(getattr(md, f), bytes)]
    bad += ["replicate_to" for v in md.replicate_to if isinstance(v, bytes)]
    bad += ["properties" for kv in md.properties if isinstance(kv.key, bytes) or isinstance(kv.value, bytes)]
    if bad:
        err = CorruptEntryError(
            f"corrupt input at offset {offset}: MessageMetadata {', '.join(sorted(set(bad)))} is not valid UTF-8"
        )
        err.offset = offset
        raise err


def _headers_start(raw: bytes) -> int:
    return 6 + int.from_bytes(raw[2:6], "big")


def _as_metadata(metadata: Any) -> Any:
    if isinstance(metadata, _PbMessage):
        md = MessageMetadata()
        md.CopyFrom(metadata)
        return md
    if isinstance(metadata, Mapping):
        md = MessageMetadata()
        for k, v in metadata.items():
            if k == "properties":
                _set_properties(md, v)
            elif k == "compression" and isinstance(v, str):
                md.compression = COMPRESSION_TYPES.index(v.upper())
            else:
                setattr(md, k, v)
        return md
    raise TypeError(f"metadata must be a MessageMetadata or a mapping, got {type(metadata).__name__}")


def _set_properties(md: Any, props: Any) -> None:
    del md.properties[:]
    items = props.items() if isinstance(props, Mapping) else props
    for k, v in items:
        kv = md.properties.add()
        kv.key, kv.value = k, v


def _require(md: Any) -> None:
    if not md.IsInitialized():
        raise PulsarkitError(f"MessageMetadata lacks required field(s): {', '.join(md.FindInitializationErrors())}")


def message_metadata(producer_name: str, sequence_id: int, publish_time: int | None = None, **fields: Any) -> Any:
    """Builds a MessageMetadata; ``publish_time`` defaults to now (ms). ``properties`` may be a dict."""
    d = {
        "producer_name": producer_name,
        "sequence_id": sequence_id,
        "publish_time": publish_time or int(time.time() * 1000),
    }
    d.update(fields)
    return _as_metadata(d)


def encode_entry(metadata: Any, payload: Buffer, checksum: bool = True, compression: str | None = None) -> bytes:
    """Encodes a single (non-batched) message as ``[0x0e01][crc32c][size][metadata][payload]``.

    With ``compression`` the payload is compressed and ``compression``/``uncompressed_size`` set, as
    the producer does; without it the metadata is written as given, except that a missing
    ``uncompressed_size`` is filled in with the payload length.
    """
    md = _as_metadata(metadata)
    _require(md)
    if compression is not None:
        return _native.encode_single(md.SerializeToString(), payload, compression, checksum)
    if not md.HasField("uncompressed_size") and md.compression == 0:
        md.uncompressed_size = len(payload)
    return _native.encode_metadata_and_payload(md.SerializeToString(), payload, checksum)


MessageLike = Union[Buffer, Mapping[str, Any], Message]


def _single_metadata(m: MessageLike, default_seq: int) -> tuple[bytes, Buffer]:
    smm = SingleMessageMetadata()
    if isinstance(m, (bytes, bytearray, memoryview)):
        if not 0 <= default_seq < 1 << 64:
            raise PulsarkitError(f"sequence id {default_seq} does not fit an unsigned 64-bit integer")
        smm.sequence_id = default_seq
        smm.payload_size = len(m)
        return smm.SerializeToString(), m
    if isinstance(m, Message):
        m = {
            "payload": m.payload,
            "key": m.key,
            "ordering_key": m.ordering_key,
            "properties": m.properties,
            "event_time": m.event_time,
            "sequence_id": m.sequence_id,
            "null_value": m.null_value,
            "compacted_out": m.compacted_out,
            "partition_key_b64_encoded": m.partition_key_b64_encoded,
            "null_partition_key": m.null_partition_key,
        }
    payload = m.get("payload", b"")
    if m.get("key") is not None:
        smm.partition_key = m["key"]
    if m.get("ordering_key") is not None:
        smm.ordering_key = m["ordering_key"]
    for k, v in (m.get("properties") or {}).items():
        kv = smm.properties.add()
        kv.key, kv.value = k, v
    if m.get("event_time"):
        smm.event_time = m["event_time"]
    seq = m["sequence_id"] if m.get("sequence_id") is not None else default_seq
    if not 0 <= seq < 1 << 64:
        raise PulsarkitError(f"sequence id {seq} does not fit an unsigned 64-bit integer")
    smm.sequence_id = seq
    for flag in ("null_value", "compacted_out", "partition_key_b64_encoded", "null_partition_key"):
        if m.get(flag):
            setattr(smm, flag, True)
    smm.payload_size = len(payload)
    return smm.SerializeToString(), payload


def encode_batch(
    metadata: Any, messages: Iterable[MessageLike], compression: str = "NONE", checksum: bool = True
) -> bytes:
    """Encodes a batch entry exactly as a Pulsar producer does.

    ``messages`` are bytes payloads, :class:`Message` objects or dicts with ``payload`` and optionally
    ``key``, ``ordering_key``, ``properties``, ``event_time``, ``sequence_id``, ``null_value``,
    ``compacted_out``. Missing sequence ids count up from the metadata's ``sequence_id``;
    ``highest_sequence_id`` is set to the last one unless given.
    """
    md = _as_metadata(metadata)
    _require(md)
    pairs: list[tuple[Buffer, Buffer]] = [_single_metadata(m, md.sequence_id + i) for i, m in enumerate(messages)]
    if not pairs:
        raise PulsarkitError("a batch needs at least one message")
    if not md.HasField("highest_sequence_id"):
        seqs = []
        for smm_bytes, _ in pairs:
            s = SingleMessageMetadata()
            s.ParseFromString(smm_bytes)
            seqs.append(s.sequence_id)
        md.highest_sequence_id = max(seqs)
    return _native.encode_batch(md.SerializeToString(), pairs, compression, checksum)


def add_broker_entry_metadata(data: Buffer, broker_timestamp: int | None = None, index: int | None = None) -> bytes:
    """Prepends ``[0x0e02][size][BrokerEntryMetadata]`` (PIP-70). Refuses entries that already have it."""
    return _native.add_broker_entry_metadata(data, broker_timestamp, index)


def peek_broker_entry_metadata(data: Buffer) -> BrokerEntryMetadata | None:
    """The broker entry metadata of an entry, or None. Does not parse MessageMetadata."""
    r = _native.peek_broker_entry_metadata(data)
    return None if r is None else BrokerEntryMetadata(*r)


def strip_broker_entry_metadata(data: Buffer) -> bytes:
    """The entry without broker entry metadata (unchanged if it has none)."""
    return _native.strip_broker_entry_metadata(data)


def compress(codec: str, data: Buffer) -> bytes:
    """Compresses as Pulsar's codec does (LZ4 raw block, zlib stream, zstd frame, raw snappy)."""
    return _native.compress(codec, data)


def decompress(codec: str, data: Buffer, uncompressed_size: int, limit: int = DEFAULT_DECOMPRESSION_LIMIT) -> bytes:
    """Decompresses to exactly ``uncompressed_size`` bytes; sizes above ``limit`` are refused."""
    # Checked here so that a negative or oversized integer is a typed error, not the OverflowError
    # of the conversion to the core's unsigned sizes.
    if not 0 <= limit < 1 << 63:
        raise LimitExceededError(f"decompression limit must be between 0 and 2^63-1, got {limit}")
    if not 0 <= uncompressed_size <= limit:
        raise LimitExceededError(
            f"declared uncompressed size {uncompressed_size} is outside 0..{limit} (the decompression limit)"
        )
    return _native.decompress(codec, data, uncompressed_size, limit)


#: ``crc32c(data, crc=0) -> int``: CRC-32C (Castagnoli). A non-zero ``crc`` resumes it:
#: ``crc32c(b, crc32c(a)) == crc32c(a + b)``. Bound directly to the native function: a Python
#: wrapper frame would cost more than the CRC of a small buffer.
crc32c = _native.crc32c
