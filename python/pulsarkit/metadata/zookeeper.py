"""ZooKeeper's data directory read offline: the znode tree a server would load, without a server.

A ZooKeeper server keeps ``<dataDir>/version-2/snapshot.<zxid hex>`` (the whole tree, written while the server
keeps running: a *fuzzy* snapshot) and ``<dataLogDir>/version-2/log.<zxid hex>`` (every transaction, appended,
the file preallocated with zeros). Everything is jute's binary encoding, big-endian: ``int`` 4 bytes, ``long`` 8,
``boolean`` 1, ``buffer``/``ustring`` an int length (-1 for null) then the bytes, ``vector`` an int count (-1 for
null) then the elements.

* A snapshot is ``FileHeader{magic "ZKSN", version, dbid}``, the session list (``count``, then ``id``/``timeout``
  pairs), the ACL cache (``count``, then a ``long`` reference and a vector of ``ACL{perms, Id{scheme, id}}``),
  the nodes depth-first from the root (written with the path ``""``): ``path``, ``data``, the ``long`` ACL
  reference (-1: open to everyone), ``StatPersisted{czxid, mzxid, ctime, mtime, version, cversion, aversion,
  ephemeralOwner, pzxid}``, ended by the path ``"/"``; then a seal: the Adler-32 of every byte before it as a
  ``long`` and the string ``"/"``. Newer servers append ``ZxidDigest{zxid, digestVersion, digest}`` and a seal
  (``zookeeper.digest.enabled``), then (3.9) the last processed zxid and a seal
  (``zookeeper.serializeLastProcessedZxid.enabled``); either, both or neither may be there, told apart by
  which seal verifies. ``.gz`` and ``.snappy`` (xerial framing) snapshots are decompressed.
* A transaction log is ``FileHeader{magic "ZKLG", version 2, dbid}``, then records ``[long Adler-32 of the
  body][int length][body][byte 'B']``; the body is ``TxnHeader{clientId, cxid, zxid, time, type}``, the
  transaction of that type, and, on newer servers, ``TxnDigest{version, treeDigest}``. A zero length is the end
  (the preallocated tail).

The state is restored as the server restores it (``FileTxnSnapLog.restore``): the newest snapshot that parses
and whose seals verify (a bad one is skipped with an issue naming it: fallback to the previous one), then every
logged transaction with a zxid above the snapshot's, in order, applied with ``DataTree.processTxn``'s rules, which
make the replay of a transaction the fuzzy snapshot already holds harmless (a create of an existing node or a
delete of a missing one changes nothing but the parent's cversion/pzxid); a ``multi`` is applied whole, and a
failed one (its operations logged as errors) not at all. A torn record (short, or without its ``'B'``) ends its
file with an issue and replay goes on with the next file, as the server does; a record whose checksum or body is
bad ends the replay there (the server would refuse to start) with an issue; everything before is kept.
``as_of_zxid`` stops the replay at an older zxid, from a snapshot that holds nothing newer (its trailer's last
processed zxid, or the next snapshot's zxid, is at most the one asked for), and is refused with
:class:`ZooKeeperDataError` when the files cannot give that state.

Files are read, never written. Every length read is checked against the bytes left before it is used; malformed
bytes raise :class:`ZooKeeperDataError` naming the file and the offset (in a compressed snapshot, the offset in
its decompressed stream).
"""

from __future__ import annotations

import builtins
import gzip
import mmap
import os
import re
import struct
import zlib
from collections.abc import Iterator
from typing import Any, NamedTuple

from ..codec.entry import decompress
from ..errors import PulsarkitError, ZooKeeperDataError
from .store import Stat

SNAP_MAGIC = 0x5A4B534E  # "ZKSN"
TXNLOG_MAGIC = 0x5A4B4C47  # "ZKLG"
VERSION_DIR = "version-2"

# ZooDefs.OpCode
OP_CREATE = 1
OP_DELETE = 2
OP_SET_DATA = 5
OP_SET_ACL = 7
OP_CHECK = 13
OP_MULTI = 14
OP_CREATE2 = 15
OP_RECONFIG = 16
OP_CREATE_CONTAINER = 19
OP_DELETE_CONTAINER = 20
OP_CREATE_TTL = 21
OP_CREATE_SESSION = -10
OP_CLOSE_SESSION = -11
OP_ERROR = -1
OP_NAMES = {
    OP_CREATE: "create",
    OP_DELETE: "delete",
    OP_SET_DATA: "setData",
    OP_SET_ACL: "setACL",
    OP_CHECK: "check",
    OP_MULTI: "multi",
    OP_CREATE2: "create2",
    OP_RECONFIG: "reconfig",
    OP_CREATE_CONTAINER: "createContainer",
    OP_DELETE_CONTAINER: "deleteContainer",
    OP_CREATE_TTL: "createTTL",
    OP_CREATE_SESSION: "createSession",
    OP_CLOSE_SESSION: "closeSession",
    OP_ERROR: "error",
}

# EphemeralType: containers have exactly the sign bit; TTL nodes the high byte 0xff (extended types on).
CONTAINER_OWNER = -(2**63)
_EXTENDED_MASK = -(2**56)  # 0xff00000000000000 as a signed long
_TTL_VALUE_MASK = 0x000000FFFFFFFFFF
OPEN_ACL_REF = -1
_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
#: How many snapshots are tried, newest first, as ``FileSnap.deserialize`` does.
MAX_SNAPSHOTS_TRIED = 100

_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_REF_STAT = struct.Struct(">qqqqqiiiqq")  # a node's ACL reference, then StatPersisted (60 bytes)
_TXN_HEADER = struct.Struct(">qiqqi")  # clientId, cxid, zxid, time, type: 28 bytes


