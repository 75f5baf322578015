"""A live ZooKeeper, read live and read-only: ``zk:host:port[,host:port][/chroot]``, Pulsar's metadata-store URL.

The client is a small one of ZooKeeper's wire protocol (jute over TCP, the jute reader of :mod:`.zookeeper`) that
can only send read requests: connect (a read-only session is accepted), ``exists``, ``getData``,
``getChildren2``, ping and ``closeSession``. Every request is encoded by :func:`encode_request`, which refuses
any other opcode, and the watch flag is always false: no write, no ephemeral node, no watch can come from it by
construction. The only transactions its session causes are the server's own ``createSession`` and
``closeSession``.

Frames are ``[int length][payload]``; a request's payload is ``RequestHeader{xid, type}`` and the request, a
reply's ``ReplyHeader{xid, zxid, err}`` and, when ``err`` is 0, the response. Every length from the wire is
checked before anything is allocated: a frame against ``max_frame``, a buffer, string or vector against the
frame's bytes left; anything malformed is a :class:`ZooKeeperServerError` naming the server, the request and
the offset.

**One consistent read.** :class:`ZkLiveStore` walks the tree level by level (requests pipelined, replies in
order as ZooKeeper answers a session) and keeps it in memory; the session is closed when the walk is done. A
server answers every read with the zxid of its last applied transaction; the walk's first reply gives
``zxid``. A node whose ``czxid``, ``mzxid`` or ``pzxid`` is above it, a node whose two stats (``getData``'s,
``getChildren2``'s) differ, or a listed child that is gone, changed while the tree was read: the walk starts
again (``max_attempts`` in all, then :class:`ZooKeeperServerError` naming the nodes that changed). When none
did, every node read is as it was at ``zxid``: its data and child list last changed at or before it (a stat
records no zxid for an ACL change, so ``aversion`` alone may be newer). All attempts use one session, so the
server logs one ``createSession`` and one ``closeSession`` however many there are; a lost connection takes the
session over on the next server (with the last zxid seen: a server behind it refuses, so the read never goes
back in time) and starts the walk again. A node the session may not read (``NoAuth``) is left out with an
issue naming it; pulsarkit sends no credentials.

By default only the subtrees pulsarkit reads are walked (:data:`PULSAR_SUBTREES`; their ancestors' data and
the children on the way to them too), so that a busy ``/loadbalance`` or ``/namespace`` neither costs the
read time nor makes it retry; ``subtrees=None`` walks everything below the chroot. Paths are relative to the
chroot, as the brokers see them.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import MetadataStoreError, ZooKeeperConnectionError, ZooKeeperServerError
from .store import Stat
from .zookeeper import OP_CLOSE_SESSION, Issue, ZkStat, _In, next_sequential_suffix

# ZooDefs.OpCode: the reads this client sends (and nothing else).
OP_EXISTS = 3
OP_GET_DATA = 4
OP_PING = 11
OP_GET_CHILDREN2 = 12
READ_OPS = frozenset({OP_EXISTS, OP_GET_DATA, OP_GET_CHILDREN2, OP_PING, OP_CLOSE_SESSION})
_PATH_OPS = (OP_EXISTS, OP_GET_DATA, OP_GET_CHILDREN2)
OP_NAMES = {
    OP_EXISTS: "exists",
    OP_GET_DATA: "getData",
    OP_GET_CHILDREN2: "getChildren2",
    OP_PING: "ping",
    OP_CLOSE_SESSION: "closeSession",
}
XID_NOTIFICATION = -1
XID_PING = -2

# KeeperException.Code
OK = 0
CONNECTION_LOSS = -4
MARSHALLING_ERROR = -5
BAD_ARGUMENTS = -8
NO_NODE = -101
NO_AUTH = -102
SESSION_EXPIRED = -112
ERROR_NAMES = {
    -1: "SystemError",
    -2: "RuntimeInconsistency",
    -3: "DataInconsistency",
    CONNECTION_LOSS: "ConnectionLoss",
    MARSHALLING_ERROR: "MarshallingError",
    -6: "Unimplemented",
    -7: "OperationTimeout",
    BAD_ARGUMENTS: "BadArguments",
    -12: "UnknownSession",
    -13: "NewConfigNoQuorum",
    -14: "ReconfigInProgress",
    NO_NODE: "NoNode",
    NO_AUTH: "NoAuth",
    SESSION_EXPIRED: "SessionExpired",
    -115: "AuthFailed",
    -118: "SessionMoved",
    -119: "NotReadOnly",
    -122: "RequestTimeout",
    -124: "SessionClosedRequireSaslAuth",
    -127: "Throttled",
}

#: The subtrees of a Pulsar metadata store (and configuration store) that pulsarkit reads.
PULSAR_SUBTREES = ("/admin", "/ledgers", "/managed-ledgers", "/schemas")
DEFAULT_PORT = 2181
#: The largest frame accepted; ZooKeeper's own default (``jute.maxbuffer``) is 1 MiB, Pulsar deployments raise it.
DEFAULT_MAX_FRAME = 64 << 20
DEFAULT_MAX_NODES = 10_000_000
DEFAULT_MAX_BYTES = 8 << 30
#: Requests in flight at once: enough to hide the round trips, far below the server's globalOutstandingLimit
#: (1000), past which it stops reading from every client, the brokers included.
WINDOW = 256
_STAT = struct.Struct(">qqqqiiiqiiq")  # Stat: 68 bytes
_I = struct.Struct(">i")
_REPLY_HEADER = struct.Struct(">iqi")
_RECV_SIZE = 1 << 16
_PASSWD_LEN = 16


class _WireIn(_In):
    """The jute reader of the data directories over one reply frame; malformed bytes are the server's error."""

    __slots__ = ()
    error = ZooKeeperServerError

    def stat(self) -> ZkStat:
        self.need(_STAT.size, "stat")
        st = ZkStat(*_STAT.unpack_from(self.buf, self.pos))
        self.pos += _STAT.size
        if st.data_length < 0 or st.num_children < 0:
            raise self.fail(f"stat with a negative length or child count {st}", self.pos - _STAT.size)
        return st


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"error {code}")


