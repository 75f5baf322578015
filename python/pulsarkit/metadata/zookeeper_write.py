"""The only writes pulsarkit makes to a live ZooKeeper: an orphan cleanup's compare-and-delete of a ledger's
metadata node, on the version its reviewed plan pinned, and the re-creation of such a node from its backup.

Kept apart from :mod:`.zookeeper_live`, whose client can send only reads, so that no read path reaches a write.
:class:`ZkNodeWriter` can send two requests besides the session's own: ``delete(path, version)``, where
ZooKeeper itself compares the version (a node changed since it was read is never deleted: ``BadVersion``), and
``create(path, data)`` of a persistent node (never over an existing one: ``NodeExists``), with its missing
parents. Nothing else is encodable here. A server in read-only mode is refused before anything is sent.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from ..errors import BadVersionError, MetadataNotFoundError, MetadataStoreError, ZooKeeperServerError
from .zookeeper import Acl
from .zookeeper_live import (
    NO_NODE,
    SessionOptions,
    _Connection,
    _error,
    error_name,
    parse_connect_string,
    split_metadata_store_url,
)

OP_CREATE = 1
OP_DELETE = 2
BAD_VERSION = -103
NODE_EXISTS = -110
#: What Pulsar's brokers and bookies give ledger nodes when ZooKeeper authentication is off.
OPEN_ACL = (Acl(31, "world", "anyone"),)
_I = struct.Struct(">i")
#: The writer's session: one timeout to connect and per reply; its replies are small (a stat, an error).
WRITER_SESSION = SessionOptions(connect_timeout=30.0, request_timeout=30.0, max_frame=1 << 20)


def _string(s: str | bytes) -> bytes:
    raw = s.encode("utf-8") if isinstance(s, str) else s
    return _I.pack(len(raw)) + raw


def encode_delete(xid: int, path: str, version: int) -> bytes:
    """``DeleteRequest{path, version}``: deleted only if the node's data version is ``version``."""
    payload = struct.pack(">ii", xid, OP_DELETE) + _string(path) + _I.pack(version)
    return _I.pack(len(payload)) + payload


def encode_create(xid: int, path: str, data: bytes, acl: Sequence[Acl] = OPEN_ACL) -> bytes:
    """``CreateRequest{path, data, acl, flags 0}``: a persistent node, never an ephemeral or sequential one."""
    payload = struct.pack(">ii", xid, OP_CREATE) + _string(path) + _string(data) + _I.pack(len(acl))
    for a in acl:
        payload += _I.pack(a.perms) + _string(a.scheme) + _string(a.id)
    payload += _I.pack(0)
    return _I.pack(len(payload)) + payload


class ZkNodeWriter:
    """One session on the first server of ``url`` (``zk:host:port[,host:port][/chroot]``) that answers and is not
    in read-only mode; paths are below the chroot. Use as a context manager (the session is closed on exit)."""

    def __init__(self, url: str, *, session: SessionOptions = WRITER_SESSION) -> None:
        scheme, rest = split_metadata_store_url(url)
        if scheme != "zk":
            raise MetadataStoreError(f"{url!r} is not a ZooKeeper URL (zk:host:port[,host:port][/chroot])")
        self.connect = parse_connect_string(rest)
        reasons = []
        self._conn: _Connection | None = None
        for host, port in self.connect.hosts:
            try:
                conn = _Connection(host, port, self.connect.chroot, session)
            except ZooKeeperServerError as e:
                reasons.append(str(e))
                continue
            if conn.session.read_only:  # it would refuse every write: another server may take them
                conn.close()
                reasons.append(f"{host}:{port} is in read-only mode")
                continue
            self._conn = conn
            break
        if self._conn is None:
            raise _error(f"{self.connect}: no ZooKeeper server takes writes: {'; '.join(reasons)}")

    def _call(self, frame: bytes, what: str) -> int:
        conn = self._conn
        if conn is None:
            raise MetadataStoreError("the ZooKeeper session is closed")
        conn._send(frame)
        return conn._reply(conn.xid, what).err

    def _full(self, path: str) -> str:
        return self.connect.chroot + path if path != "/" else (self.connect.chroot or "/")

    def delete(self, path: str, version: int) -> None:
        """Deletes ``path`` if its data version is ``version``: :class:`BadVersionError` if the node changed,
        :class:`MetadataNotFoundError` if it is gone."""
        conn = self._conn
        assert conn is not None
        conn.xid += 1
        err = self._call(encode_delete(conn.xid, self._full(path), version), f"delete {path}")
        if err == BAD_VERSION:
            raise BadVersionError(f"{path}: its version is no longer {version}; not deleted")
        if err == NO_NODE:
            raise MetadataNotFoundError(f"{path}: no such node")
        if err:
            raise _error(f"delete {path}: {error_name(err)}", err)

    def create(self, path: str, data: bytes) -> None:
        """Creates the persistent node ``path`` holding ``data`` (and its missing parents, empty); an existing
        ``path`` is :class:`MetadataStoreError`, never overwritten."""
        conn = self._conn
        assert conn is not None
        conn.xid += 1
        err = self._call(encode_create(conn.xid, self._full(path), data), f"create {path}")
        if err == NO_NODE:  # a parent is missing: BookKeeper may have removed an empty one
            parent = path.rsplit("/", 1)[0] or "/"
            if parent != "/":
                try:
                    self.create(parent, b"")
                except MetadataStoreError as e:
                    if "already exists" not in str(e):
                        raise
            conn.xid += 1
            err = self._call(encode_create(conn.xid, self._full(path), data), f"create {path}")
        if err == NODE_EXISTS:
            raise MetadataStoreError(f"{path}: already exists; not overwritten")
        if err:
            raise _error(f"create {path}: {error_name(err)}", err)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> ZkNodeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["OPEN_ACL", "WRITER_SESSION", "ZkNodeWriter", "encode_create", "encode_delete"]
