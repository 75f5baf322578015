"""Pulsar's metadata store, embedded: RocksDB keyed by Pulsar's metadata paths.

The on-disk layout is the one Pulsar standalone's ``RocksdbMetadataStore`` uses (``--metadata-dir``),
so a real standalone's metadata directory opens here and ours opens there:

* keys are UTF-8 paths (``/managed-ledgers/public/default/persistent/orders``,
  ``/ledgers/00/0000/L0005``), bytewise-ordered, no parent nodes required;
* each value is ``[int32 41][int32 1][int64 version][int64 owner][int64 ctime][int64 mtime]
  [byte ephemeral]`` (big-endian) followed by the node's data;
* ``__metadata_instanceId_key`` and ``__metadata_sequentialId_key`` hold 8-byte big-endian counters;
  ledger ids come from the sequential counter, as with Pulsar's ``PulsarLedgerIdGenerator``.

The data under each path is Pulsar's and BookKeeper's own encoding: ``ManagedLedgerInfo`` and
``ManagedCursorInfo`` (binary protobuf, optionally compressed behind the 0x4778/0x4779 magics), and
BookKeeper ``LedgerMetadata`` serialized as format version 3.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from ..bookkeeper import key_value_storage
from ..codec.entry import decompress
from ..codec.protobuf_wire import encode_varint, read_varint
from ..errors import (
    BadVersionError,
    LedgerNotFoundError,
    MetadataNotFoundError,
    MetadataStoreError,
    PulsarkitError,
)
from ..proto import (
    LedgerMetadataFormat,
    ManagedCursorInfo,
    ManagedCursorInfoMetadata,
    ManagedLedgerInfo,
    ManagedLedgerInfoMetadata,
)

_HEADER = struct.Struct(">iiqqqqb")
HEADER_SIZE = _HEADER.size  # 41
FORMAT_VERSION_V1 = 1
SEQUENTIAL_ID_KEY = b"__metadata_sequentialId_key"
INSTANCE_ID_KEY = b"__metadata_instanceId_key"

MANAGED_LEDGERS_ROOT = "/managed-ledgers"
LEDGERS_ROOT = "/ledgers"
_IDGEN_SHORT = LEDGERS_ROOT + "/idgen"
_IDGEN_LONG = LEDGERS_ROOT + "/idgen-long"
_INT_MAX = 2**31 - 1

LEDGER_METADATA_HEADER = "BookieMetadataFormatVersion"
LEDGER_METADATA_V3 = b"BookieMetadataFormatVersion\t3\n"
_MAGIC_ML_INFO = 0x4778
_MAGIC_CURSOR_INFO = 0x4779
_CODECS = {0: "NONE", 1: "LZ4", 2: "ZLIB", 3: "ZSTD", 4: "SNAPPY"}


class Stat(NamedTuple):
    """Node stat, as Pulsar's metadata API reports it."""

    path: str
    version: int
    creation_timestamp: int
    modification_timestamp: int
    ephemeral: bool
    owner: int


def _now_ms() -> int:
    return int(time.time() * 1000)


#: The cluster's instance id, written when BookKeeper's metadata is formatted; each bookie's cookie names it.
INSTANCE_ID_PATH = LEDGERS_ROOT + "/INSTANCEID"


def parse_instance_id(data: bytes | None) -> str | None:
    """The instance id a ``/ledgers/INSTANCEID`` node holds (text, compared with a cookie's ``instanceId``)."""
    text = data.decode("utf-8", "replace").strip() if data else ""
    return text or None


def encode_meta_value(data: bytes, version: int, owner: int, ctime: int, mtime: int, ephemeral: bool = False) -> bytes:
    """A value as RocksdbMetadataStore stores it: the 41-byte header, then the data."""
    return _HEADER.pack(HEADER_SIZE, FORMAT_VERSION_V1, version, owner, ctime, mtime, 1 if ephemeral else 0) + bytes(
        data
    )


