"""A fake ZooKeeper server on 127.0.0.1 for the live reader's tests: it serves a :class:`Tree` (nodes with the
stats a server keeps, a zxid) to connect, exists, getData, getChildren2, ping and closeSession, records every
request, and can change the tree, mangle or drop a reply, refuse a node (NoAuth) or expire a resumed session.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

from pulsarkit.metadata import zookeeper_live as zl
from pulsarkit.metadata.zookeeper import ZkStat

_I = struct.Struct(">i")


def ustring(s: str) -> bytes:
    b = s.encode()
    return _I.pack(len(b)) + b


def stat_bytes(st: ZkStat) -> bytes:
    return struct.pack(">qqqqiiiqiiq", *st)


class Tree:
    """Nodes as a server keeps them, with its zxid; ``change``, ``create``, ``delete`` are writes by another
    client. ``history`` keeps the whole state (data and stat per node) as of every zxid since the tree was built."""

    def __init__(self, paths: dict[str, bytes]) -> None:
        self.zxid = 1
        self.nodes: dict[str, list[Any]] = {}
        self.history: dict[int, dict[str, tuple[bytes, ZkStat]]] = {}
        for p in sorted(paths, key=lambda p: (p.count("/"), p)):
            self.create(p, paths[p])
        self.history = {self.zxid: self.state()}

    def state(self) -> dict[str, tuple[bytes, ZkStat]]:
        return {p: (d, self.stat(p)) for p, (d, _) in self.nodes.items()}

    def _written(self) -> None:
        if self.history:
            self.history[self.zxid] = self.state()

    def create(self, path: str, data: bytes) -> None:
        self.zxid += 1
        z = self.zxid
        self.nodes[path] = [data, dict(czxid=z, mzxid=z, ctime=z * 10, mtime=z * 10, version=0, cversion=0, pzxid=z)]
        if path != "/":
            parent = self.nodes[path.rsplit("/", 1)[0] or "/"][1]
            parent["cversion"] += 1
            parent["pzxid"] = z
        self._written()

    def change(self, path: str, data: bytes) -> None:
        self.zxid += 1
        d, s = self.nodes[path]
        self.nodes[path] = [data, dict(s, mzxid=self.zxid, mtime=self.zxid * 10, version=s["version"] + 1)]
        self._written()

    def delete(self, path: str) -> None:
        self.zxid += 1
        del self.nodes[path]
        parent = self.nodes[path.rsplit("/", 1)[0] or "/"][1]
        parent["cversion"] += 1
        parent["pzxid"] = self.zxid
        self._written()

    def kids(self, path: str) -> list[str]:
        pre = "/" if path == "/" else path + "/"
        return [p[len(pre) :] for p in self.nodes if p != path and p.startswith(pre) and "/" not in p[len(pre) :]]

    def stat(self, path: str) -> ZkStat:
        data, s = self.nodes[path]
        n = len(self.kids(path))
        return ZkStat(
            s["czxid"], s["mzxid"], s["ctime"], s["mtime"], s["version"], s["cversion"], 0, 0, len(data), n, s["pzxid"]
        )


class FakeServer:
    """Answers connect, exists, getData, getChildren2, ping and closeSession from a :class:`Tree`; records every
    request (opcode, path, watch flag). ``on_request(server, n)`` runs before the n-th request is answered;
    ``mangle(n, frame)`` may replace the n-th reply frame (0: the connect response), after which the connection
    is closed."""

    def __init__(
        self,
        tree: Tree,
        *,
        noauth: tuple[str, ...] = (),
        on_request: Callable[[FakeServer, int], None] | None = None,
        mangle: Callable[[int, bytes], bytes | None] | None = None,
        silent: bool = False,
        drop_at: int | None = None,
        expire_resumed: bool = False,
    ) -> None:
        self.tree, self.noauth, self.on_request, self.mangle, self.silent = tree, noauth, on_request, mangle, silent
        self.drop_at, self.expire_resumed = drop_at, expire_resumed
        self.requests: list[tuple[int, str | None, int | None]] = []
        #: (session id, last zxid seen) of every ConnectRequest: 0 is a new session
        self.connects: list[tuple[int, int]] = []
        self.sessions = 0
        self.closed_sessions = 0
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.port = self.lsock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def url(self, chroot: str = "") -> str:
        return f"zk:127.0.0.1:{self.port}{chroot}"

    def stop(self) -> None:
        self.lsock.close()

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.lsock.accept()
            except OSError:
                return
            with conn:
                try:
                    self._session(conn)
                except (OSError, ConnectionError, struct.error):
                    pass

    @staticmethod
    def _read(conn: socket.socket, n: int) -> bytes:
        out = b""
        while len(out) < n:
            got = conn.recv(n - len(out))
            if not got:
                raise ConnectionError
            out += got
        return out

    def _frame(self, conn: socket.socket) -> bytes:
        return self._read(conn, _I.unpack(self._read(conn, 4))[0])

    def _send(self, conn: socket.socket, n: int, payload: bytes) -> bool:
        frame = _I.pack(len(payload)) + payload
        if self.mangle is not None:
            changed = self.mangle(n, frame)
            if changed is not None:
                conn.sendall(changed)
                return False
        conn.sendall(frame)
        return True

    def _session(self, conn: socket.socket) -> None:
        _, last_zxid, _, sid = struct.unpack_from(">iqiq", self._frame(conn))  # ConnectRequest
        self.connects.append((sid, last_zxid))
        if self.silent:
            self._read(conn, 1)  # never answers
        timeout = 30000
        if sid == 0:
            self.sessions += 1
            sid = 0x1234 + self.sessions
        elif self.expire_resumed:
            timeout = sid = 0
        if not self._send(conn, 0, struct.pack(">iiq", 0, timeout, sid) + _I.pack(16) + bytes(16)) or not timeout:
            return
        n = 0
        while True:
            req = self._frame(conn)
            n += 1
            if n == self.drop_at:
                self.drop_at = None
                return  # the connection is lost
            xid, op = struct.unpack_from(">ii", req)
            path = watch = None
            if len(req) > 8:
                ln = _I.unpack_from(req, 8)[0]
                path = req[12 : 12 + ln].decode()
                watch = req[12 + ln] if len(req) > 12 + ln else None
            self.requests.append((op, path, watch))
            if self.on_request is not None:
                self.on_request(self, n)
            t = self.tree
            if op == zl.OP_CLOSE_SESSION:
                self.closed_sessions += 1
                self._send(conn, n, struct.pack(">iqi", xid, t.zxid, 0))
                return
            if op == zl.OP_PING:
                if not self._send(conn, n, struct.pack(">iqi", -2, t.zxid, 0)):
                    return
                continue
            if path not in t.nodes:
                body, err = b"", zl.NO_NODE
            elif path in self.noauth and op != zl.OP_EXISTS:
                body, err = b"", zl.NO_AUTH
            elif op == zl.OP_GET_DATA:
                body, err = _I.pack(len(t.nodes[path][0])) + t.nodes[path][0] + stat_bytes(t.stat(path)), 0
            elif op == zl.OP_GET_CHILDREN2:
                kids = t.kids(path)
                body = _I.pack(len(kids)) + b"".join(ustring(k) for k in kids) + stat_bytes(t.stat(path))
                err = 0
            elif op == zl.OP_EXISTS:
                body, err = stat_bytes(t.stat(path)), 0
            else:
                body, err = b"", -6  # Unimplemented
            if not self._send(conn, n, struct.pack(">iqi", xid, t.zxid, err) + body):
                return