class Acl(NamedTuple):
    perms: int
    scheme: str
    id: str


OPEN_ACL_UNSAFE: tuple[Acl, ...] = (Acl(31, "world", "anyone"),)


class ZkStat(NamedTuple):
    """A node's stat as the server serves it (``Stat``): cversion counts creates and deletes of children,
    ephemeral_owner is 0 for containers and TTL nodes."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int


class Issue(NamedTuple):
    """Something skipped or stopped at while reading; ``offset`` is -1 when it concerns a whole file."""

    file: str
    offset: int
    message: str


class ZNode:
    """A node as ``DataTree`` keeps it: data, ACL and ``StatPersisted`` (cversion counts child creates)."""

    __slots__ = (
        "data",
        "acl",
        "czxid",
        "mzxid",
        "ctime",
        "mtime",
        "version",
        "cversion",
        "aversion",
        "ephemeral_owner",
        "pzxid",
        "children",
    )

    def __init__(self, data: bytes, acl: tuple[Acl, ...], stat: Any) -> None:
        self.data = data
        self.acl = acl
        (
            self.czxid,
            self.mzxid,
            self.ctime,
            self.mtime,
            self.version,
            self.cversion,
            self.aversion,
            self.ephemeral_owner,
            self.pzxid,
        ) = stat
        self.children: set[str] = set()

    def client_stat(self) -> ZkStat:
        owner = self.ephemeral_owner
        return ZkStat(
            self.czxid,
            self.mzxid,
            self.ctime,
            self.mtime,
            self.version,
            self.cversion * 2 - len(self.children),
            self.aversion,
            owner if ephemeral_kind(owner) == "ephemeral" else 0,
            len(self.data),
            len(self.children),
            self.pzxid,
        )


def ephemeral_kind(owner: int) -> str:
    """``"persistent"``, ``"ephemeral"`` (owned by a session), ``"container"`` or ``"ttl"``."""
    if owner == 0:
        return "persistent"
    if owner == CONTAINER_OWNER:
        return "container"
    if owner & _EXTENDED_MASK == _EXTENDED_MASK:
        return "ttl"
    return "ephemeral"


def ttl_of(owner: int) -> int | None:
    """The TTL in milliseconds of a TTL node's ephemeral owner, else None."""
    return owner & _TTL_VALUE_MASK if ephemeral_kind(owner) == "ttl" else None


# ------------------------------------------------------------------------------------------ jute


class _In:
    """A bounds-checked jute reader over ``buf[pos:end]``; offsets reported relative to the file (``base``)."""

    __slots__ = ("buf", "pos", "end", "file", "base")
    #: what malformed bytes raise: a data directory's error here, a live server's in ``zookeeper_live``
    error: type[PulsarkitError] = ZooKeeperDataError

    def __init__(self, buf: bytes, file: str, pos: int = 0, end: int | None = None, base: int = 0) -> None:
        self.buf, self.pos, self.file, self.base = buf, pos, file, base
        self.end = len(buf) if end is None else end

    def left(self) -> int:
        return self.end - self.pos

    def file_header(self, magic: int) -> tuple[int, int]:
        """``FileHeader{magic, version, dbid}`` (snapshots and logs alike): ``(version, dbid)``, a bad magic refused."""
        found = self.int("file header magic")
        if found != magic:
            raise self.fail(f"bad magic {found:#x}, expected {magic.to_bytes(4, 'big').decode()!r}", 0)
        return self.int("file header version"), self.long("file header dbid")

    def fail(self, msg: str, at: int | None = None) -> PulsarkitError:
        off = self.base + (self.pos if at is None else at)
        e = self.error(f"{self.file}: {msg} at offset {off}")
        e.offset = off
        return e

    def need(self, n: int, what: str) -> None:
        if n > self.end - self.pos:
            raise self.fail(f"{what} needs {n} bytes, {self.end - self.pos} left")

    def int(self, what: str) -> int:
        self.need(4, what)
        v = _I.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    # ``builtins.int`` below: in the class body, ``int`` is the method above
    def long(self, what: str) -> builtins.int:
        self.need(8, what)
        v = _Q.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def byte(self, what: str) -> builtins.int:
        self.need(1, what)
        v = self.buf[self.pos]
        self.pos += 1
        return v

    def bool(self, what: str) -> bool:
        return self.byte(what) != 0

    def buffer(self, what: str) -> bytes | None:
        at = self.pos
        n = self.int(f"{what} length")
        if n == -1:
            return None
        if n < -1:
            raise self.fail(f"{what}: negative length {n}", at)
        self.need(n, what)
        v = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return v

    def string(self, what: str) -> str | None:
        b = self.buffer(what)
        # Java's new String(bytes, UTF_8) replaces malformed input; so does this.
        return None if b is None else b.decode("utf-8", "replace")

    def count(self, what: str, min_size: builtins.int) -> builtins.int | None:
        """A vector's element count, -1 (null) as None, checked against what ``min_size``-byte elements fit."""
        at = self.pos
        n = self.int(f"{what} count")
        if n == -1:
            return None
        if n < -1 or n * min_size > self.end - self.pos:
            raise self.fail(f"{what}: count {n} does not fit the {self.end - self.pos} bytes left", at)
        return n

    def acls(self, what: str) -> tuple[Acl, ...] | None:
        n = self.count(what, 12)
        if n is None:
            return None
        return tuple(
            Acl(self.int("ACL perms"), self.string("ACL scheme") or "", self.string("ACL id") or "") for _ in range(n)
        )

    def path(self, what: str) -> str:
        s = self.string(what)
        if s is None:
            raise self.fail(f"{what} is null")
        return s


# ------------------------------------------------------------------------------------- snapshots