def decode_meta_value(raw: bytes, path: str = "?") -> tuple[bytes, int, int, int, int, bool]:
    """``(data, version, owner, ctime, mtime, ephemeral)`` from a stored value; typed error if malformed."""
    if len(raw) < 4:
        raise MetadataStoreError(f"metadata value at {path!r} is {len(raw)} bytes, shorter than its header size field")
    header_size = struct.unpack_from(">i", raw)[0]
    if header_size < HEADER_SIZE or header_size > len(raw):
        raise MetadataStoreError(
            f"metadata value at {path!r}: header size {header_size} invalid for a {len(raw)}-byte value"
        )
    _, fmt, version, owner, ctime, mtime, eph = _HEADER.unpack_from(raw)
    if fmt < FORMAT_VERSION_V1:
        raise MetadataStoreError(f"metadata value at {path!r}: unknown format version {fmt}")
    return raw[header_size:], version, owner, ctime, mtime, eph > 0


# ------------------------------------------------------------------------------------------ paths


def ledger_path(ledger_id: int) -> str:
    """BookKeeper's hybrid hierarchical path of a ledger (``/ledgers/00/0000/L0005``)."""
    if ledger_id < 0:
        raise LedgerNotFoundError(f"invalid ledger id {ledger_id}")
    if ledger_id < _INT_MAX:
        s = f"{ledger_id:010d}"
        return f"{LEDGERS_ROOT}/{s[0:2]}/{s[2:6]}/L{s[6:10]}"
    s = f"{ledger_id:019d}"
    return f"{LEDGERS_ROOT}/{s[0:3]}/{s[3:7]}/{s[7:11]}/{s[11:15]}/L{s[15:19]}"


def ledger_id_from_path(path: str) -> int | None:
    """The ledger id of a ledger metadata path, or None for any other path."""
    if not path.startswith(LEDGERS_ROOT + "/"):
        return None
    parts = path[len(LEDGERS_ROOT) + 1 :].split("/")
    if len(parts) not in (3, 5) or not parts[-1].startswith("L"):
        return None
    parts[-1] = parts[-1][1:]
    widths = (2, 4, 4) if len(parts) == 3 else (3, 4, 4, 4, 4)
    if any(len(p) != w or not p.isdigit() for p, w in zip(parts, widths)):
        return None
    return int("".join(parts))


def managed_ledger_path(name: str) -> str:
    _check_name(name, "managed ledger")
    return f"{MANAGED_LEDGERS_ROOT}/{name}"


def cursor_path(ml_name: str, cursor: str) -> str:
    if not cursor or "/" in cursor:
        raise MetadataStoreError(f"invalid cursor name {cursor!r}")
    return f"{managed_ledger_path(ml_name)}/{cursor}"


def _check_name(name: str, what: str) -> None:
    if not name or name.startswith("/") or name.endswith("/") or "//" in name:
        raise MetadataStoreError(f"invalid {what} name {name!r}")


def _check_path(path: str) -> None:
    if not path.startswith("/") or (len(path) > 1 and path.endswith("/")) or "//" in path:
        raise MetadataStoreError(f"invalid metadata path {path!r}")


# -------------------------------------------------------------------------- value encodings


def serialize_ledger_metadata(md: Any) -> bytes:
    """BookKeeper's ``LedgerMetadataSerDe`` format version 3: header line, varint32 size, message."""
    body = md.SerializeToString()
    return LEDGER_METADATA_V3 + encode_varint(len(body)) + body


def parse_ledger_metadata(raw: bytes, ledger_id: int | None = None) -> Any:
    """Parses serialized ledger metadata (format v3 binary, or v2 text); typed error otherwise."""
    where = f"ledger {ledger_id}" if ledger_id is not None else "ledger metadata"
    nl = raw.find(b"\n")
    head = raw[:nl] if nl >= 0 else b""
    if nl < 0 or not head.startswith(LEDGER_METADATA_HEADER.encode() + b"\t"):
        raise MetadataStoreError(f"{where}: missing '{LEDGER_METADATA_HEADER}' header line")
    try:
        version = int(head.split(b"\t", 1)[1])
    except ValueError:
        raise MetadataStoreError(f"{where}: unreadable format version {head!r}") from None
    md = LedgerMetadataFormat()
    pos = nl + 1
    if version == 3:
        size, pos = _read_varint(raw, pos, where)
        if size > len(raw) - pos:
            raise MetadataStoreError(
                f"{where}: message size {size} exceeds the {len(raw) - pos} bytes left at offset {pos}"
            )
        try:
            md.ParseFromString(raw[pos : pos + size])
        except DecodeError as e:
            raise MetadataStoreError(f"{where}: bad LedgerMetadataFormat at offset {pos}: {e}") from None
    elif version == 2:
        try:
            text_format.Parse(raw[pos:].decode("utf-8"), md)
        except (text_format.ParseError, UnicodeDecodeError) as e:
            raise MetadataStoreError(f"{where}: bad v2 text metadata: {e}") from None
    else:
        raise MetadataStoreError(f"{where}: ledger metadata format version {version} is not supported (2 and 3 are)")
    if not md.IsInitialized():
        raise MetadataStoreError(f"{where}: required fields missing: {md.FindInitializationErrors()}")
    return md


