"""Writes ZooKeeper snapshot and transaction-log files for tests (jute encoding, as a 3.9 server writes them).

Only for tests: pulsarkit itself never writes a ZooKeeper directory.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from pathlib import Path

from pulsarkit.metadata import zookeeper as zk

OPEN = ((31, "world", "anyone"),)


class Out:
    def __init__(self) -> None:
        self.b = bytearray()

    def int(self, v: int) -> Out:
        self.b += struct.pack(">i", v)
        return self

    def long(self, v: int) -> Out:
        self.b += struct.pack(">q", v)
        return self

    def bool(self, v: bool) -> Out:
        self.b.append(1 if v else 0)
        return self

    def buffer(self, v: bytes | None) -> Out:
        if v is None:
            return self.int(-1)
        self.int(len(v))
        self.b += v
        return self

    def string(self, v: str | None) -> Out:
        return self.buffer(None if v is None else v.encode())

    def acls(self, acls: Iterable[tuple[int, str, str]]) -> Out:
        acls = list(acls)
        self.int(len(acls))
        for perms, scheme, ident in acls:
            self.int(perms).string(scheme).string(ident)
        return self

    def seal(self) -> Out:
        self.long(zlib.adler32(bytes(self.b)))
        return self.string("/")


class Node:
    def __init__(
        self,
        data: bytes = b"",
        czxid: int = 0,
        mzxid: int = 0,
        ctime: int = 0,
        mtime: int = 0,
        version: int = 0,
        cversion: int = 0,
        aversion: int = 0,
        owner: int = 0,
        pzxid: int = 0,
        acl_ref: int = -1,
    ) -> None:
        self.data, self.acl_ref = data, acl_ref
        self.stat = (czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, pzxid)


def snapshot(
    nodes: dict[str, Node],
    sessions: dict[int, int] | None = None,
    dbid: int = 0,
    acl_cache: dict[int, Iterable[tuple[int, str, str]]] | None = None,
    digest: tuple[int, int, int] | None = (0, 2, 0),
    last_zxid: int | None = 0,
) -> bytes:
    """A snapshot of ``nodes`` (paths; "/" is the root, parents must be given), depth-first from the root."""
    o = Out().int(zk.SNAP_MAGIC).int(2).long(dbid)
    sessions = sessions or {}
    o.int(len(sessions))
    for sid, to in sessions.items():
        o.long(sid).int(to)
    acl_cache = acl_cache or {}
    o.int(len(acl_cache))
    for ref, acls in acl_cache.items():
        o.long(ref).acls(acls)

    def children(p: str) -> list[str]:
        pre = "/" if p == "/" else p + "/"
        return [c for c in nodes if c != "/" and c.startswith(pre) and "/" not in c[len(pre) :]]

    def walk(p: str) -> None:
        n = nodes[p]
        o.string("" if p == "/" else p).buffer(n.data).long(n.acl_ref)
        o.b += struct.pack(">qqqqiiiqq", *n.stat)
        for c in children(p):
            walk(c)

    walk("/")
    o.string("/").seal()
    # Each part of the trailer is the server's own setting: zookeeper.digest.enabled writes the digest,
    # zookeeper.serializeLastProcessedZxid.enabled (3.9) the last processed zxid.
    if digest is not None:
        o.long(digest[0]).int(digest[1])
        if digest[1] < 2:  # digest version 1 wrote the digest as a hex string
            o.string(f"{digest[2]:x}")
        else:
            o.long(digest[2])
        o.seal()
    if last_zxid is not None:
        o.long(last_zxid).seal()
    return bytes(o.b)


def txn_body(
    zxid: int, op: int, body: bytes, client_id: int = 1, cxid: int = 0, time: int = 0, digest: bool = True
) -> bytes:
    b = struct.pack(">qiqqi", client_id, cxid, zxid, time, op) + body
    return b + (struct.pack(">iq", 2, 0) if digest else b"")


def create(
    path: str,
    data: bytes = b"",
    ephemeral: bool = False,
    parent_cversion: int = -1,
    acl: Iterable[tuple[int, str, str]] = OPEN,
) -> bytes:
    return bytes(Out().string(path).buffer(data).acls(acl).bool(ephemeral).int(parent_cversion).b)


def create_ttl(path: str, data: bytes, parent_cversion: int, ttl: int) -> bytes:
    return bytes(Out().string(path).buffer(data).acls(OPEN).int(parent_cversion).long(ttl).b)


def create_container(path: str, data: bytes, parent_cversion: int) -> bytes:
    return bytes(Out().string(path).buffer(data).acls(OPEN).int(parent_cversion).b)


def delete(path: str) -> bytes:
    return bytes(Out().string(path).b)


def set_data(path: str, data: bytes, version: int) -> bytes:
    return bytes(Out().string(path).buffer(data).int(version).b)


def error(err: int) -> bytes:
    return struct.pack(">i", err)


def multi(ops: list[tuple[int, bytes]]) -> bytes:
    o = Out().int(len(ops))
    for op, body in ops:
        o.int(op).buffer(body)
    return bytes(o.b)


def close_session(paths: list[str]) -> bytes:
    o = Out().int(len(paths))
    for p in paths:
        o.string(p)
    return bytes(o.b)


def record(body: bytes) -> bytes:
    return struct.pack(">qi", zlib.adler32(body), len(body)) + body + b"B"


def txn_log(bodies: list[bytes], dbid: int = 0, prealloc: int = 0) -> bytes:
    return struct.pack(">iiq", zk.TXNLOG_MAGIC, 2, dbid) + b"".join(record(b) for b in bodies) + bytes(prealloc)


def tree(paths_data: dict[str, bytes], ctime: int = 1000) -> dict[str, Node]:
    """Nodes for :func:`snapshot`, every parent included (ZooKeeper needs them; Pulsar's RocksDB store keeps
    only the nodes it was given)."""
    nodes = {"/": Node()}
    for path, data in paths_data.items():
        parts = path.split("/")
        for i in range(2, len(parts)):
            nodes.setdefault("/".join(parts[:i]), Node(czxid=1, mzxid=1, pzxid=1))
        nodes[path] = Node(data, czxid=2, mzxid=2, pzxid=2, ctime=ctime, version=3)
    return nodes


def data_dir(
    dest: Path,
    paths_data: dict[str, bytes],
    zxid: int,
    bodies: Iterable[bytes] = (),
    created_children: dict[str, int] | None = None,
) -> Path:
    """A ZooKeeper dataDir at ``dest``: ``version-2/snapshot.<zxid>`` holding ``paths_data`` (and their parents),
    and ``log.<zxid + 1>`` with the transaction ``bodies`` (:func:`txn_body`), preallocated. ``created_children``:
    how many children were ever created under a node (its stored cversion, the next sequential suffix)."""
    v = dest / "version-2"
    v.mkdir(parents=True)
    nodes = tree(paths_data)
    for path, n in (created_children or {}).items():
        st = list(nodes[path].stat)
        st[5] = n
        nodes[path].stat = tuple(st)
    (v / f"snapshot.{zxid:x}").write_bytes(snapshot(nodes, last_zxid=zxid))
    (v / f"log.{zxid + 1:x}").write_bytes(txn_log(list(bodies), prealloc=256))
    return dest