class Snapshot(NamedTuple):
    file: str
    zxid: int  # from the file name: the last zxid applied when the snapshot started
    version: int
    dbid: int
    sessions: dict[int, int]  # session id -> timeout (ms)
    nodes: dict[str, ZNode]
    digest: tuple[int, int, int] | None  # (zxid, digest version, tree digest) of the trailer
    last_processed_zxid: int | None  # the trailer's: the last zxid applied when the snapshot ended
    issues: list[Issue]
    #: path -> the issue of its ACL reference missing from the snapshot's ACL cache (also in ``issues``): a
    #: fuzzy snapshot wrote the cache before the node's create, which the transaction logs replay
    unresolved_acls: dict[str, Issue]


def zxid_from_name(name: str, prefix: str) -> int:
    """The zxid in ``prefix.<hex>[.ext]`` (``Util.getZxidFromName``), -1 if the name does not have one."""
    parts = name.split(".")
    if len(parts) >= 2 and parts[0] == prefix:
        try:
            v = int(parts[1], 16)
        except ValueError:
            return -1
        return v if 0 <= v < 2**63 and parts[1].isalnum() else -1
    return -1


def _snapshot_bytes(raw: bytes, file: str) -> bytes:
    """The checked stream of a snapshot: as is, or decompressed by the file extension (``SnapStream``)."""
    ext = os.path.basename(file).rsplit(".", 1)[-1] if os.path.basename(file).count(".") >= 2 else ""
    if ext == "gz":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise ZooKeeperDataError(f"{file}: bad gzip stream: {e}") from None
    if ext == "snappy":
        return _xerial_snappy(raw, file)
    return raw


def _xerial_snappy(raw: bytes, file: str) -> bytes:
    """snappy-java's stream: an 8-byte magic, two ints, then ``[int length][raw snappy block]`` chunks."""
    if raw[:8] != _SNAPPY_MAGIC:
        raise ZooKeeperDataError(f"{file}: not a snappy-java stream (magic) at offset 0")
    inp = _In(raw, file, 16 if len(raw) >= 16 else len(raw))
    out = []
    while inp.left() > 0:
        at = inp.pos
        block = inp.buffer("snappy block")
        if not block:
            raise inp.fail("empty snappy block", at)
        ulen, shift, i = 0, 0, 0
        while True:  # the raw block's varint preamble: its uncompressed length
            if i >= len(block) or shift > 28:
                raise inp.fail("bad snappy block length", at)
            b = block[i]
            ulen |= (b & 0x7F) << shift
            i, shift = i + 1, shift + 7
            if b < 0x80:
                break
        try:
            out.append(decompress("SNAPPY", block, ulen))
        except PulsarkitError as e:
            raise inp.fail(f"bad snappy block: {e}", at) from None
    return b"".join(out)


def _seal(inp: _In, what: str) -> None:
    """``SnapStream.checkSealIntegrity``: the Adler-32 of every byte before, then the string "/"."""
    at = inp.pos
    computed = zlib.adler32(inp.buf[: inp.pos]) & 0xFFFFFFFF
    stored = inp.long(f"{what} checksum")
    inp.string(f"{what} seal")
    if stored != computed:
        raise inp.fail(f"{what} checksum mismatch: stored {stored:#x}, computed {computed:#x}", at)


_HEX = re.compile(r"[+-]?[0-9a-fA-F]+")
#: the shortest trailer: a last processed zxid and its seal (a digest and its seal take 29 bytes or more)
_MIN_TRAILER = 8 + 13


def _zxid_digest(inp: _In) -> tuple[int, int, int] | None:
    """``DataTree.ZxidDigest``; None when the file ends inside it (the server's EOFException)."""
    if inp.left() < 12:
        return None
    dz = inp.long("digest zxid")
    dv = inp.int("digest version")
    if dv >= 2:
        return (dz, dv, inp.long("digest")) if inp.left() >= 8 else None
    if inp.left() < 4 or _I.unpack_from(inp.buf, inp.pos)[0] > inp.left() - 4:
        return None
    at = inp.pos
    hexs = inp.string("digest")
    if hexs is None:  # the server keeps its digest 0
        return dz, dv, 0
    # Long.parseLong(d, 16): anything else throws, and the server does not start
    if not _HEX.fullmatch(hexs) or not -(2**63) <= int(hexs, 16) < 2**63:
        raise inp.fail(f"digest {hexs!r} is not hexadecimal", at)
    return dz, dv, int(hexs, 16)


def _snapshot_trailer(inp: _In) -> tuple[tuple[int, int, int] | None, int | None]:
    """What follows the snapshot's seal: ``(digest, last processed zxid)``, each None when absent.

    The server writes ``ZxidDigest`` and a seal when ``zookeeper.digest.enabled``, then (3.9) the last processed
    zxid and a seal when ``zookeeper.serializeLastProcessedZxid.enabled``, and reads with its own settings. Those
    are not in the files, so the shape is told by whose seal verifies (the digest's tried first, as the server
    reads it first).
    """
    start = inp.pos
    if not inp.left():
        return None, None
    try:
        digest = _zxid_digest(inp)
        truncated = digest is None
        if digest is not None:
            _seal(inp, "digest")
    except inp.error as e:
        truncated, why_digest = False, str(e).removeprefix(f"{inp.file}: ")
    else:
        if digest is not None:
            # the digest verified: what follows can only be the last processed zxid
            last = None
            if inp.left() >= 8:  # fewer: the server's EOFException, left to the caller's issue
                last = inp.long("last processed zxid")
                _seal(inp, "last processed zxid")
            return digest, last
        why_digest = "the file ends inside it"
    inp.pos = start
    try:
        last = inp.long("last processed zxid")
        _seal(inp, "last processed zxid")
        return None, last
    except inp.error as e:
        why_last = str(e).removeprefix(f"{inp.file}: ")
    inp.pos = start
    # Too short for a last processed zxid, and the digest ran out of bytes: the server reads that EOF as a
    # snapshot older than digests and goes on (the caller reports the bytes as ignored).
    if truncated and inp.left() < _MIN_TRAILER:
        return None, None
    raise inp.fail(
        f"{inp.left()} bytes after the snapshot's seal are neither a digest ({why_digest}) "
        f"nor a last processed zxid ({why_last})",
        start,
    )