def _error(msg: str, code: int | None = None, cls: type[ZooKeeperServerError] = ZooKeeperServerError) -> Exception:
    e = cls(msg)
    e.code = code
    return e


# ------------------------------------------------------------------------------------------ URLs


class ConnectString(NamedTuple):
    hosts: tuple[tuple[str, int], ...]
    chroot: str  # "" for none, else "/a/b"

    def __str__(self) -> str:
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.hosts)
        return f"zk:{hosts}{self.chroot}"


_OTHER_STORES = {
    "etcd": "etcd",
    "oxia": "Oxia",
    "memory": "an in-memory store",
    "local-memory": "an in-memory store",
}


def split_metadata_store_url(url: str) -> tuple[str, str]:
    """A Pulsar metadata-store URL as ``(scheme, rest)``: ``("zk", "host:port,.../chroot")`` or
    ``("rocksdb", PATH)``. BookKeeper's ``metadata-store:`` prefix is dropped and a bare ``host:port[...]`` is
    ZooKeeper, as in Pulsar; etcd, Oxia, memory and any other scheme are refused (:class:`MetadataStoreError`)."""
    rest = url.strip()
    if rest.startswith("metadata-store:"):
        rest = rest[len("metadata-store:") :]
    scheme, sep, tail = rest.partition(":")
    if sep and scheme in ("zk", "rocksdb"):
        if scheme == "zk" and tail.startswith("//"):
            tail = tail[2:]
        if not tail:
            raise MetadataStoreError(f"metadata store URL {url!r}: nothing after {scheme}:")
        return scheme, tail
    if sep and scheme in _OTHER_STORES:
        raise MetadataStoreError(
            f"metadata store URL {url!r}: {_OTHER_STORES[scheme]} is not supported; pulsarkit reads "
            "zk:host:port[,host:port][/chroot] (live, read-only), rocksdb:PATH, or a ZooKeeper data directory "
            "(--zookeeper-dir)"
        )
    if re.fullmatch(
        r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)(:\d+)?(,(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)(:\d+)?)*(/.*)?", rest
    ):
        return "zk", rest  # Pulsar reads a URL without a scheme as ZooKeeper's connect string
    raise MetadataStoreError(
        f"metadata store URL {url!r}: unknown scheme; pulsarkit reads zk:host:port[,host:port][/chroot] or rocksdb:PATH"
    )


