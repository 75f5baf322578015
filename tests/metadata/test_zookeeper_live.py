"""The live ZooKeeper reader's wire codec and read rules, against a small fake server on 127.0.0.1.

The real server is the interop test's (tests/interop/test_interop_zk_live.py); these pin the encoding (against
kazoo's, an independent implementation, where it is installed), the read-only construction (no opcode but a read,
the watch flag always false), the consistency rule (a node changed during the walk makes it start again), and
that no server bytes raise anything but ZooKeeperServerError.
"""

from __future__ import annotations

import dataclasses
import random
import socket
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulsarkit.errors import MetadataStoreError, PulsarkitError, ZooKeeperConnectionError, ZooKeeperServerError
from pulsarkit.metadata import zookeeper_live as zl
from pulsarkit.metadata.reader import MetadataReader
from pulsarkit.metadata.zookeeper import ZkStat
from pulsarkit.scan.datadir import open_data_dir
from zk_fake import FakeServer, Tree, stat_bytes, ustring

try:
    import kazoo.protocol.serialization as kz
except ImportError:  # pragma: no cover - a test dependency; the oracle tests skip without it
    kz = None

_I = struct.Struct(">i")


PULSAR = {
    "/": b"",
    "/zookeeper": b"",
    "/admin": b"",
    "/admin/policies": b"",
    "/admin/policies/public": b"{}",
    "/ledgers": b"",
    "/ledgers/00": b"",
    "/ledgers/00/0000": b"",
    "/ledgers/00/0000/L0001": b"\x01meta",
    "/ledgers/00/0000/L0002": b"\x02meta",
    "/managed-ledgers": b"",
    "/managed-ledgers/public": b"",
    "/managed-ledgers/public/default": b"",
    "/managed-ledgers/public/default/persistent": b"",
    "/managed-ledgers/public/default/persistent/t": b"ml",
    "/loadbalance": b"",
    "/loadbalance/brokers": b"",
    "/loadbalance/brokers/b1": b"load",
}


def _store(url: str, **kw: Any) -> zl.ZkLiveStore:
    """A store read from ``url``; ``kw`` names the store's arguments and the session's options alike."""
    session = {f.name: kw.pop(f.name) for f in dataclasses.fields(zl.SessionOptions) if f.name in kw}
    return zl.ZkLiveStore(url, session=zl.SessionOptions(**{"request_timeout": 5.0, **session}), **kw)


# ------------------------------------------------------------------------------------------- URLs


@pytest.mark.parametrize(
    "url, hosts, chroot",
    [
        ("zk:127.0.0.1:2181", [("127.0.0.1", 2181)], ""),
        ("zk:a:1,b:2,c/pulsar", [("a", 1), ("b", 2), ("c", 2181)], "/pulsar"),
        ("zk://a:1/x/y", [("a", 1)], "/x/y"),
        ("metadata-store:zk:a:1/", [("a", 1)], ""),
        ("zk:[::1]:2182,host", [("::1", 2182), ("host", 2181)], ""),
        ("a:3000,b:3001/c", [("a", 3000), ("b", 3001)], "/c"),  # no scheme: ZooKeeper, as in Pulsar
    ],
)
def test_connect_strings(url: str, hosts: list[tuple[str, int]], chroot: str) -> None:
    scheme, rest = zl.split_metadata_store_url(url)
    assert scheme == "zk"
    cs = zl.parse_connect_string(rest)
    assert list(cs.hosts) == hosts and cs.chroot == chroot


@pytest.mark.parametrize(
    "url, message",
    [
        ("etcd:http://127.0.0.1:2379", "etcd is not supported"),
        ("oxia://127.0.0.1:6648", "Oxia is not supported"),
        ("metadata-store:oxia://x:1", "Oxia is not supported"),
        ("memory:local", "in-memory"),
        ("http://x", "unknown scheme"),
        ("zk:", "nothing after zk:"),
        ("/a/path", "unknown scheme"),
    ],
)
def test_other_stores_are_refused(url: str, message: str) -> None:
    with pytest.raises(MetadataStoreError, match=message):
        zl.split_metadata_store_url(url)