def parse_snapshot(raw: bytes, file: str = "snapshot") -> Snapshot:
    """One snapshot file's content (``raw`` as stored; compression is taken from ``file``'s extension)."""
    name = os.path.basename(file)
    data = _snapshot_bytes(raw, file)
    # SnapStream.isValidSnapshot: an uncompressed snapshot must end with a seal's "/" string.
    if len(data) < 10 or data[-5:] != b"\x00\x00\x00\x01/":
        raise ZooKeeperDataError(f"{file}: not a complete snapshot (no end seal) at offset {max(len(data) - 5, 0)}")
    inp = _In(data, file)
    version, dbid = inp.file_header(SNAP_MAGIC)
    nsess = inp.count("session list", 12) or 0
    sessions = {}
    for _ in range(nsess):
        sid = inp.long("session id")
        sessions[sid] = inp.int("session timeout")
    # ACL cache: a negative count reads as empty (the server's `while (i > 0)`).
    nacl = inp.int("ACL cache size")
    if nacl * 12 > inp.left():
        raise inp.fail(f"ACL cache size {nacl} does not fit the {inp.left()} bytes left", inp.pos - 4)
    acl_cache: dict[int, tuple[Acl, ...]] = {}
    for _ in range(max(nacl, 0)):
        ref = inp.long("ACL reference")
        acls = inp.acls("ACL list")
        if acls is None:
            raise inp.fail("ACL cache entry without an ACL list")
        acl_cache[ref] = acls
    issues: list[Issue] = []
    unresolved: dict[str, Issue] = {}
    nodes: dict[str, ZNode] = {}
    # The node loop is the bulk of a snapshot: lengths are checked inline rather than through _In's helpers.
    buf, end, pos = data, len(data), inp.pos
    unpack_i, unpack_ref_stat = _I.unpack_from, _REF_STAT.unpack_from
    while True:
        at = pos
        if end - pos < 4:
            inp.pos = pos
            raise inp.fail(f"node path length needs 4 bytes, {end - pos} left")
        n = unpack_i(buf, pos)[0]
        pos += 4
        if n < 0 or n > end - pos:
            raise inp.fail(f"node path: length {n} does not fit the {end - pos} bytes left", at)
        path = buf[pos : pos + n].decode("utf-8", "replace")
        pos += n
        if path == "/":
            break
        if end - pos < 4:
            inp.pos = pos
            raise inp.fail(f"node data length needs 4 bytes, {end - pos} left")
        n = unpack_i(buf, pos)[0]
        pos += 4
        if n == -1:
            data_ = b""
        elif n < -1 or n > end - pos:
            raise inp.fail(f"node {path!r} data: length {n} does not fit the {end - pos} bytes left", pos - 4)
        else:
            data_ = buf[pos : pos + n]
            pos += n
        if end - pos < _REF_STAT.size:
            inp.pos = pos
            raise inp.fail(f"node ACL reference and stat need {_REF_STAT.size} bytes, {end - pos} left")
        ref, *stat = unpack_ref_stat(buf, pos)
        pos += _REF_STAT.size
        if ref == OPEN_ACL_REF:
            acl = OPEN_ACL_UNSAFE
        elif ref in acl_cache:
            acl = acl_cache[ref]
        else:
            acl = ()
            issues.append(Issue(file, at, f"node {path or '/'}: ACL reference {ref} not in the ACL cache"))
            unresolved[path or "/"] = issues[-1]
        node = ZNode(data_, acl, stat)
        if path == "":
            nodes["/"] = node
            continue
        slash = path.rfind("/")
        parent = nodes.get(path[:slash] or "/") if slash >= 0 and path[0] == "/" else None
        if parent is None:
            raise inp.fail(f"node {path!r} is not absolute or comes before its parent", at)
        parent.children.add(path[slash + 1 :])
        nodes[path] = node
    inp.pos = pos
    if "/" not in nodes:
        raise inp.fail("snapshot has no root node")
    _seal(inp, "snapshot")
    digest, last = _snapshot_trailer(inp)
    if inp.left():
        issues.append(Issue(file, inp.pos, f"{inp.left()} bytes after the snapshot's last seal ignored"))
    return Snapshot(
        file, zxid_from_name(name, "snapshot"), version, dbid, sessions, nodes, digest, last, issues, unresolved
    )


# ---------------------------------------------------------------------------------- transactions


class Create(NamedTuple):
    path: str
    data: bytes
    acl: tuple[Acl, ...]
    ephemeral: bool
    parent_cversion: int
    ttl: int | None = None


class Delete(NamedTuple):
    path: str


class SetData(NamedTuple):
    path: str
    data: bytes
    version: int


class SetAcl(NamedTuple):
    path: str
    acl: tuple[Acl, ...]
    version: int


class Check(NamedTuple):
    path: str
    version: int


class ErrorTxn(NamedTuple):
    err: int


class CreateSession(NamedTuple):
    timeout: int


class CloseSession(NamedTuple):
    paths: tuple[str, ...] | None


class Multi(NamedTuple):
    ops: tuple[tuple[int, Any], ...]  # (op type, record)