def _check_path(path: str, what: str) -> None:
    if not path.startswith("/") or (path != "/" and path.endswith("/")):
        raise MetadataStoreError(f"{what} {path!r} is not an absolute ZooKeeper path")
    if path != "/" and any(part in ("", ".", "..") for part in path[1:].split("/")):
        raise MetadataStoreError(f"{what} {path!r} has an empty, '.' or '..' component")
    if "\x00" in path:
        raise MetadataStoreError(f"{what} {path!r} holds a NUL character")


def parse_connect_string(spec: str) -> ConnectString:
    """``host:port[,host:port][/chroot]`` (``zk:`` already removed); a host without a port gets 2181."""
    slash = spec.find("/")
    hosts_part, chroot = (spec, "") if slash < 0 else (spec[:slash], spec[slash:])
    if chroot:
        _check_path(chroot, "chroot")
        if chroot == "/":
            chroot = ""
    hosts = []
    for item in hosts_part.split(","):
        item = item.strip()
        if item.startswith("["):  # [ipv6]:port
            host, _, port_s = item[1:].partition("]")
            port_s = port_s[1:] if port_s.startswith(":") else port_s
        elif item.count(":") == 1:
            host, _, port_s = item.partition(":")
        else:
            host, port_s = item, ""
        if not host:
            raise MetadataStoreError(f"ZooKeeper connect string {spec!r}: an empty host")
        try:
            port = int(port_s) if port_s else DEFAULT_PORT
        except ValueError:
            port = -1
        if not 0 < port < 65536:
            raise MetadataStoreError(f"ZooKeeper connect string {spec!r}: bad port in {item!r}")
        hosts.append((host, port))
    return ConnectString(tuple(hosts), chroot)


# --------------------------------------------------------------------------------------- the codec


def encode_request(xid: int, op: int, path: str | None = None) -> bytes:
    """One request frame. Only :data:`READ_OPS` exist here, and the watch flag is always false."""
    if op not in READ_OPS:
        raise ZooKeeperServerError(f"opcode {op} is not a read: pulsarkit sends no other request to ZooKeeper")
    payload = struct.pack(">ii", xid, op)
    if op in _PATH_OPS:
        if path is None:
            raise ZooKeeperServerError(f"{OP_NAMES[op]} needs a path")
        raw = path.encode("utf-8")
        payload += _I.pack(len(raw)) + raw + b"\x00"  # watch: false
    return _I.pack(len(payload)) + payload


class ConnectResponse(NamedTuple):
    protocol_version: int
    timeout_ms: int
    session_id: int
    passwd: bytes
    read_only: bool


def encode_connect(
    timeout_ms: int, session_id: int = 0, passwd: bytes = bytes(_PASSWD_LEN), last_zxid: int = 0
) -> bytes:
    """``ConnectRequest{protocolVersion 0, lastZxidSeen, timeOut, sessionId, passwd}`` and ``readOnly`` true: a
    server cut off from its quorum (read-only mode) may answer too, since only reads follow."""
    payload = struct.pack(">iqiq", 0, last_zxid, timeout_ms, session_id) + _I.pack(len(passwd)) + passwd + b"\x01"
    return _I.pack(len(payload)) + payload


def decode_connect_response(frame: bytes, where: str = "server") -> ConnectResponse:
    inp = _WireIn(frame, f"{where} connect response")
    version = inp.int("protocol version")
    timeout = inp.int("session timeout")
    sid = inp.long("session id")
    passwd = inp.buffer("session password") or b""
    if len(passwd) > 64:  # the server's is 16 bytes; kept to resume the session on another server
        raise inp.fail(f"session password of {len(passwd)} bytes")
    read_only = inp.bool("read-only flag") if inp.left() else False
    if inp.left():
        raise inp.fail(f"{inp.left()} bytes after the connect response")
    return ConnectResponse(version, timeout, sid, passwd, read_only)


class Reply(NamedTuple):
    xid: int
    zxid: int
    err: int
    body: _WireIn  # positioned after the header


def decode_reply(frame: bytes, where: str = "server") -> Reply:
    inp = _WireIn(frame, where)
    inp.need(_REPLY_HEADER.size, "reply header")
    xid, zxid, err = _REPLY_HEADER.unpack_from(frame)
    inp.pos = _REPLY_HEADER.size
    return Reply(xid, zxid, err, inp)