def test_rocksdb_url() -> None:
    assert zl.split_metadata_store_url("rocksdb:/data/metadata") == ("rocksdb", "/data/metadata")
    assert zl.split_metadata_store_url("metadata-store:rocksdb:rel/dir") == ("rocksdb", "rel/dir")


@pytest.mark.parametrize("spec", ["a:1/x/", "a:1/x//y", "a:1/x/../y", "a:99999", "a:port", ",a:1", "a:1/x\x00"])
def test_bad_connect_strings(spec: str) -> None:
    with pytest.raises(MetadataStoreError):
        zl.parse_connect_string(spec)


# ------------------------------------------------------------------------------------------ the codec


@given(op=st.integers(-(2**31), 2**31 - 1).filter(lambda o: o not in zl.READ_OPS), xid=st.integers(0, 2**31 - 1))
def test_only_reads_can_be_encoded(op: int, xid: int) -> None:
    with pytest.raises(ZooKeeperServerError, match="not a read"):
        zl.encode_request(xid, op, "/a")


paths = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40).map(lambda s: "/" + s)


@given(
    xid=st.integers(1, 2**31 - 1), op=st.sampled_from([zl.OP_EXISTS, zl.OP_GET_DATA, zl.OP_GET_CHILDREN2]), path=paths
)
def test_read_requests_never_set_a_watch(xid: int, op: int, path: str) -> None:
    frame = zl.encode_request(xid, op, path)
    raw = path.encode()
    assert frame == struct.pack(">iii", len(frame) - 4, xid, op) + _I.pack(len(raw)) + raw + b"\x00"


@pytest.mark.skipif(kz is None, reason="kazoo (scripts/requirements-test.txt) is the independent encoder")
@given(xid=st.integers(1, 2**31 - 1), path=paths, which=st.sampled_from(["exists", "getData", "getChildren2"]))
def test_requests_equal_kazoos(xid: int, path: str, which: str) -> None:
    cls, op = {"exists": (kz.Exists, 3), "getData": (kz.GetData, 4), "getChildren2": (kz.GetChildren2, 12)}[which]
    body = struct.pack(">ii", xid, cls.type) + bytes(cls(path, None).serialize())
    assert zl.encode_request(xid, op, path) == _I.pack(len(body)) + body


@pytest.mark.skipif(kz is None, reason="kazoo (scripts/requirements-test.txt) is the independent encoder")
@given(timeout=st.integers(0, 2**31 - 1), sid=st.integers(-(2**63), 2**63 - 1), zxid=st.integers(0, 2**63 - 1))
def test_connect_request_equals_kazoos(timeout: int, sid: int, zxid: int) -> None:
    pw = bytes(range(16))
    body = bytes(kz.Connect(0, zxid, timeout, sid, pw, True).serialize())
    assert zl.encode_connect(timeout, sid, pw, zxid) == _I.pack(len(body)) + body


stats = st.builds(
    ZkStat,
    *([st.integers(-(2**63), 2**63 - 1)] * 4),
    *([st.integers(-(2**31), 2**31 - 1)] * 3),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 0),  # data_length, num_children: set to match below
    st.integers(0, 0),
    st.integers(-(2**63), 2**63 - 1),
)


@given(data=st.binary(max_size=300), st_=stats)
def test_get_data_response_roundtrip(data: bytes, st_: ZkStat) -> None:
    s = st_._replace(data_length=len(data))
    frame = struct.pack(">iqi", 7, 99, 0) + _I.pack(len(data)) + data + stat_bytes(s)
    r = zl.decode_reply(frame)
    assert (r.xid, r.zxid, r.err) == (7, 99, 0)
    assert zl.decode_get_data(r.body) == (data, s)
    if kz is not None:
        got, zst = kz.GetData.deserialize(frame[16:], 0)
        assert (got or b"", tuple(zst)) == (data, tuple(s))


names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), min_size=1, max_size=12)


@given(kids=st.lists(names.filter(lambda n: n not in (".", "..")), unique=True, max_size=20), st_=stats)
def test_get_children2_response_roundtrip(kids: list[str], st_: ZkStat) -> None:
    s = st_._replace(num_children=len(kids))
    body = _I.pack(len(kids)) + b"".join(ustring(k) for k in kids) + stat_bytes(s)
    r = zl.decode_reply(struct.pack(">iqi", 1, 2, 0) + body)
    assert zl.decode_get_children2(r.body) == (kids, s)
    if kz is not None:
        got, zst = kz.GetChildren2.deserialize(body, 0)
        assert (got, tuple(zst)) == (kids, tuple(s))