class Txn(NamedTuple):
    client_id: int
    cxid: int
    zxid: int
    time: int
    type: int
    record: Any
    digest: tuple[int, int] | None
    file: str
    offset: int

    @property
    def op(self) -> str:
        return OP_NAMES.get(self.type, str(self.type))


class TxnLog(NamedTuple):
    file: str
    version: int
    dbid: int
    txns: list[Txn]
    issues: list[Issue]
    #: True when reading stopped at a record the server would refuse (bad checksum or body): nothing after it,
    #: in this file or a later one, is replayed. A torn tail only ends its file.
    fatal: bool


def _record(inp: _In, op: int, top: bool) -> Any:
    if op in (OP_CREATE, OP_CREATE2):
        path = inp.path("create path")
        data = inp.buffer("create data") or b""
        acl = inp.acls("create ACL") or ()
        eph = inp.bool("create ephemeral")
        if op == OP_CREATE and top and inp.left() < 4:
            return Create(path, data, acl, eph, -1)  # CreateTxnV0 (no parentCVersion): the server fixes it up
        return Create(path, data, acl, eph, inp.int("create parentCVersion"))
    if op == OP_CREATE_TTL:
        path = inp.path("createTTL path")
        data = inp.buffer("createTTL data") or b""
        acl = inp.acls("createTTL ACL") or ()
        pcv = inp.int("createTTL parentCVersion")
        return Create(path, data, acl, False, pcv, inp.long("createTTL ttl"))
    if op == OP_CREATE_CONTAINER:
        path = inp.path("createContainer path")
        data = inp.buffer("createContainer data") or b""
        acl = inp.acls("createContainer ACL") or ()
        return Create(path, data, acl, False, inp.int("createContainer parentCVersion"), None)
    if op in (OP_DELETE, OP_DELETE_CONTAINER):
        return Delete(inp.path("delete path"))
    if op in (OP_SET_DATA, OP_RECONFIG):
        path = inp.path("setData path")
        return SetData(path, inp.buffer("setData data") or b"", inp.int("setData version"))
    if op == OP_SET_ACL and top:
        path = inp.path("setACL path")
        return SetAcl(path, inp.acls("setACL ACL") or (), inp.int("setACL version"))
    if op == OP_CHECK:
        return Check(inp.path("check path"), inp.int("check version"))
    if op == OP_ERROR:
        return ErrorTxn(inp.int("error code"))
    if op == OP_CREATE_SESSION and top:
        return CreateSession(inp.int("session timeout"))
    if op == OP_CLOSE_SESSION and top:
        # Without CloseSessionTxn (older servers, or zookeeper.closeSessionTxn.enabled=false) the body ends here
        # or holds only the digest: like the server, read no paths then.
        start = inp.pos
        try:
            n = inp.count("closeSession paths", 4)
            return CloseSession(None if n is None else tuple(inp.path("closeSession path") for _ in range(n)))
        except ZooKeeperDataError:
            inp.pos = start
            return CloseSession(None)
    if op == OP_MULTI and top:
        n = inp.count("multi operations", 8) or 0
        ops = []
        for _ in range(n):
            sub_op = inp.int("multi operation type")
            at = inp.pos
            body = inp.buffer("multi operation") or b""
            sub = _In(body, inp.file, 0, None, inp.base + at + 4)
            ops.append((sub_op, _record(sub, sub_op, False)))
        return Multi(tuple(ops))
    raise inp.fail(f"unsupported transaction type {op}")


def parse_txn(body: bytes, file: str = "log", offset: int = 0) -> Txn:
    """One record's body: ``TxnHeader``, the transaction, the optional ``TxnDigest``."""
    inp = _In(body, file, 0, None, offset)
    inp.need(_TXN_HEADER.size, "transaction header")
    cid, cxid, zxid, time_, op = _TXN_HEADER.unpack_from(body)
    inp.pos = _TXN_HEADER.size
    rec = _record(inp, op, True)
    digest = None
    if inp.left() >= 12:
        digest = (inp.int("digest version"), inp.long("tree digest"))
    return Txn(cid, cxid, zxid, time_, op, rec, digest, file, offset)


def _zeros(raw: Any, start: int, chunk: int = 1 << 20) -> bool:
    """Whether ``raw[start:]`` is all zeros, looked at a chunk at a time (a preallocated tail is 64 MiB)."""
    for i in range(start, len(raw), chunk):
        part = raw[i : i + chunk]
        if part.count(0) != len(part):
            return False
    return True


def parse_txn_log(raw: bytes, file: str = "log") -> TxnLog:
    """Every complete record of one log file. A bad header raises; a bad record ends the reading with an issue."""
    inp = _In(raw, file)
    version, dbid = inp.file_header(TXNLOG_MAGIC)
    txns: list[Txn] = []
    issues: list[Issue] = []
    fatal = False
    end = len(raw)
    while True:
        at = inp.pos
        left = end - at
        if left == 0:
            break
        if left < 12:
            if not _zeros(raw, at):
                issues.append(Issue(file, at, f"torn record: {left} bytes, too short for a record header"))
            break
        crc = inp.long("record checksum")
        n = inp.int("record length")
        if n == 0:  # the preallocated, zero-filled tail
            if not _zeros(raw, inp.pos):
                issues.append(Issue(file, at, "non-zero bytes after the end-of-log marker (length 0) ignored"))
            break
        if n < 0 or n + 1 > end - inp.pos:
            issues.append(
                Issue(file, at, f"torn record: length {n}, {end - inp.pos} bytes left; the rest of the file ignored")
            )
            break
        body = raw[inp.pos : inp.pos + n]
        inp.pos += n
        if raw[inp.pos] != 0x42:  # 'B'
            issues.append(Issue(file, at, "torn record: no end-of-record byte 'B'; the rest of the file ignored"))
            break
        inp.pos += 1
        computed = zlib.adler32(body) & 0xFFFFFFFF
        if crc != computed:
            issues.append(
                Issue(
                    file,
                    at,
                    f"record checksum mismatch (stored {crc:#x}, computed {computed:#x}); replay stops here "
                    "(a ZooKeeper server refuses to load this log)",
                )
            )
            fatal = True
            break
        try:
            txns.append(parse_txn(body, file, at + 12))
        except ZooKeeperDataError as e:
            issues.append(Issue(file, at, f"unreadable record: {e}; replay stops"))
            fatal = True
            break
    return TxnLog(file, version, dbid, txns, issues, fatal)