def _done(inp: _WireIn, what: str) -> None:
    if inp.left():
        raise inp.fail(f"{inp.left()} bytes after the {what} response")


def decode_exists(inp: _WireIn) -> ZkStat:
    st = inp.stat()
    _done(inp, "exists")
    return st


def decode_get_data(inp: _WireIn) -> tuple[bytes, ZkStat]:
    data = inp.buffer("node data")
    st = inp.stat()
    _done(inp, "getData")
    data = data or b""
    if st.data_length != len(data):
        raise inp.fail(f"getData: {len(data)} data bytes, the stat says {st.data_length}")
    return data, st


def decode_get_children2(inp: _WireIn) -> tuple[list[str], ZkStat]:
    n = inp.count("children", 4) or 0
    names = []
    for _ in range(n):
        at = inp.pos
        name = inp.string("child name")
        if not name or "/" in name or name in (".", "..") or "\x00" in name:
            raise inp.fail(f"child name {name!r} is not a node name", at)
        names.append(name)
    st = inp.stat()
    _done(inp, "getChildren2")
    if st.num_children != len(names):
        raise inp.fail(f"getChildren2: {len(names)} children, the stat says {st.num_children}")
    if len(set(names)) != len(names):
        raise inp.fail("getChildren2: a child listed twice")
    return names, st


# ------------------------------------------------------------------------------------ the connection


@dataclass(frozen=True)
class SessionOptions:
    """How one session talks to a server: its timeout asked of the server, the seconds to connect and to wait
    for a reply, and the largest reply frame accepted (checked before it is read). The reader and the writer
    (:mod:`.zookeeper_write`) open their sessions with it."""

    session_timeout_ms: int = 30_000
    connect_timeout: float = 10.0
    request_timeout: float = 30.0
    max_frame: int = DEFAULT_MAX_FRAME


class Resume(NamedTuple):
    """An open session to take over on another connection, as ZooKeeper's clients do after a lost one."""

    session_id: int
    passwd: bytes
    last_zxid: int