def test_null_data_is_empty() -> None:
    s = ZkStat(1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1)
    r = zl.decode_reply(struct.pack(">iqi", 1, 1, 0) + _I.pack(-1) + stat_bytes(s))
    assert zl.decode_get_data(r.body) == (b"", s)


@pytest.mark.parametrize(
    "body, message",
    [
        (_I.pack(2) + b"ab" + stat_bytes(ZkStat(1, 1, 0, 0, 0, 0, 0, 0, 5, 0, 1)), "the stat says 5"),
        (_I.pack(10**9), "needs 1000000000 bytes, 0 left"),
        (_I.pack(-7), "negative length"),
        (_I.pack(0) + stat_bytes(ZkStat(1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1)) + b"x", "1 bytes after"),
    ],
)
def test_malformed_get_data(body: bytes, message: str) -> None:
    r = zl.decode_reply(struct.pack(">iqi", 1, 1, 0) + body, "srv reply to getData /a")
    with pytest.raises(ZooKeeperServerError, match=message) as e:
        zl.decode_get_data(r.body)
    assert "srv reply to getData /a" in str(e.value)


@pytest.mark.parametrize("name", ["", "a/b", "..", "."])
def test_child_names_that_are_not_names(name: str) -> None:
    body = _I.pack(1) + ustring(name) + stat_bytes(ZkStat(1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1))
    with pytest.raises(ZooKeeperServerError, match="not a node name"):
        zl.decode_get_children2(zl.decode_reply(struct.pack(">iqi", 1, 1, 0) + body).body)


_DECODERS = [zl.decode_get_data, zl.decode_get_children2, zl.decode_exists]


@settings(max_examples=300)
@given(raw=st.binary(max_size=200))
def test_random_bytes_raise_only_the_typed_error(raw: bytes) -> None:
    for decode in _DECODERS:
        try:
            decode(zl.decode_reply(raw).body)
        except ZooKeeperServerError:
            pass
    try:
        zl.decode_connect_response(raw)
    except ZooKeeperServerError:
        pass


def test_mutated_replies_raise_only_the_typed_error() -> None:
    rnd = random.Random(20)
    s = ZkStat(5, 6, 7, 8, 1, 2, 0, 0, 3, 2, 9)
    good = [
        (zl.decode_get_data, struct.pack(">iqi", 1, 9, 0) + _I.pack(3) + b"abc" + stat_bytes(s)),
        (
            zl.decode_get_children2,
            struct.pack(">iqi", 1, 9, 0) + _I.pack(2) + ustring("x") + ustring("y") + stat_bytes(s),
        ),
        (zl.decode_exists, struct.pack(">iqi", 1, 9, 0) + stat_bytes(s)),
    ]
    outcomes = {"error": 0, "read": 0}
    for decode, frame in good:
        for _ in range(2000):
            b = bytearray(frame[: rnd.randrange(len(frame) + 1)] if rnd.random() < 0.2 else frame)
            for _ in range(rnd.randrange(1, 4)):
                if b:
                    b[rnd.randrange(len(b))] = rnd.randrange(256)
            try:
                decode(zl.decode_reply(bytes(b)).body)
                outcomes["read"] += 1
            except ZooKeeperServerError:
                outcomes["error"] += 1
    assert outcomes["error"] > 0 and outcomes["read"] > 0, outcomes


# ------------------------------------------------------------------------------- the store, faked server