# ------------------------------------------------------------------------------------ the tree


class DataTree:
    """The znode tree with ``DataTree.processTxn``'s rules (including the ones that make fuzzy replay safe)."""

    def __init__(
        self, nodes: dict[str, ZNode], sessions: dict[int, int], unresolved_acls: dict[str, Issue] | None = None
    ) -> None:
        self.nodes = nodes
        self.sessions = sessions
        #: path -> the issue of its ACL missing from the snapshot, until a replayed transaction gives the ACL
        self.unresolved_acls = dict(unresolved_acls or {})
        # session -> its ephemeral nodes, built at the first closeSession (the server's `ephemerals` map)
        self._ephemerals: dict[int, set[str]] | None = None

    def _owned(self) -> dict[int, set[str]]:
        if self._ephemerals is None:
            self._ephemerals = {}
            for p, n in self.nodes.items():
                if ephemeral_kind(n.ephemeral_owner) == "ephemeral":
                    self._ephemerals.setdefault(n.ephemeral_owner, set()).add(p)
        return self._ephemerals

    def _create(self, zxid: int, time_: int, top_type: int, rec: Create, owner: int) -> bool:
        path = rec.path
        slash = path.rfind("/")
        if slash < 0:
            return False
        parent_path = path[:slash] or "/"
        name = path[slash + 1 :]
        parent = self.nodes.get(parent_path)
        if parent is None:
            return False  # NoNode
        if name in parent.children:
            if top_type == OP_CREATE:  # NodeExists on a plain create: bring the parent's cversion/pzxid along
                self._set_cversion_pzxid(parent, rec.parent_cversion, zxid)
            # A fuzzy snapshot holds the node but wrote the ACL cache before its create: the replayed create
            # gives the ACL (the server adds it to its cache before the NodeExists check, and since
            # ZOOKEEPER-4846 also points the node at it).
            if self.unresolved_acls.pop(path, None) is not None and path in self.nodes:
                self.nodes[path].acl = rec.acl
            return False
        self.unresolved_acls.pop(path, None)
        pcv = parent.cversion + 1 if rec.parent_cversion == -1 else rec.parent_cversion
        if pcv > parent.cversion:
            parent.cversion = pcv
            parent.pzxid = zxid
        parent.children.add(name)
        self.nodes[path] = ZNode(rec.data, rec.acl, (zxid, zxid, time_, time_, 0, 0, 0, owner, zxid))
        if self._ephemerals is not None and ephemeral_kind(owner) == "ephemeral":
            self._ephemerals.setdefault(owner, set()).add(path)
        return True

    @staticmethod
    def _set_cversion_pzxid(node: ZNode, cversion: int, zxid: int) -> None:
        if cversion == -1:
            cversion = node.cversion + 1
        if cversion > node.cversion:
            node.cversion = cversion
            node.pzxid = zxid

    def _delete(self, path: str, zxid: int) -> bool:
        slash = path.rfind("/")
        if slash < 0:
            return False
        parent = self.nodes.get(path[:slash] or "/")
        if parent is None:
            return False
        parent.children.discard(path[slash + 1 :])
        if zxid > parent.pzxid:  # even when the child is already gone (deleted during a fuzzy snapshot)
            parent.pzxid = zxid
        node = self.nodes.pop(path, None)
        self.unresolved_acls.pop(path, None)
        if node is None:
            return False
        if self._ephemerals is not None and node.ephemeral_owner in self._ephemerals:
            self._ephemerals[node.ephemeral_owner].discard(path)
        return True

    def _apply(self, client_id: int, zxid: int, time_: int, op: int, rec: Any) -> None:
        if op in (OP_CREATE, OP_CREATE2):
            self._create(zxid, time_, op, rec, client_id if rec.ephemeral else 0)
        elif op == OP_CREATE_TTL:
            self._create(zxid, time_, op, rec, _EXTENDED_MASK | (rec.ttl & _TTL_VALUE_MASK))
        elif op == OP_CREATE_CONTAINER:
            self._create(zxid, time_, op, rec, CONTAINER_OWNER)
        elif op in (OP_DELETE, OP_DELETE_CONTAINER):
            self._delete(rec.path, zxid)
        elif op in (OP_SET_DATA, OP_RECONFIG):
            n = self.nodes.get(rec.path)
            if n is not None:
                n.data, n.mtime, n.mzxid, n.version = rec.data, time_, zxid, rec.version
        elif op == OP_SET_ACL:
            n = self.nodes.get(rec.path)
            if n is not None:
                n.aversion, n.acl = rec.version, rec.acl
                self.unresolved_acls.pop(rec.path, None)
        elif op == OP_CREATE_SESSION:
            self.sessions[client_id] = rec.timeout
        elif op == OP_CLOSE_SESSION:
            self.sessions.pop(client_id, None)
            # The paths the transaction lists first, then any other node the session still owns.
            listed = list(rec.paths or ())
            owned = self._owned().pop(client_id, set())
            for p in listed + sorted(owned.difference(listed)):
                self._delete(p, zxid)
        elif op == OP_MULTI:
            # A failed multi is logged with every operation turned into an error: nothing applies.
            if any(sub_op == OP_ERROR for sub_op, _ in rec.ops):
                return
            for sub_op, sub in rec.ops:
                self._apply(client_id, zxid, time_, sub_op, sub)
        # check, error: nothing changes

    def apply(self, txn: Txn) -> None:
        self._apply(txn.client_id, txn.zxid, txn.time, txn.type, txn.record)