class _Connection:
    """One server, one session (new, or ``resume``d); requests are pipelined and answered in order, as ZooKeeper
    answers a session."""

    def __init__(
        self,
        host: str,
        port: int,
        chroot: str,
        options: SessionOptions,
        resume: Resume | None = None,
    ) -> None:
        self.where = f"{host}:{port}"
        self.chroot = chroot
        self.max_frame = options.max_frame
        self.xid = 0
        self.last_zxid = resume.last_zxid if resume is not None else 0
        self._in = bytearray()  # bytes received, not yet taken from ``_at`` on
        self._at = 0
        try:
            self.sock = socket.create_connection((host, port), timeout=options.connect_timeout)
        except OSError as e:
            raise _error(f"{self.where}: {e}", None, ZooKeeperConnectionError) from None
        try:
            self.sock.settimeout(options.request_timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if resume is None:
                self._send(encode_connect(options.session_timeout_ms))
            else:  # a server behind the zxid already seen refuses it: the read never goes back in time
                self._send(
                    encode_connect(options.session_timeout_ms, resume.session_id, resume.passwd, resume.last_zxid)
                )
            self.session = decode_connect_response(self._frame(), self.where)
            if self.session.timeout_ms <= 0:
                raise _error(f"{self.where}: the server refused the session (expired)", SESSION_EXPIRED)
            if resume is not None and self.session.session_id != resume.session_id:
                raise _error(f"{self.where}: resumed session {resume.session_id:#x}, got {self.session.session_id:#x}")
        except BaseException:
            self.sock.close()
            raise
        self.last_sent = time.monotonic()

    def _send(self, data: bytes | bytearray) -> None:
        try:
            self.sock.sendall(data)
        except OSError as e:
            raise _error(f"{self.where}: connection lost while sending: {e}", CONNECTION_LOSS, ZooKeeperConnectionError)
        self.last_sent = time.monotonic()

    def _recv(self, n: int) -> bytes:
        """``n`` bytes; the socket is read in large pieces (a pipelined batch's replies arrive together)."""
        while len(self._in) - self._at < n:
            if self._at:
                del self._in[: self._at]
                self._at = 0
            try:
                chunk = self.sock.recv(max(_RECV_SIZE, n - len(self._in)))
            except TimeoutError:
                raise _error(f"{self.where}: no reply in time", CONNECTION_LOSS, ZooKeeperConnectionError) from None
            except OSError as e:
                raise _error(f"{self.where}: connection lost: {e}", CONNECTION_LOSS, ZooKeeperConnectionError) from None
            if not chunk:
                raise _error(
                    f"{self.where}: the server closed the connection", CONNECTION_LOSS, ZooKeeperConnectionError
                )
            self._in += chunk
        out = bytes(self._in[self._at : self._at + n])
        self._at += n
        return out

    def _frame(self) -> bytes:
        n = _I.unpack(self._recv(4))[0]
        if n < 0 or n > self.max_frame:
            raise _error(f"{self.where}: a reply frame of {n} bytes (at most {self.max_frame} accepted)")
        return self._recv(n)

    def _reply(self, xid: int, what: str) -> Reply:
        for _ in range(10_000):  # replies the session did not ask for are skipped, a bounded number of them
            r = decode_reply(self._frame(), f"{self.where} reply to {what}")
            if r.xid in (XID_NOTIFICATION, XID_PING) and r.xid != xid:
                continue
            if r.xid != xid:
                raise _error(f"{self.where}: reply xid {r.xid} to {what}, expected {xid}")
            if r.zxid > self.last_zxid:
                self.last_zxid = r.zxid
            return r
        raise _error(f"{self.where}: too many unrequested replies before the one to {what}")

    def _keep_alive(self) -> None:
        # Any request renews the session; a ping only when nothing was sent for a third of its timeout.
        if time.monotonic() - self.last_sent > self.session.timeout_ms / 3000:
            self.ping()

    def ping(self) -> None:
        self._send(encode_request(XID_PING, OP_PING))
        r = self._reply(XID_PING, "ping")
        if r.err:
            raise _error(f"{self.where}: ping: {error_name(r.err)}", r.err)

    def calls(self, requests: Sequence[tuple[int, str]]) -> list[tuple[str, Reply]]:
        """``(op, path)`` requests, paths relative to the chroot, pipelined ``WINDOW`` at a time."""
        self._keep_alive()
        out = []
        for i in range(0, len(requests), WINDOW):
            chunk = requests[i : i + WINDOW]
            frames = bytearray()
            first = self.xid + 1
            for op, path in chunk:
                self.xid += 1
                full = self.chroot + path if path != "/" else (self.chroot or "/")
                frames += encode_request(self.xid, op, full)
            self._send(frames)
            for k, (op, path) in enumerate(chunk):
                what = f"{OP_NAMES[op]} {path}"
                out.append((what, self._reply(first + k, what)))
        return out

    def close(self) -> None:
        """``closeSession``, answered, then the socket: the session ends now, not at its timeout."""
        try:
            self.xid += 1
            self._send(encode_request(self.xid, OP_CLOSE_SESSION))
            self._reply(self.xid, "closeSession")
        except ZooKeeperServerError:
            pass  # the session then expires on its own; it owns nothing and watches nothing
        finally:
            self.sock.close()


# ------------------------------------------------------------------------------------------ the store


class _Changed(Exception):
    """The walk saw a node changed after its start: the attempt is discarded."""


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root + "/")


def _join(parent: str, name: str) -> str:
    return ("" if parent == "/" else parent) + "/" + name