def test_reads_pulsars_subtrees_read_only() -> None:
    with FakeServer(Tree(PULSAR)) as srv:
        store = _store(srv.url())
    assert isinstance(store, MetadataReader)
    assert "/loadbalance/brokers/b1" not in set(store.keys()) and not store.exists("/loadbalance")
    assert "/zookeeper" not in set(store.keys())
    assert set(store.keys()) == {p for p in PULSAR if not p.startswith(("/loadbalance", "/zookeeper"))}
    assert store.get("/ledgers/00/0000/L0002")[0] == b"\x02meta"
    assert store.children("/") == ["admin", "ledgers", "managed-ledgers"]  # /schemas is not there
    assert store.children("/ledgers/00/0000") == ["L0001", "L0002"]
    assert store.zxid == srv.tree.zxid and store.attempts == 1 and store.issues == []
    # Only reads, never a watch; the session closed.
    assert {op for op, _, _ in srv.requests} <= zl.READ_OPS
    assert all(w == 0 for op, _, w in srv.requests if op in (zl.OP_GET_DATA, zl.OP_GET_CHILDREN2, zl.OP_EXISTS))
    assert srv.requests[-1][0] == zl.OP_CLOSE_SESSION and srv.sessions == srv.closed_sessions == 1
    # Leaves are not asked for their children.
    assert (zl.OP_GET_CHILDREN2, "/ledgers/00/0000/L0001", 0) not in srv.requests


def test_everything_and_the_stats() -> None:
    tree = Tree(PULSAR)
    with FakeServer(tree) as srv:
        store = _store(srv.url(), subtrees=None)
    assert sorted(store.keys()) == sorted(PULSAR)
    for p in PULSAR:
        assert store.stat(p) == tree.stat(p)
        data, stat = store.get(p)
        assert data == PULSAR[p] and stat.version == 0 and not stat.ephemeral


def test_chroot() -> None:
    nodes = {"/": b"", "/other": b"o"} | {"/pulsar" + (p if p != "/" else ""): d for p, d in PULSAR.items()}
    with FakeServer(Tree(nodes)) as srv:
        store = _store(srv.url("/pulsar"))
        assert srv.requests[0][1] == "/pulsar"  # the chroot's own node is the tree's root
        assert store.get("/ledgers/00/0000/L0001")[0] == b"\x01meta" and "/other" not in set(store.keys())
        with pytest.raises(ZooKeeperServerError, match="the chroot /nope does not exist") as e:
            _store(srv.url("/nope"))
        assert e.value.code == zl.NO_NODE


def test_noauth_node_is_reported_and_left_out() -> None:
    with FakeServer(Tree(PULSAR), noauth=("/admin/policies",)) as srv:
        store = _store(srv.url())
    assert not store.exists("/admin/policies") and not store.exists("/admin/policies/public")
    assert store.children("/admin") == ["policies"]  # listed by its parent, not readable
    assert [i.message for i in store.issues] == [
        "/admin/policies: not readable without authentication (NoAuth): left out"
    ]
    assert store.exists("/ledgers/00/0000/L0001")


def _writer(changes: dict[int, Callable[[Tree], None]]) -> Callable[[FakeServer, int], None]:
    """Another client's writes, made while the n-th request of the whole run (all sessions) is answered."""
    count = [0]

    def on_request(srv: FakeServer, n: int) -> None:
        count[0] += 1
        if count[0] in changes:
            changes[count[0]](srv.tree)

    return on_request


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.change("/ledgers/00/0000/L0002", b"new"),  # data of a node not read yet
        lambda t: t.create("/ledgers/00/0000/L0003", b"3"),  # a child of a listed parent
        lambda t: t.delete("/ledgers/00/0000/L0001"),  # a node listed, not read yet
        lambda t: t.change("/ledgers", b"L"),  # between its getData and its getChildren2: the stats differ
    ],
)
def test_a_change_during_the_read_makes_it_start_again(change: Callable[[Tree], None]) -> None:
    tree = Tree(PULSAR)
    with FakeServer(tree, on_request=_writer({5: change})) as srv:
        store = _store(srv.url(), subtrees=None)
    assert store.attempts == 2 and srv.sessions == srv.closed_sessions == 1  # the attempts share one session
    assert store.zxid == tree.zxid
    assert sorted(store.keys()) == sorted(tree.nodes)
    assert all(store.get(p)[0] == tree.nodes[p][0] and store.stat(p) == tree.stat(p) for p in tree.nodes)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.lists(st.tuples(st.integers(0, 30), st.binary(max_size=8)), min_size=1, max_size=25),
    writes=st.lists(st.tuples(st.integers(1, 30), st.sampled_from("scd"), st.integers(0, 10**6)), max_size=6),
)
def test_whatever_changes_the_read_is_the_state_at_its_zxid(
    shape: list[tuple[int, bytes]], writes: list[tuple[int, str, int]]
) -> None:
    """The consistency rule against a model: random trees, random writes (set, create, delete a leaf) made between
    any two requests of the whole run; the result is exactly the server's state as of the zxid it reports."""
    paths = {"/": b""}
    for i, (parent, data) in enumerate(shape):
        ps = sorted(paths)
        paths[_join_path(ps[parent % len(ps)], f"n{i}")] = data
    tree = Tree(paths)
    schedule = {}
    for at, kind, pick in writes:
        schedule.setdefault(at, []).append((kind, pick))
    count = [0]
    new = [0]

    def on_request(srv: FakeServer, n: int) -> None:
        count[0] += 1
        for kind, pick in schedule.get(count[0], ()):
            t = srv.tree
            ps = sorted(t.nodes)
            p = ps[pick % len(ps)]
            if kind == "s":
                t.change(p, b"w%d" % pick)
            elif kind == "c":
                new[0] += 1
                t.create(_join_path(p, f"w{new[0]}"), b"new")
            elif p != "/" and not t.kids(p):
                t.delete(p)

    with FakeServer(tree, on_request=on_request) as srv:
        store = _store(srv.url(), subtrees=None, max_attempts=10)
    assert {p: (store.get(p)[0], store.stat(p)) for p in store.keys()} == tree.history[store.zxid]
    state = tree.history[store.zxid]
    assert all(store.children(p) == sorted(_kids(state, p)) for p in store.keys())
    assert srv.sessions == srv.closed_sessions == 1