def _read_varint(raw: bytes, pos: int, where: str) -> tuple[int, int]:
    try:
        return read_varint(raw, pos, max_bits=32)
    except PulsarkitError as e:
        raise MetadataStoreError(f"{where}: {e}") from None


def parse_managed_ledger_info(raw: bytes, name: str = "?") -> Any:
    """``ManagedLedgerInfo``, plain or behind the compression magic 0x4778, or in protobuf text format."""
    return _parse_maybe_compressed(
        raw, ManagedLedgerInfo, ManagedLedgerInfoMetadata, _MAGIC_ML_INFO, f"managed ledger {name}"
    )


def parse_managed_cursor_info(raw: bytes, name: str = "?") -> Any:
    """``ManagedCursorInfo``, plain or behind the compression magic 0x4779, or in protobuf text format."""
    return _parse_maybe_compressed(
        raw, ManagedCursorInfo, ManagedCursorInfoMetadata, _MAGIC_CURSOR_INFO, f"cursor {name}"
    )


def _parse_maybe_compressed(raw: bytes, cls: Any, meta_cls: Any, magic: int, where: str) -> Any:
    body = raw
    if len(raw) >= 6 and struct.unpack_from(">H", raw)[0] == magic:
        msize = struct.unpack_from(">i", raw, 2)[0]
        if msize < 0 or 6 + msize > len(raw):
            raise MetadataStoreError(f"{where}: compression header size {msize} exceeds the value at offset 2")
        meta = meta_cls()
        try:
            meta.ParseFromString(raw[6 : 6 + msize])
        except DecodeError as e:
            raise MetadataStoreError(f"{where}: bad compression header at offset 6: {e}") from None
        codec = _CODECS.get(meta.compressionType)
        if codec is None:
            raise MetadataStoreError(f"{where}: unknown compression type {meta.compressionType}")
        payload = raw[6 + msize :]
        body = payload if codec == "NONE" else decompress(codec, payload, meta.uncompressedSize)
    msg = cls()
    try:
        msg.ParseFromString(body)
        if msg.IsInitialized():
            return msg
        binary_error = f"required fields missing: {msg.FindInitializationErrors()}"
    except DecodeError as e:
        binary_error = str(e)
    if body is not raw:
        raise MetadataStoreError(f"{where}: bad {cls.DESCRIPTOR.name}: {binary_error}")
    # Older brokers stored the protobuf text format; Pulsar's meta store reads binary first and falls back
    # to text, and so does this.
    msg = cls()
    try:
        text_format.Parse(raw.decode("utf-8"), msg)
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise MetadataStoreError(
            f"{where}: bad {cls.DESCRIPTOR.name}: not binary ({binary_error}), not text format ({e})"
        ) from None
    if not msg.IsInitialized():
        raise MetadataStoreError(f"{where}: required fields missing: {msg.FindInitializationErrors()}")
    return msg


# ---------------------------------------------------------------------------------- the store


def _utf8(path: str) -> bytes:
    return path.encode("utf-8", "surrogatepass")