def _holds_effect(nodes: dict[str, ZNode], op: int, rec: Any, zxid: int, client_id: int) -> bool:
    """Whether a tree already shows (part of) a logged, successful transaction: a fuzzy snapshot's end."""
    if op in (OP_CREATE, OP_CREATE2, OP_CREATE_TTL, OP_CREATE_CONTAINER):
        n = nodes.get(rec.path)
        return n is not None and n.czxid == zxid
    if op in (OP_DELETE, OP_DELETE_CONTAINER):
        return rec.path not in nodes  # it existed when the delete was accepted
    if op in (OP_SET_DATA, OP_RECONFIG):
        n = nodes.get(rec.path)
        return n is not None and n.mzxid == zxid
    if op == OP_SET_ACL:
        n = nodes.get(rec.path)
        return n is not None and n.aversion == rec.version
    if op == OP_CLOSE_SESSION:
        if rec.paths is not None:
            return any(p not in nodes for p in rec.paths)
        return True  # which ephemerals it removed is not logged: cannot tell
    if op == OP_MULTI:
        if any(sub_op == OP_ERROR for sub_op, _ in rec.ops):
            return False
        return any(_holds_effect(nodes, sub_op, sub, zxid, client_id) for sub_op, sub in rec.ops)
    return False  # createSession (sessions are written first), check, error


# ------------------------------------------------------------------------------------ the store


def _version_dir(d: str) -> str:
    sub = os.path.join(d, VERSION_DIR)
    return sub if os.path.isdir(sub) else d


def _listed(d: str, prefix: str) -> list[tuple[int, str]]:
    try:
        names = os.listdir(d)
    except OSError as e:
        raise ZooKeeperDataError(f"cannot list {d}: {e}") from None
    out = [(z, os.path.join(d, n)) for n in names if (z := zxid_from_name(n, prefix)) >= 0]
    return sorted(out)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ZooKeeperDataError(f"cannot read {path}: {e}") from None