def _join_path(parent: str, name: str) -> str:
    return ("" if parent == "/" else parent) + "/" + name


def _kids(state: dict[str, Any], p: str) -> list[str]:
    pre = "/" if p == "/" else p + "/"
    return [q[len(pre) :] for q in state if q != p and q.startswith(pre) and "/" not in q[len(pre) :]]


def test_a_change_to_a_node_already_read_whole_is_after_the_state_read() -> None:
    """The root was read (data and children) before it changed: the state at the first reply's zxid is still
    what was read, and nothing read later shows a newer zxid. No retry."""
    tree = Tree(PULSAR)
    before = {p: (tree.nodes[p][0], tree.stat(p)) for p in tree.nodes}
    with FakeServer(tree, on_request=_writer({5: lambda t: t.change("/", b"root")})) as srv:
        store = _store(srv.url(), subtrees=None)
    assert store.attempts == 1 and store.zxid == tree.zxid - 1 and tree.nodes["/"][0] == b"root"
    assert {p: (store.get(p)[0], store.stat(p)) for p in store.keys()} == before


def test_a_tree_that_keeps_changing_is_a_clear_error() -> None:
    tree = Tree(PULSAR)

    def on_request(srv: FakeServer, n: int) -> None:
        if srv.requests[-1][:2] == (zl.OP_GET_CHILDREN2, "/"):  # each attempt, after its first reply
            srv.tree.change("/ledgers/00", b"x")

    with FakeServer(tree, on_request=on_request) as srv:
        with pytest.raises(ZooKeeperServerError, match=r"no consistent read in 3 attempt\(s\).*/ledgers/00"):
            _store(srv.url(), max_attempts=3)
        assert srv.sessions == srv.closed_sessions == 1