class StoreItems:
    """A RocksDB metadata store's key/value pairs, already read (a private copy, or a locked store's
    ``raw_items()``), as a :class:`~pulsarkit.metadata.reader.MetadataReader`. The store's own counters
    (keys not starting with ``/``) are left out; a value is decoded when read, so a damaged one raises
    :class:`MetadataStoreError` for its path alone. Ephemeral nodes are kept: a stopped standalone's
    sessions are gone, but what they held is still what the directory says."""

    def __init__(self, pairs: Iterable[tuple[bytes, bytes]], where: str = "metadata store") -> None:
        self.where = where
        self._raw: dict[str, bytes] = {}
        self._sequential: int | None = None
        for k, v in pairs:
            if k.startswith(b"/"):
                self._raw[k.decode("utf-8", "replace")] = v
            elif k == SEQUENTIAL_ID_KEY and len(v) == 8:
                self._sequential = struct.unpack(">q", v)[0]
        self._sorted = sorted(self._raw, key=_utf8)

    def next_sequential(self, parent: str) -> int | None:
        """The suffix the store gives its next sequential node (one counter for the whole store, whatever the
        parent), or None when the pairs hold no counter."""
        return self._sequential

    def get(self, path: str) -> tuple[bytes, Stat] | None:
        raw = self._raw.get(path)
        if raw is None:
            return None
        data, version, owner, ctime, mtime, eph = decode_meta_value(raw, path)
        return data, Stat(path, version, ctime, mtime, eph, owner)

    def exists(self, path: str) -> bool:
        return path in self._raw

    def children(self, path: str) -> list[str]:
        """Names of the direct children (implied by deeper paths, like Pulsar's store)."""
        first = path if path == "/" else path + "/"
        return sorted({k[len(first) :].split("/", 1)[0] for k in self.keys(first) if len(k) > len(first)})

    def keys(self, prefix: str = "/") -> Iterator[str]:
        for p in self._sorted:
            if p.startswith(prefix):
                yield p

    def __len__(self) -> int:
        return len(self._raw)