def _read_log(path: str) -> TxnLog | None:
    """A log file parsed through a read-only map (most of a log is its preallocated zero tail), None if empty."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return None
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return parse_txn_log(m, path)  # type: ignore[arg-type]
    except OSError as e:
        raise ZooKeeperDataError(f"cannot read {path}: {e}") from None


def next_sequential_suffix(stat: ZkStat | None) -> int | None:
    """The suffix ZooKeeper gives the next sequential child of the node whose served ``stat`` this is: the
    count of children ever created, which the node keeps as its stored ``cversion`` (the served one,
    ``2 * stored - children``, also counts the deletes), so every sequential child made so far has a smaller
    suffix. None for no node."""
    return None if stat is None else (stat.cversion + stat.num_children) // 2


class ZkSnapshotStore:
    """A ZooKeeper data directory restored offline, read-only; satisfies :class:`.reader.MetadataReader`.

    ``data_dir`` is the server's ``dataDir`` (or its ``version-2``); ``log_dir`` its ``dataLogDir`` when the
    transaction logs are kept apart. After opening: ``zxid`` (the last transaction the state holds),
    ``snapshot`` (the file used), ``snapshot_zxid``, ``txns_applied``, ``log_files``, ``sessions`` and
    ``issues`` (what was skipped, each with file and offset).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        log_dir: str | os.PathLike[str] | None = None,
        as_of_zxid: int | None = None,
    ) -> None:
        self.data_dir = _version_dir(os.fspath(data_dir))
        self.log_dir = _version_dir(os.fspath(log_dir)) if log_dir is not None else self.data_dir
        self.as_of_zxid = as_of_zxid
        self.issues: list[Issue] = []
        snaps = _listed(self.data_dir, "snapshot")
        logs = _listed(self.log_dir, "log")
        if not snaps:
            raise ZooKeeperDataError(
                f"no snapshot.* file in {self.data_dir}"
                + (" (there are transaction logs: the server refuses such a directory too)" if logs else "")
            )
        snap = self._pick_snapshot(snaps, logs)
        self.snapshot = snap.file
        self.snapshot_zxid = snap.zxid
        self.dbid = snap.dbid
        self.snapshot_digest = snap.digest
        acl_issues = set(map(id, snap.unresolved_acls.values()))
        self.issues.extend(i for i in snap.issues if id(i) not in acl_issues)
        self._tree = DataTree(snap.nodes, dict(snap.sessions), snap.unresolved_acls)
        self.zxid = snap.zxid
        self.txns_applied = 0
        self.log_files: list[str] = []
        self._replay(snap, logs)
        # what the replay did not give an ACL: still a node whose ACL is unknown
        self.issues.extend(self._tree.unresolved_acls.values())
        self.sessions = self._tree.sessions
        self._sorted: list[str] | None = None

    # -- restore ---------------------------------------------------------------------------------------

    def _pick_snapshot(self, snaps: list[tuple[int, str]], logs: list[tuple[int, str]]) -> Snapshot:
        as_of = self.as_of_zxid
        newest_first = list(reversed(snaps))[:MAX_SNAPSHOTS_TRIED]
        reasons = []
        for i, (zxid, path) in enumerate(newest_first):
            if as_of is not None and zxid > as_of:
                continue
            try:
                snap = parse_snapshot(_read(path), path)
            except ZooKeeperDataError as e:
                self.issues.append(Issue(path, getattr(e, "offset", -1), f"snapshot skipped, falling back: {e}"))
                reasons.append(str(e))
                continue
            if as_of is not None:
                # The snapshot must hold nothing newer than as_of: its trailer says up to which zxid it got;
                # without one, the next snapshot's start bounds it (snapshots are taken one at a time).
                end = snap.last_processed_zxid
                if end is None and i > 0:
                    end = newest_first[i - 1][0]
                if end is None or end > as_of:
                    reasons.append(f"{path} may hold transactions up to {end if end is not None else '?'}")
                    continue
                # The server bumps lastProcessedZxid only after a transaction is applied, so a snapshot whose
                # trailer says ``end`` may already hold part of transaction end + 1: usable at exactly
                # ``end`` only when that transaction left no trace in it.
                if end == as_of and snap.last_processed_zxid is not None and self._next_txn_leaked(snap, logs):
                    reasons.append(f"{path} holds part of transaction {as_of + 1:#x}")
                    continue
            return snap
        if as_of is not None:
            raise ZooKeeperDataError(
                f"no snapshot in {self.data_dir} gives the state as of zxid {as_of:#x}"
                + (f": {'; '.join(reasons)}" if reasons else " (every snapshot is newer)")
            )
        raise ZooKeeperDataError(f"no valid snapshot in {self.data_dir}: {'; '.join(reasons)}")

    def _next_txn_leaked(self, snap: Snapshot, logs: list[tuple[int, str]]) -> bool:
        """Whether ``snap`` holds any effect of the transaction that follows its trailer's zxid."""
        want = snap.last_processed_zxid
        assert want is not None
        want += 1
        for _, path in reversed([(z, p) for z, p in logs if z <= want]):
            try:
                log = _read_log(path)
            except ZooKeeperDataError:
                return True  # cannot tell: not usable at exactly this zxid
            for t in log.txns if log is not None else ():
                if t.zxid == want:
                    return _holds_effect(snap.nodes, t.type, t.record, t.zxid, t.client_id)
            if log is not None and log.txns and log.txns[0].zxid < want:
                break
        return False  # not logged: never applied

    def _replay(self, snap: Snapshot, logs: list[tuple[int, str]]) -> None:
        # FileTxnLog.getLogFiles: from the newest log starting at or before the snapshot's zxid, on.
        start = max((z for z, _ in logs if z <= snap.zxid), default=0)
        files = [p for z, p in logs if z >= start]
        as_of = self.as_of_zxid
        last = snap.zxid
        reached = False  # a record beyond as_of was seen: the state at as_of is complete
        for path in files:
            try:
                log = _read_log(path)
            except ZooKeeperDataError as e:
                self.issues.append(
                    Issue(path, getattr(e, "offset", -1), f"transaction log unreadable; replay stops: {e}")
                )
                break
            if log is None:
                self.issues.append(Issue(path, -1, "empty transaction log ignored"))
                continue
            self.log_files.append(path)
            for t in log.txns:
                if t.zxid <= snap.zxid:
                    continue
                if as_of is not None and t.zxid > as_of:
                    reached = True
                    break
                if t.zxid <= last:
                    self.issues.append(Issue(path, t.offset - 12, f"zxid {t.zxid:#x} after {last:#x}: out of order"))
                elif t.zxid >> 32 == last >> 32 and t.zxid != last + 1:
                    self.issues.append(
                        Issue(path, t.offset - 12, f"zxids {last + 1:#x}..{t.zxid - 1:#x} are missing from the logs")
                    )
                self._tree.apply(t)
                self.txns_applied += 1
                last = max(last, t.zxid)
            self.issues.extend(log.issues)
            if reached or log.fatal:
                break
        self.zxid = last
        if as_of is not None and not reached and as_of > last:
            raise ZooKeeperDataError(
                f"the state as of zxid {as_of:#x} is not in {self.log_dir}: the transaction logs end at {last:#x}"
            )

    # -- MetadataReader -------------------------------------------------------------------------------

    def node(self, path: str) -> ZNode | None:
        """The node itself (data, ACL, the stat as stored), or None."""
        return self._tree.nodes.get(path)

    def stat(self, path: str) -> ZkStat | None:
        """The stat the server would serve for ``path``, or None."""
        n = self._tree.nodes.get(path)
        return None if n is None else n.client_stat()

    def next_sequential(self, parent: str) -> int | None:
        return next_sequential_suffix(self.stat(parent))

    def get(self, path: str) -> tuple[bytes, Stat] | None:
        n = self._tree.nodes.get(path)
        if n is None:
            return None
        owner = n.ephemeral_owner
        eph = ephemeral_kind(owner) == "ephemeral"
        return n.data, Stat(path, n.version, n.ctime, n.mtime, eph, owner if eph else 0)

    def exists(self, path: str) -> bool:
        return path in self._tree.nodes

    def children(self, path: str) -> list[str]:
        n = self._tree.nodes.get(path)
        return [] if n is None else sorted(n.children)

    def keys(self, prefix: str = "/") -> Iterator[str]:
        if self._sorted is None:
            self._sorted = sorted(self._tree.nodes, key=lambda p: p.encode("utf-8", "surrogatepass"))
        for p in self._sorted:
            if p.startswith(prefix):
                yield p

    def __len__(self) -> int:
        return len(self._tree.nodes)

    def close(self) -> None:
        """Nothing is held open; present so the store is used like the others."""

    def __enter__(self) -> ZkSnapshotStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ZkSnapshotStore({self.data_dir!r}, zxid={self.zxid:#x}, {len(self)} nodes)"