def test_refused_hosts_then_a_good_one() -> None:
    dead = socket.create_server(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()  # nothing listens there now
    with FakeServer(Tree(PULSAR)) as srv:
        store = _store(f"zk:127.0.0.1:{port},127.0.0.1:{srv.port}")
        assert store.server == f"127.0.0.1:{srv.port}" and len(store) > 5
    with pytest.raises(ZooKeeperConnectionError, match=rf"no ZooKeeper server could be read: 127.0.0.1:{port}: "):
        _store(f"zk:127.0.0.1:{port}")


def test_a_lost_connection_resumes_the_session_on_the_next_server() -> None:
    tree = Tree(PULSAR)
    with FakeServer(tree, drop_at=6) as a, FakeServer(tree) as b:
        store = _store(f"zk:127.0.0.1:{a.port},127.0.0.1:{b.port}", subtrees=None)
    assert store.attempts == 2 and store.server == f"127.0.0.1:{b.port}" and len(store) == len(PULSAR)
    sid = 0x1235  # a's first (and only) session
    assert a.connects == [(0, 0)] and b.connects == [(sid, tree.zxid)] and store.session_id == sid
    assert (a.sessions, a.closed_sessions, b.sessions, b.closed_sessions) == (1, 0, 0, 1)  # closed once, on b


def test_an_expired_session_is_replaced() -> None:
    tree = Tree(PULSAR)
    with FakeServer(tree, drop_at=6) as a, FakeServer(tree, expire_resumed=True) as b:
        store = _store(f"zk:127.0.0.1:{a.port},127.0.0.1:{b.port}")
    assert store.attempts == 2 and b.connects == [(0x1235, tree.zxid), (0, 0)] and b.closed_sessions == 1


@pytest.mark.parametrize("limit", [{"max_nodes": 5}, {"max_bytes": 3}])
def test_the_read_is_bounded(limit: dict[str, int]) -> None:
    with FakeServer(Tree(PULSAR)) as srv:
        with pytest.raises(ZooKeeperServerError, match="not read"):
            _store(srv.url(), **limit)
        assert srv.closed_sessions == 1


def test_a_server_that_never_answers_times_out() -> None:
    with FakeServer(Tree(PULSAR), silent=True) as srv:
        with pytest.raises(ZooKeeperConnectionError, match="no reply in time"):
            _store(srv.url(), request_timeout=0.3)


def test_a_huge_frame_length_is_refused_before_allocating() -> None:
    def mangle(n: int, frame: bytes) -> bytes | None:
        return _I.pack(2**31 - 1) + frame[4:] if n == 2 else None

    with FakeServer(Tree(PULSAR), mangle=mangle) as srv:
        with pytest.raises(ZooKeeperServerError, match="a reply frame of 2147483647 bytes"):
            _store(srv.url(), max_attempts=1, max_frame=1 << 20)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(at=st.integers(0, 12), seed=st.integers(0, 2**32 - 1), cut=st.booleans())
def test_mangled_server_replies_raise_only_the_typed_error(at: int, seed: int, cut: bool) -> None:
    """One reply of a conversation changed (bytes flipped, or cut short), the connection then closed."""
    rnd = random.Random(seed)

    def mangle(n: int, frame: bytes) -> bytes | None:
        if n != at:
            return None
        if cut:
            return frame[: rnd.randrange(len(frame))]
        b = bytearray(frame)
        for _ in range(rnd.randrange(1, 4)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        return bytes(b)

    with FakeServer(Tree(PULSAR), mangle=mangle) as srv:
        try:
            _store(srv.url(), max_attempts=2, request_timeout=2.0)
        except ZooKeeperServerError:
            pass
        except PulsarkitError as e:  # pragma: no cover - the failure this test is for
            raise AssertionError(f"not the typed error: {e!r}") from e


@settings(max_examples=60, deadline=None)
@given(raw=st.binary(max_size=300))
def test_a_server_sending_random_bytes(raw: bytes) -> None:
    with FakeServer(Tree(PULSAR), mangle=lambda n, f: raw) as srv:
        with pytest.raises(ZooKeeperServerError):
            _store(srv.url(), max_attempts=1, request_timeout=2.0)


# -------------------------------------------------------------------------------------- open_data_dir


def test_open_data_dir_refuses_mixed_or_unsupported_sources(tmp_path: Any) -> None:
    from pulsarkit.scan.records import DataDirError

    with pytest.raises(MetadataStoreError, match="etcd is not supported"):
        open_data_dir(metadata_store="etcd:http://127.0.0.1:2379", ledger_dirs=[tmp_path])
    with pytest.raises(DataDirError, match="without zookeeper_dir"):
        open_data_dir(metadata_store="zk:127.0.0.1:1", zookeeper_dir=tmp_path, ledger_dirs=[tmp_path])
    with pytest.raises(DataDirError, match="current state"):
        open_data_dir(metadata_store="zk:127.0.0.1:1", zxid=5, ledger_dirs=[tmp_path])
    with pytest.raises(DataDirError, match="ledger_dirs"):
        open_data_dir(metadata_store="zk:127.0.0.1:1")
    with pytest.raises(DataDirError, match="configuration_metadata_store without metadata_store"):
        open_data_dir(tmp_path, configuration_metadata_store="zk:127.0.0.1:1")