class MetadataStore:
    """An embedded Pulsar metadata store over RocksDB (``rocksdict``).

    ``read_only=True`` opens a *copy* of the database (rocksdict writes a config file into any DB
    directory it opens), so a live or foreign store is never modified. Writes are synced, as in
    Pulsar's store.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        read_only: bool = False,
        sync: bool = True,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.read_only = read_only
        self._clock = clock or _now_ms
        self._copy: key_value_storage.ReadOnlyCopy | None = None
        if read_only:
            if not os.path.isdir(self.path):
                raise MetadataStoreError(f"no RocksDB metadata store at {self.path}")
            self._copy = key_value_storage.ReadOnlyCopy(self.path, error=MetadataStoreError, what="metadata store")
            self._db = self._copy.db
        else:
            self._db = key_value_storage.open_writable(
                self.path, sync=sync, error=MetadataStoreError, what="metadata store"
            )
        self._closed = False
        prev = self._db.get(INSTANCE_ID_KEY)
        if read_only:
            self.instance_id = struct.unpack(">q", prev)[0] + 1 if prev else 0
        else:
            self.instance_id = struct.unpack(">q", prev)[0] + 1 if prev else 0
            self._db.put(INSTANCE_ID_KEY, struct.pack(">q", self.instance_id))
        seq = self._db.get(SEQUENTIAL_ID_KEY)
        self._sequential = struct.unpack(">q", seq)[0] if seq else 0

    @classmethod
    def open(cls, path: str | os.PathLike[str], read_only: bool = False, **kw: Any) -> MetadataStore:
        return cls(path, read_only=read_only, **kw)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._copy is not None:
                self._copy.close()
            else:
                self._db.close()

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _writable(self) -> None:
        if self._closed:
            raise MetadataStoreError("metadata store is closed")
        if self.read_only:
            raise MetadataStoreError(f"metadata store {self.path} was opened read-only")

    # -- raw node API (paths and bytes) -----------------------------------------------------

    def _load(self, path: str) -> tuple[bytes, Stat] | None:
        raw = self._db.get(path.encode())
        if raw is None:
            return None
        data, version, owner, ctime, mtime, eph = decode_meta_value(raw, path)
        if eph and owner != self.instance_id:
            return None  # an ephemeral node of a session that is gone
        return data, Stat(path, version, ctime, mtime, eph, owner)

    def get(self, path: str) -> tuple[bytes, Stat] | None:
        """``(data, stat)`` of a node, or None."""
        _check_path(path)
        if self._closed:
            raise MetadataStoreError("metadata store is closed")
        return self._load(path)

    def get_data(self, path: str) -> bytes:
        r = self.get(path)
        if r is None:
            raise MetadataNotFoundError(f"metadata path {path!r} not found")
        return r[0]

    def exists(self, path: str) -> bool:
        return self.get(path) is not None

    def put(self, path: str, data: bytes, expected_version: int | None = None, ephemeral: bool = False) -> Stat:
        """Creates or updates a node. ``expected_version=-1`` requires that it does not exist yet;
        another value requires that version (:class:`BadVersionError` otherwise)."""
        _check_path(path)
        self._writable()
        old = self._load(path)
        actual = None if old is None else old[1].version
        if expected_version is not None and actual != (None if expected_version == -1 else expected_version):
            raise BadVersionError(f"{path}: version mismatch, actual={actual}, expected={expected_version}")
        now = self._clock()
        if old is None:
            version, ctime = 0, now
        else:
            version, ctime, ephemeral = old[1].version + 1, old[1].creation_timestamp, old[1].ephemeral
        self._db.put(path.encode(), encode_meta_value(data, version, self.instance_id, ctime, now, ephemeral))
        return Stat(path, version, ctime, now, ephemeral, self.instance_id)

    def delete(self, path: str, expected_version: int | None = None) -> None:
        _check_path(path)
        self._writable()
        old = self._load(path)
        if old is None:
            raise MetadataNotFoundError(f"metadata path {path!r} not found")
        if expected_version is not None and old[1].version != expected_version:
            raise BadVersionError(f"{path}: version mismatch, actual={old[1].version}, expected={expected_version}")
        self._db.delete(path.encode())

    def raw_items(self) -> list[tuple[bytes, bytes]]:
        """Every stored key and value, in key order, read through this handle: a consistent view for
        a caller holding the store open (copying the directory meanwhile would race its compactions)."""
        out = []
        it = self._db.iter()
        it.seek_to_first()
        while it.valid():
            out.append((bytes(it.key()), bytes(it.value())))
            it.next()
        return out

    def raw_node(self, path: str) -> bytes | None:
        """A node exactly as stored (header included): what a backup keeps."""
        _check_path(path)
        raw = self._db.get(path.encode())
        return None if raw is None else bytes(raw)

    def restore_raw_node(self, path: str, raw: bytes) -> None:
        """Puts back a node saved with :meth:`raw_node`, never over an existing one."""
        _check_path(path)
        self._writable()
        decode_meta_value(raw, path)  # a damaged backup is refused, not written
        if self._db.get(path.encode()) is not None:
            raise MetadataStoreError(f"{path}: exists; a backup is never restored over a node")
        self._db.put(path.encode(), raw)

    def keys(self, prefix: str = "/") -> Iterator[str]:
        """All stored paths starting with ``prefix``, in key order."""
        start = prefix.encode()
        it = self._db.iter()
        it.seek(start)
        while it.valid():
            k = bytes(it.key())
            if not k.startswith(start):
                break
            yield k.decode("utf-8", "replace")
            it.next()

    def children(self, path: str) -> list[str]:
        """Names of the direct children of ``path`` (implied by deeper paths, like Pulsar's store)."""
        _check_path(path)
        first = path if path == "/" else path + "/"
        out = set()
        for k in self.keys(first):
            rest = k[len(first) :]
            if rest:
                out.add(rest.split("/", 1)[0])
        return sorted(out)

    # -- ledger ids and BookKeeper ledger metadata -------------------------------------------

    def generate_ledger_id(self) -> int:
        """Next ledger id from the store's sequential counter (what ``PulsarLedgerIdGenerator`` gets
        from its ephemeral-sequential ``/ledgers/idgen/ID-`` node, which it deletes at once)."""
        self._writable()
        if self._load(_IDGEN_SHORT) is None:
            self.put(_IDGEN_SHORT, b"")
        lid = self._sequential
        if lid >= _INT_MAX:
            raise MetadataStoreError("31-bit ledger ids exhausted; 63-bit id generation is not supported")
        self._sequential += 1
        self._db.put(SEQUENTIAL_ID_KEY, struct.pack(">q", self._sequential))
        return lid

    def ledger_metadata(self, ledger_id: int) -> tuple[Any, Stat]:
        """``(LedgerMetadataFormat, stat)``; :class:`LedgerNotFoundError` if absent."""
        r = self.get(ledger_path(ledger_id))
        if r is None:
            raise LedgerNotFoundError(f"ledger {ledger_id} has no metadata")
        return parse_ledger_metadata(r[0], ledger_id), r[1]

    def put_ledger_metadata(self, ledger_id: int, md: Any, expected_version: int | None = None) -> Stat:
        if not md.IsInitialized():
            raise MetadataStoreError(f"ledger {ledger_id}: metadata misses {md.FindInitializationErrors()}")
        return self.put(ledger_path(ledger_id), serialize_ledger_metadata(md), expected_version)

    def delete_ledger_metadata(self, ledger_id: int) -> None:
        try:
            self.delete(ledger_path(ledger_id))
        except MetadataNotFoundError:
            raise LedgerNotFoundError(f"ledger {ledger_id} has no metadata") from None

    def next_ledger_id(self) -> int | None:
        """The lowest ledger id the cluster's id generator has not issued yet: every ledger created so far has
        a smaller one (``PulsarLedgerIdGenerator``'s 31-bit ids are the suffixes of sequential nodes, taken
        from the store's counter). None once it has moved on to 63-bit ids (``/ledgers/idgen-long``)."""
        if self._load(_IDGEN_LONG) is not None:
            return None
        return self._sequential

    def cluster_instance_id(self) -> str | None:
        """``/ledgers/INSTANCEID``: the cluster every bookie's cookie names (``instanceId``), or None."""
        got = self.get(INSTANCE_ID_PATH)
        return parse_instance_id(got[0] if got is not None else None)

    def ledger_ids(self) -> list[int]:
        """Ids of all ledgers with metadata, ascending."""
        ids = [lid for k in self.keys(LEDGERS_ROOT + "/") if (lid := ledger_id_from_path(k)) is not None]
        return sorted(ids)

    # -- managed ledgers and cursors ----------------------------------------------------------

    def managed_ledger_info(self, name: str) -> tuple[Any, Stat] | None:
        r = self.get(managed_ledger_path(name))
        if r is None:
            return None
        return parse_managed_ledger_info(r[0], name), r[1]

    def put_managed_ledger_info(self, name: str, info: Any, expected_version: int | None = None) -> Stat:
        return self.put(managed_ledger_path(name), info.SerializeToString(), expected_version)

    def cursor_info(self, ml_name: str, cursor: str) -> tuple[Any, Stat] | None:
        r = self.get(cursor_path(ml_name, cursor))
        if r is None:
            return None
        return parse_managed_cursor_info(r[0], f"{ml_name}/{cursor}"), r[1]

    def put_cursor_info(self, ml_name: str, cursor: str, info: Any, expected_version: int | None = None) -> Stat:
        return self.put(cursor_path(ml_name, cursor), info.SerializeToString(), expected_version)

    def delete_cursor_info(self, ml_name: str, cursor: str) -> None:
        self.delete(cursor_path(ml_name, cursor))

    def cursor_names(self, ml_name: str) -> list[str]:
        return self.children(managed_ledger_path(ml_name))

    def managed_ledger_names(self) -> list[str]:
        """Names of the managed ledgers stored here. A node one level below another managed ledger's
        node is that ledger's cursor; Pulsar topic names (``tenant/ns/persistent/topic``) are
        recognised by their domain segment."""
        root = MANAGED_LEDGERS_ROOT + "/"
        paths = [k[len(root) :] for k in self.keys(root)]
        names: list[str] = []
        nodes = set(paths)
        domains = ("persistent", "non-persistent")
        for p in paths:
            parts = p.split("/")
            if len(parts) >= 2 and parts[-2] in domains:
                names.append(p)
            elif len(parts) >= 3 and parts[-3] in domains:
                continue  # a cursor of a topic's managed ledger
            elif "/".join(parts[:-1]) not in nodes:
                names.append(p)  # a free-form name whose parent is no managed ledger
        return names

    def __repr__(self) -> str:
        return f"MetadataStore({self.path!r}{', read_only' if self.read_only else ''})"