class ZkLiveStore:
    """A live ZooKeeper read once, consistently and read-only; satisfies :class:`.reader.MetadataReader`.

    ``url`` is ``zk:host:port[,host:port][/chroot]`` (or the connect string alone). Hosts are tried in order, the
    next one when a server cannot be reached or its connection is lost (which also starts the walk again);
    ``session`` is how each session talks to its server (:class:`SessionOptions`). After opening: ``zxid`` (the
    transaction the state read holds), ``attempts``, ``session_id`` (the session used last, closed), ``server``,
    ``read_only`` (the server was in read-only mode), ``issues`` (nodes left out, each named), ``seconds`` (the
    read's duration).
    """

    def __init__(
        self,
        url: str,
        *,
        subtrees: Sequence[str] | None = PULSAR_SUBTREES,
        session: SessionOptions = SessionOptions(),
        max_attempts: int = 5,
        max_nodes: int = DEFAULT_MAX_NODES,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        scheme, rest = split_metadata_store_url(url)
        if scheme != "zk":
            raise MetadataStoreError(f"{url!r} is not a ZooKeeper URL (zk:host:port[,host:port][/chroot])")
        self.connect = parse_connect_string(rest)
        self.url = str(self.connect)
        self.subtrees = None if subtrees is None else tuple(subtrees)
        for s in self.subtrees or ():
            _check_path(s, "subtree")
        if max_attempts < 1:
            raise MetadataStoreError("max_attempts must be at least 1")
        self.session_options = session
        self.max_attempts, self.max_nodes, self.max_bytes = max_attempts, max_nodes, max_bytes
        self.issues: list[Issue] = []
        self.attempts = 0
        self.session_id = 0
        self.server = ""
        self.read_only = False
        self._nodes: dict[str, tuple[bytes, ZkStat]] = {}
        self._children: dict[str, list[str]] = {}
        self._sorted: list[str] | None = None
        started = time.monotonic()
        self.zxid = self._read()
        self.seconds = time.monotonic() - started

    # -- the read ------------------------------------------------------------------------------------

    def _connect(self, start: int, resume: Resume | None) -> tuple[_Connection, int]:
        """The first server from ``start`` on (round) that answers; an expired ``resume`` gets a new session."""
        reasons = []
        hosts = self.connect.hosts
        for k in range(len(hosts)):
            i = (start + k) % len(hosts)
            host, port = hosts[i]
            try:
                return _Connection(host, port, self.connect.chroot, self.session_options, resume), i
            except ZooKeeperServerError as e:
                if resume is not None and e.code == SESSION_EXPIRED:
                    resume = None
                    try:
                        return _Connection(host, port, self.connect.chroot, self.session_options), i
                    except ZooKeeperServerError as e2:
                        e = e2
                reasons.append(str(e))
        raise _error(
            f"{self.url}: no ZooKeeper server could be read: {'; '.join(reasons)}", None, ZooKeeperConnectionError
        )

    def _read(self) -> int:
        """Attempts share one session (its only transactions: one createSession, one closeSession); a lost
        connection takes the session over on the next server and starts the walk again."""
        host = 0
        changed: list[str] = []
        lost: list[str] = []
        conn: _Connection | None = None
        resume: Resume | None = None
        try:
            while self.attempts < self.max_attempts:
                if self.attempts:
                    time.sleep(min(0.05 * 2 ** (self.attempts - 1), 2.0))  # let a burst of writes pass
                self.attempts += 1
                if conn is None:
                    conn, host = self._connect(host, resume)
                    self.server, self.session_id = conn.where, conn.session.session_id
                    self.read_only = conn.session.read_only
                try:
                    return self._walk(conn)
                except _Changed as e:
                    changed = list(e.args[0])
                except ZooKeeperConnectionError as e:
                    lost.append(str(e))
                    changed = []
                    resume = Resume(conn.session.session_id, conn.session.passwd, conn.last_zxid)
                    conn.sock.close()
                    conn = None
                    host += 1
        finally:
            if conn is not None:
                conn.close()
        if changed:
            shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
            raise _error(
                f"{self.url}: no consistent read in {self.attempts} attempt(s): the tree kept changing while it "
                f"was read (last: {shown})"
            )
        raise _error(
            f"{self.url}: the read failed {self.attempts} time(s): {'; '.join(lost)}", None, ZooKeeperConnectionError
        )

    def _wanted(self, path: str) -> tuple[bool, bool]:
        """(inside a subtree read whole, on the way to one)."""
        if self.subtrees is None:
            return True, False
        inside = any(_under(path, s) for s in self.subtrees)
        on_way = any(_under(s, path) and s != path for s in self.subtrees)
        return inside, on_way

    def _walk(self, conn: _Connection) -> int:
        nodes: dict[str, tuple[bytes, ZkStat]] = {}
        children: dict[str, list[str]] = {}
        issues: list[Issue] = []
        changed: list[str] = []
        total = 0
        zxid = -1
        level = ["/"]
        while level:
            for (what, r), path in zip(conn.calls([(OP_GET_DATA, p) for p in level]), level, strict=True):
                if zxid < 0:
                    zxid = r.zxid  # the first reply: the state every node must show
                if not self._usable(r, what, path, issues, changed):
                    continue
                data, st = decode_get_data(r.body)
                if max(st.czxid, st.mzxid, st.pzxid) > zxid:
                    changed.append(path)
                nodes[path] = (data, st)
                total += len(data)
            if len(nodes) > self.max_nodes or total > self.max_bytes:
                raise self._too_big()
            parents = [p for p in level if p in nodes and nodes[p][1].num_children > 0]
            nxt = []
            for (what, r), path in zip(conn.calls([(OP_GET_CHILDREN2, p) for p in parents]), parents, strict=True):
                if not self._usable(r, what, path, issues, changed):
                    continue
                names, st = decode_get_children2(r.body)
                if st != nodes[path][1]:
                    changed.append(path)
                kids = []
                for name in sorted(names):
                    child = _join(path, name)
                    inside, on_way = self._wanted(child)
                    if inside or on_way:
                        kids.append(name)
                        nxt.append(child)
                children[path] = kids
                if len(nodes) + len(nxt) > self.max_nodes:  # before asking for them
                    raise self._too_big()
            level = nxt
        if changed:
            raise _Changed(changed)
        self._nodes, self._children, self.issues = nodes, children, issues
        return zxid

    def _too_big(self) -> Exception:
        return _error(
            f"{self.url}: more than {self.max_nodes} nodes or {self.max_bytes} bytes of data: not read (max_nodes, "
            "max_bytes; subtrees limits the read)"
        )

    def _usable(self, r: Reply, what: str, path: str, issues: list[Issue], changed: list[str]) -> bool:
        if r.err == OK:
            return True
        if r.err == NO_NODE:
            if path == "/":
                chroot = self.connect.chroot or "/"
                raise _error(f"{self.url}: the chroot {chroot} does not exist on {r.body.file.split()[0]}", NO_NODE)
            changed.append(path)  # listed by its parent, gone since
            return False
        if r.err == NO_AUTH:
            issues.append(Issue(self.url, -1, f"{path}: not readable without authentication (NoAuth): left out"))
            return False
        if r.err in (CONNECTION_LOSS, SESSION_EXPIRED):
            raise _error(f"{r.body.file}: {error_name(r.err)}", r.err, ZooKeeperConnectionError)
        raise _error(f"{r.body.file}: {error_name(r.err)}", r.err)

    # -- MetadataReader --------------------------------------------------------------------------------

    def stat(self, path: str) -> ZkStat | None:
        """The stat the server served for ``path``, or None."""
        got = self._nodes.get(path)
        return None if got is None else got[1]

    def next_sequential(self, parent: str) -> int | None:
        return next_sequential_suffix(self.stat(parent))

    def get(self, path: str) -> tuple[bytes, Stat] | None:
        got = self._nodes.get(path)
        if got is None:
            return None
        data, st = got
        eph = st.ephemeral_owner != 0  # the server serves 0 for persistent, container and TTL nodes
        return data, Stat(path, st.version, st.ctime, st.mtime, eph, st.ephemeral_owner)

    def exists(self, path: str) -> bool:
        return path in self._nodes

    def children(self, path: str) -> list[str]:
        """The children read (within ``subtrees``), sorted; a child the session may not read is listed."""
        return list(self._children.get(path, ()))

    def keys(self, prefix: str = "/") -> Iterator[str]:
        if self._sorted is None:
            self._sorted = sorted(self._nodes, key=lambda p: p.encode("utf-8", "surrogatepass"))
        for p in self._sorted:
            if p.startswith(prefix):
                yield p

    def __len__(self) -> int:
        return len(self._nodes)

    def close(self) -> None:
        """The session was closed when the read ended; present so the store is used like the others."""

    def __enter__(self) -> ZkLiveStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> str:
        what = "everything" if self.subtrees is None else ", ".join(self.subtrees)
        return (
            f"ZooKeeper {self.url} (live, read-only{', server in read-only mode' if self.read_only else ''}): "
            f"{len(self)} nodes of {what} from {self.server}, zxid {self.zxid:#x}, {self.attempts} attempt(s)"
        )

    def __repr__(self) -> str:
        return f"ZkLiveStore({self.url!r}, zxid={self.zxid:#x}, {len(self)} nodes)"
