"""The ZooKeeper data-directory reader on files written here (tests/zk_files.py) with ZooKeeper's encoding.

The real server's files are the interop test's (tests/interop/test_interop_zookeeper.py); these pin the rules:
the restore order, fuzzy-snapshot replay, multi, torn and preallocated tails, fallback, as_of_zxid, and that
no input raises anything but ZooKeeperDataError.
"""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path
from typing import Any

import pytest
import zk_files as w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulsarkit.errors import PulsarkitError, ZooKeeperDataError
from pulsarkit.metadata import MetadataStore
from pulsarkit.metadata import zookeeper as zk
from pulsarkit.metadata.reader import MetadataReader

T0 = 1_700_000_000_000
BASE = {
    "/": w.Node(cversion=1, pzxid=1),
    "/zookeeper": w.Node(),
    "/a": w.Node(b"a0", czxid=1, mzxid=1, pzxid=1, ctime=T0, mtime=T0),
}


def _dir(tmp_path: Path, snaps: dict[int, bytes], logs: dict[int, bytes], log_dir: Path | None = None) -> Path:
    d = tmp_path / "data" / "version-2"
    d.mkdir(parents=True, exist_ok=True)
    ld = d if log_dir is None else log_dir / "version-2"
    ld.mkdir(parents=True, exist_ok=True)
    for z, b in snaps.items():
        (d / f"snapshot.{z:x}").write_bytes(b)
    for z, b in logs.items():
        (ld / f"log.{z:x}").write_bytes(b)
    return tmp_path / "data"


def _workload_log() -> bytes:
    """zxids 2..8: create /b, /b/c (ephemeral of session 7), set /a, multi, failed multi, close session 7."""
    return w.txn_log(
        [
            w.txn_body(2, zk.OP_CREATE_SESSION, struct.pack(">i", 30000), client_id=7),
            w.txn_body(3, zk.OP_CREATE, w.create("/b", b"bee"), time=T0 + 3),
            w.txn_body(4, zk.OP_CREATE2, w.create("/b/c", b"\x00\xff", ephemeral=True), client_id=7, time=T0 + 4),
            w.txn_body(5, zk.OP_SET_DATA, w.set_data("/a", b"a1", 1), time=T0 + 5),
            w.txn_body(
                6,
                zk.OP_MULTI,
                w.multi([(zk.OP_CREATE, w.create("/m1", b"1")), (zk.OP_SET_DATA, w.set_data("/b", b"B", 1))]),
                time=T0 + 6,
            ),
            w.txn_body(
                7,
                zk.OP_MULTI,
                w.multi([(zk.OP_ERROR, w.error(0)), (zk.OP_ERROR, w.error(-101))]),
                time=T0 + 7,
            ),
            w.txn_body(8, zk.OP_CLOSE_SESSION, w.close_session(["/b/c"]), client_id=7, time=T0 + 8),
        ],
        prealloc=4096,
    )


def test_restore_snapshot_and_log(tmp_path: Path) -> None:
    d = _dir(tmp_path, {1: w.snapshot(BASE, last_zxid=1)}, {2: _workload_log()})
    s = zk.ZkSnapshotStore(d)
    assert isinstance(s, MetadataReader)
    assert s.zxid == 8 and s.snapshot_zxid == 1 and s.txns_applied == 7
    assert s.issues == []
    assert sorted(s.keys()) == ["/", "/a", "/b", "/m1", "/zookeeper"]
    assert s.get("/a")[0] == b"a1" and s.get("/a")[1].version == 1
    st_a = s.stat("/a")
    assert (st_a.czxid, st_a.mzxid, st_a.mtime, st_a.version) == (1, 5, T0 + 5, 1)
    b = s.stat("/b")
    # /b/c was created and deleted: cversion counts both, pzxid is the delete's zxid.
    assert (b.cversion, b.pzxid, b.num_children, b.version) == (2, 8, 0, 1)
    assert s.get("/b")[0] == b"B"
    root = s.stat("/")
    assert root.num_children == 4 and root.pzxid == 6
    assert s.children("/") == ["a", "b", "m1", "zookeeper"]
    assert s.sessions == {}
    assert not s.exists("/b/c") and s.get("/nope") is None


def test_close_session_without_paths_deletes_what_the_session_owns(tmp_path: Path) -> None:
    nodes = {**BASE, "/e1": w.Node(owner=7, czxid=1), "/e2": w.Node(owner=8, czxid=1)}
    log = w.txn_log(
        [
            w.txn_body(2, zk.OP_CREATE, w.create("/e3", ephemeral=True), client_id=7),
            w.txn_body(3, zk.OP_CLOSE_SESSION, b"", client_id=7, digest=False),  # logged before CloseSessionTxn
            w.txn_body(4, zk.OP_CLOSE_SESSION, w.close_session([]), client_id=9),
        ]
    )
    s = zk.ZkSnapshotStore(_dir(tmp_path, {1: w.snapshot(nodes, sessions={7: 1000, 8: 1000})}, {2: log}))
    assert not s.exists("/e1") and not s.exists("/e3") and s.exists("/e2")
    assert s.sessions == {8: 1000} and s.stat("/").pzxid == 3


def test_as_of_zxid_and_refusals(tmp_path: Path) -> None:
    d = _dir(tmp_path, {1: w.snapshot(BASE, last_zxid=1)}, {2: _workload_log()})
    s = zk.ZkSnapshotStore(d, as_of_zxid=4)
    assert s.zxid == 4 and s.stat("/b/c").ephemeral_owner == 7 and s.get("/b/c")[1].ephemeral
    assert s.get("/a")[0] == b"a0"
    assert zk.ZkSnapshotStore(d, as_of_zxid=6).exists("/m1")
    with pytest.raises(ZooKeeperDataError, match="logs end at 0x8"):
        zk.ZkSnapshotStore(d, as_of_zxid=9)
    with pytest.raises(ZooKeeperDataError, match="every snapshot is newer"):
        zk.ZkSnapshotStore(d, as_of_zxid=0)


def test_fuzzy_snapshot_replay_is_idempotent(tmp_path: Path) -> None:
    # The snapshot started at zxid 2 but already holds /b (zxid 3) and misses /x, created at 4 and deleted at 5
    # while it was written: replaying 3..5 must give the same tree as a clean replay.
    nodes = dict(BASE)
    nodes["/"] = w.Node(cversion=2, pzxid=3)
    nodes["/b"] = w.Node(b"bee", czxid=3, mzxid=3, pzxid=3, ctime=T0 + 3, mtime=T0 + 3)
    log = w.txn_log(
        [
            w.txn_body(3, zk.OP_CREATE, w.create("/b", b"bee", parent_cversion=2), time=T0 + 3),
            w.txn_body(4, zk.OP_CREATE, w.create("/x", b"", parent_cversion=3), time=T0 + 4),
            w.txn_body(5, zk.OP_DELETE, w.delete("/x"), time=T0 + 5),
            w.txn_body(6, zk.OP_DELETE, w.delete("/never"), time=T0 + 6),
        ]
    )
    s = zk.ZkSnapshotStore(_dir(tmp_path, {2: w.snapshot(nodes, last_zxid=4)}, {1: log}))
    assert s.zxid == 6 and sorted(s.keys()) == ["/", "/a", "/b", "/zookeeper"]
    root = s.stat("/")
    assert root.pzxid == 6 and root.cversion == 3 * 2 - 3


def test_ttl_and_container_nodes(tmp_path: Path) -> None:
    log = w.txn_log(
        [
            w.txn_body(2, zk.OP_CREATE_TTL, w.create_ttl("/t", b"t", 2, 60000)),
            w.txn_body(3, zk.OP_CREATE_CONTAINER, w.create_container("/c", b"c", 3)),
        ]
    )
    s = zk.ZkSnapshotStore(_dir(tmp_path, {1: w.snapshot(BASE)}, {2: log}))
    t = s.node("/t")
    assert zk.ephemeral_kind(t.ephemeral_owner) == "ttl" and zk.ttl_of(t.ephemeral_owner) == 60000
    assert zk.ephemeral_kind(s.node("/c").ephemeral_owner) == "container"
    assert s.stat("/t").ephemeral_owner == 0 and not s.get("/c")[1].ephemeral


def test_separate_log_dir_and_log_selection(tmp_path: Path) -> None:
    # Logs starting after the snapshot's zxid are read; the one before it only from the snapshot's zxid on.
    old = w.txn_log([w.txn_body(1, zk.OP_CREATE, w.create("/old"))])
    new = w.txn_log([w.txn_body(2, zk.OP_CREATE, w.create("/new"))])
    d = _dir(tmp_path, {1: w.snapshot(BASE)}, {1: old, 2: new}, log_dir=tmp_path / "logs")
    s = zk.ZkSnapshotStore(d, log_dir=tmp_path / "logs")
    assert s.exists("/new") and not s.exists("/old") and s.zxid == 2
    assert [os.path.basename(f) for f in s.log_files] == ["log.1", "log.2"]


def test_torn_tail_and_preallocation(tmp_path: Path) -> None:
    full = _workload_log()
    end = full.rstrip(b"\x00")
    torn = end[:-5]  # the last record (close session) loses its end
    s = zk.ZkSnapshotStore(_dir(tmp_path, {1: w.snapshot(BASE)}, {2: torn}))
    assert s.zxid == 7 and s.exists("/b/c")
    assert len(s.issues) == 1 and "torn record" in s.issues[0].message
    assert s.issues[0].file.endswith("log.2") and s.issues[0].offset > 16


def test_torn_record_skips_to_next_file(tmp_path: Path) -> None:
    first = w.txn_log([w.txn_body(2, zk.OP_CREATE, w.create("/p")), w.txn_body(3, zk.OP_CREATE, w.create("/q"))])
    second = w.txn_log([w.txn_body(4, zk.OP_CREATE, w.create("/r"))])
    torn_first = first[:-1] + b"C"  # the second record lost its end-of-record 'B'; its file ends there
    s = zk.ZkSnapshotStore(_dir(tmp_path, {1: w.snapshot(BASE)}, {2: torn_first, 4: second}))
    assert s.exists("/p") and not s.exists("/q") and s.exists("/r") and s.zxid == 4
    msgs = [i.message for i in s.issues]
    assert any("end-of-record" in m for m in msgs) and any("missing" in m for m in msgs)


def test_checksum_mismatch_stops_replay(tmp_path: Path) -> None:
    log = bytearray(
        w.txn_log([w.txn_body(2, zk.OP_CREATE, w.create("/p")), w.txn_body(3, zk.OP_CREATE, w.create("/q"))])
    )
    log[-3] ^= 0xFF  # inside the second record's body
    later = w.txn_log([w.txn_body(4, zk.OP_CREATE, w.create("/r"))])
    s = zk.ZkSnapshotStore(_dir(tmp_path, {1: w.snapshot(BASE)}, {2: bytes(log), 4: later}))
    assert s.exists("/p") and not s.exists("/q") and not s.exists("/r") and s.zxid == 2
    assert any("checksum mismatch" in i.message for i in s.issues)


def test_bad_snapshot_falls_back(tmp_path: Path) -> None:
    log = _workload_log()
    newest = w.snapshot({**BASE, "/b": w.Node(b"bee", czxid=3, mzxid=3, pzxid=3)}, last_zxid=3)
    for bad in (newest[: len(newest) // 2], newest[:40] + bytes([newest[40] ^ 1]) + newest[41:]):
        d = _dir(tmp_path / str(len(bad)), {1: w.snapshot(BASE), 3: bad}, {2: log})
        s = zk.ZkSnapshotStore(d)
        assert s.snapshot_zxid == 1 and s.zxid == 8 and s.get("/a")[0] == b"a1"
        assert len(s.issues) == 1 and "snapshot skipped, falling back" in s.issues[0].message
        assert s.issues[0].file.endswith("snapshot.3")
    d = _dir(tmp_path / "none", {3: newest[:-1]}, {2: log})
    with pytest.raises(ZooKeeperDataError, match="no valid snapshot"):
        zk.ZkSnapshotStore(d)


def test_as_of_needs_a_snapshot_that_ends_before(tmp_path: Path) -> None:
    # snapshot.3 holds transactions up to 5 (its trailer): as of 4 it cannot serve, snapshot.1 can.
    fuzzy = w.snapshot({**BASE, "/b": w.Node(b"bee", czxid=3, mzxid=3, pzxid=3)}, last_zxid=5)
    s = zk.ZkSnapshotStore(
        _dir(tmp_path, {1: w.snapshot(BASE, last_zxid=1), 3: fuzzy}, {2: _workload_log()}), as_of_zxid=4
    )
    assert s.snapshot_zxid == 1 and s.zxid == 4
    # Without a trailer, the next snapshot's zxid bounds the previous one.
    fuzzy6 = w.snapshot({**BASE, "/b": w.Node(b"bee", czxid=3, mzxid=3, pzxid=3)}, last_zxid=6)
    d = _dir(tmp_path / "old", {1: w.snapshot(BASE, digest=None, last_zxid=None), 5: fuzzy6}, {2: _workload_log()})
    s = zk.ZkSnapshotStore(d, as_of_zxid=5)
    assert s.snapshot_zxid == 1 and s.zxid == 5
    assert zk.ZkSnapshotStore(d, as_of_zxid=6).snapshot_zxid == 5


def test_compressed_snapshot_and_acls(tmp_path: Path) -> None:
    acl = ((1, "digest", "u:x"), (31, "ip", "127.0.0.1"))
    nodes = {**BASE, "/s": w.Node(b"s", acl_ref=1)}
    d = tmp_path / "v"
    d.mkdir()
    (d / "snapshot.1.gz").write_bytes(gzip.compress(w.snapshot(nodes, acl_cache={1: acl})))
    s = zk.ZkSnapshotStore(d)
    assert s.node("/s").acl == tuple(zk.Acl(*a) for a in acl) and s.node("/a").acl == zk.OPEN_ACL_UNSAFE


def test_a_fuzzy_snapshot_s_missing_acl_is_given_by_the_replayed_create(tmp_path: Path) -> None:
    """A snapshot that wrote its ACL cache before a node's create (a real ZooKeeper under load did, in the
    live interop test) holds the node with an ACL reference the cache lacks; the replayed create gives the
    ACL, as the server's replay does. Without such a transaction the reference stays an issue."""
    secret = ((31, "digest", "admin:x"),)
    nodes = {**BASE, "/s": w.Node(b"s", czxid=2, mzxid=2, pzxid=2, acl_ref=3)}
    snap = w.snapshot(nodes, acl_cache={1: w.OPEN}, last_zxid=2)
    assert [i.message for i in zk.parse_snapshot(snap, "snapshot.1").issues] == [
        "node /s: ACL reference 3 not in the ACL cache"
    ]
    log = w.txn_log(
        [w.txn_body(2, zk.OP_CREATE, w.create("/s", b"s", acl=secret)), w.txn_body(3, zk.OP_DELETE, w.delete("/a"))]
    )
    s = zk.ZkSnapshotStore(_dir(tmp_path / "fixed", {1: snap}, {2: log}))
    assert s.issues == [] and s.node("/s").acl == tuple(zk.Acl(*a) for a in secret) and s.get("/s")[0] == b"s"
    # a node the logs delete needs no ACL; one they never touch keeps its issue
    gone = w.txn_log([w.txn_body(2, zk.OP_DELETE, w.delete("/s"))])
    assert zk.ZkSnapshotStore(_dir(tmp_path / "gone", {1: snap}, {2: gone})).issues == []
    other = w.txn_log([w.txn_body(2, zk.OP_CREATE, w.create("/t", b"t", acl=secret))])
    kept = zk.ZkSnapshotStore(_dir(tmp_path / "kept", {1: snap}, {2: other}))
    assert [i.message for i in kept.issues] == ["node /s: ACL reference 3 not in the ACL cache"]
    assert kept.node("/s").acl == () and kept.node("/t").acl == tuple(zk.Acl(*a) for a in secret)


def test_errors_name_file_and_offset(tmp_path: Path) -> None:
    snap = w.snapshot(BASE)
    with pytest.raises(ZooKeeperDataError, match=r"bad magic .* at offset 0") as e:
        zk.parse_snapshot(b"ZKSX" + snap[4:], "snapshot.1")
    assert e.value.offset == 0
    bad_len = bytearray(snap)
    bad_len[28:32] = struct.pack(">i", 1 << 30)  # the root's data length (after header, sessions, ACL cache, path "")
    with pytest.raises(ZooKeeperDataError, match="offset"):
        zk.parse_snapshot(bytes(bad_len), "snapshot.1")
    with pytest.raises(ZooKeeperDataError, match="expected 'ZKLG'"):
        zk.parse_txn_log(b"ZKSN" + bytes(12), "log.1")
    with pytest.raises(ZooKeeperDataError, match="no snapshot"):
        zk.ZkSnapshotStore(tmp_path)
    assert issubclass(ZooKeeperDataError, PulsarkitError)


@pytest.mark.parametrize(
    ("digest", "last"),
    [
        (None, None),  # before 3.6
        ((7, 2, 0xABC), None),  # 3.6-3.8, or 3.9 with serializeLastProcessedZxid off
        (None, 0x10),  # 3.9 with zookeeper.digest.enabled=false
        ((7, 2, 0xABC), 0x10),  # 3.9's default
        ((7, 1, 0xABC), 0x10),  # digest version 1: the digest as a hex string
    ],
)
def test_snapshot_trailer_shapes(tmp_path: Path, digest: tuple[int, int, int] | None, last: int | None) -> None:
    snap = w.snapshot(BASE, digest=digest, last_zxid=last)
    p = zk.parse_snapshot(snap, "snapshot.1")
    assert (p.digest, p.last_processed_zxid, p.issues) == (digest, last, [])
    s = zk.ZkSnapshotStore(_dir(tmp_path, {1: snap}, {2: _workload_log()}))
    assert s.issues == [] and s.snapshot_zxid == 1 and s.zxid == 8 and s.get("/a")[0] == b"a1"


def test_bad_snapshot_trailers_are_refused() -> None:
    tree_end = len(w.snapshot(BASE, digest=None, last_zxid=None))

    def flip(b: bytes, at: int) -> bytes:
        return b[:at] + bytes([b[at] ^ 1]) + b[at + 1 :]

    # a last processed zxid alone whose seal does not verify: neither shape, refused at the trailer's start
    bad = flip(w.snapshot(BASE, digest=None, last_zxid=0x10), tree_end + 3)
    with pytest.raises(ZooKeeperDataError, match=rf"neither a digest .* nor a last processed zxid .* {tree_end}$"):
        zk.parse_snapshot(bad, "snapshot.1")
    # a digest whose seal does not verify
    bad = flip(w.snapshot(BASE, digest=(7, 2, 0xABC), last_zxid=None), tree_end + 15)
    with pytest.raises(ZooKeeperDataError, match=rf"neither a digest .* nor .* at offset {tree_end}$"):
        zk.parse_snapshot(bad, "snapshot.1")
    # a verified digest, then a last processed zxid whose seal does not verify
    bad = flip(w.snapshot(BASE, digest=(7, 2, 0xABC), last_zxid=0x10), tree_end + 33 + 2)
    with pytest.raises(ZooKeeperDataError, match=rf"last processed zxid checksum mismatch.* {tree_end + 41}$"):
        zk.parse_snapshot(bad, "snapshot.1")
    # a version-1 digest that is not hexadecimal (the server's Long.parseLong throws)
    o = w.Out()
    o.b += w.snapshot(BASE, digest=None, last_zxid=None)
    o.long(7).int(1).string("0x1f").seal()
    with pytest.raises(ZooKeeperDataError, match=rf"digest '0x1f' is not hexadecimal at offset {tree_end + 12}"):
        zk.parse_snapshot(bytes(o.b), "snapshot.1")
    # too short for either: the server reads the end of the file inside the digest as an older snapshot
    short = w.snapshot(BASE, digest=None, last_zxid=None) + b"\x00" * 3 + b"\x00\x00\x00\x01/"
    p = zk.parse_snapshot(short, "snapshot.1")
    assert (p.digest, p.last_processed_zxid) == (None, None)
    assert [(i.offset, i.message) for i in p.issues] == [(tree_end, "8 bytes after the snapshot's last seal ignored")]


def test_rocksdb_store_is_a_reader(tmp_path: Path) -> None:
    with MetadataStore(tmp_path / "m") as m:
        m.put("/x", b"1")
        assert isinstance(m, MetadataReader)


# ------------------------------------------------------------------------------------------- fuzz


def _valid_files() -> tuple[bytes, bytes]:
    nodes = {**BASE, "/s": w.Node(b"s" * 40, acl_ref=1), "/s/t": w.Node(b"", owner=9)}
    return w.snapshot(nodes, sessions={9: 3000}, acl_cache={1: w.OPEN}, last_zxid=1), _workload_log()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_fuzz_random_bytes(data: bytes) -> None:
    for fn in (zk.parse_snapshot, zk.parse_txn_log):
        try:
            fn(data, "f")
        except ZooKeeperDataError:
            pass
    for prefix in (struct.pack(">iiq", zk.SNAP_MAGIC, 2, 0), struct.pack(">iiq", zk.TXNLOG_MAGIC, 2, 0)):
        try:
            zk.parse_snapshot(prefix + data + b"\x00\x00\x00\x01/", "f")
        except ZooKeeperDataError:
            pass
        try:
            zk.parse_txn_log(prefix + data, "f")
        except ZooKeeperDataError:
            pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.sampled_from(["snap", "log"]),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.one_of(st.none(), st.integers(0, 10_000)),
)
def test_fuzz_mutated_files(which: str, edits: list[tuple[int, int]], cut: int | None) -> None:
    snap, log = _valid_files()
    b = bytearray(snap if which == "snap" else log)
    for pos, val in edits:
        b[pos % len(b)] = val
    if cut is not None:
        del b[cut % len(b) :]
    try:
        if which == "snap":
            zk.parse_snapshot(bytes(b), "snapshot.1")
        else:
            lg = zk.parse_txn_log(bytes(b), "log.2")
            tree = zk.DataTree({"/": zk.ZNode(b"", (), (0,) * 9)}, {})
            for t in lg.txns:  # applying whatever parsed never fails
                tree.apply(t)
    except ZooKeeperDataError:
        pass


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(pos=st.integers(0, 10_000), val=st.integers(0, 255), target=st.sampled_from(["snap", "log"]))
def test_fuzz_store_keeps_reading(tmp_path: Path, pos: int, val: int, target: str) -> None:
    """A byte changed anywhere: the store opens with an issue, or refuses with the typed error."""
    snap, log = _valid_files()
    good_old = w.snapshot(BASE)
    b = bytearray(snap if target == "snap" else log)
    b[pos % len(b)] = val
    d = tmp_path / f"d{pos}-{val}-{target}"
    d.mkdir()
    (d / "snapshot.0").write_bytes(good_old)
    (d / "snapshot.1").write_bytes(bytes(b) if target == "snap" else snap)
    (d / "log.2").write_bytes(bytes(b) if target == "log" else log)
    try:
        s = zk.ZkSnapshotStore(d)
    except ZooKeeperDataError:
        return
    assert s.zxid >= 1 and s.exists("/")


# ------------------------------------------------------------------------------------- properties
# A random history is applied to a model tree (the reader's own DataTree: the rules themselves are checked against
# the real server in tests/interop); the property is that restoring never depends on which snapshot is used, how
# the logs are split, or whether a snapshot is fuzzy.


def _snapshot_of(tree: zk.DataTree, name_zxid: int, end_zxid: int) -> bytes:
    nodes = {
        p: w.Node(
            n.data, n.czxid, n.mzxid, n.ctime, n.mtime, n.version, n.cversion, n.aversion, n.ephemeral_owner, n.pzxid
        )
        for p, n in tree.nodes.items()
    }
    return w.snapshot(nodes, sessions=dict(tree.sessions), last_zxid=end_zxid)


def _state_of(nodes: dict[str, zk.ZNode]) -> dict[str, Any]:
    return {p: (n.data, n.client_stat()) for p, n in nodes.items()}


@st.composite
def _history(draw: Any) -> tuple[list[bytes], dict[int, dict[str, Any]], dict[int, bytes], list[int]]:
    tree = zk.DataTree({"/": zk.ZNode(b"", (), (0,) * 9)}, {})
    bodies: list[bytes] = []
    states = {0: _state_of(tree.nodes)}
    snaps = {0: _snapshot_of(tree, 0, 0)}
    sessions = [101, 102]
    n_ops = draw(st.integers(1, 40))
    for zxid in range(1, n_ops + 1):
        paths = sorted(tree.nodes)
        leaves = [p for p in paths if p != "/" and not tree.nodes[p].children]
        kind = draw(st.sampled_from(["create", "create", "delete", "set", "multi", "failed", "session", "close"]))
        t = T0 + zxid
        sid = draw(st.sampled_from(sessions))
        if kind == "delete" and leaves:
            body = w.txn_body(zxid, zk.OP_DELETE, w.delete(draw(st.sampled_from(leaves))), time=t)
        elif kind == "set" and len(paths) > 1:
            p = draw(st.sampled_from(paths[1:]))
            body = w.txn_body(
                zxid, zk.OP_SET_DATA, w.set_data(p, draw(st.binary(max_size=8)), tree.nodes[p].version + 1), time=t
            )
        elif kind == "session":
            body = w.txn_body(zxid, zk.OP_CREATE_SESSION, struct.pack(">i", 4000), client_id=sid, time=t)
        elif kind == "close":
            owned = [p for p, n in tree.nodes.items() if n.ephemeral_owner == sid]
            body = w.txn_body(zxid, zk.OP_CLOSE_SESSION, w.close_session(owned), client_id=sid, time=t)
        else:
            parents = [p for p in paths if tree.nodes[p].ephemeral_owner == 0]
            parent = draw(st.sampled_from(parents))
            path = ("" if parent == "/" else parent) + "/" + draw(st.sampled_from("abcde"))
            if path in tree.nodes:
                path += f"{zxid:010d}"  # a sequential node's name
            pcv = tree.nodes[parent].cversion + 1
            mode = draw(st.sampled_from(["p", "e", "c", "ttl", "create2"]))
            if mode == "c":
                op, rec = zk.OP_CREATE_CONTAINER, w.create_container(path, b"c", pcv)
            elif mode == "ttl":
                op, rec = zk.OP_CREATE_TTL, w.create_ttl(path, b"t", pcv, 1000)
            else:
                op = zk.OP_CREATE2 if mode == "create2" else zk.OP_CREATE
                rec = w.create(path, draw(st.binary(max_size=8)), mode == "e", pcv)
            if kind == "multi" and len(paths) > 1:
                p = draw(st.sampled_from(paths[1:]))
                other = (zk.OP_SET_DATA, w.set_data(p, b"m", tree.nodes[p].version + 1))
                body = w.txn_body(zxid, zk.OP_MULTI, w.multi([(op, rec), other]), client_id=sid, time=t)
            elif kind == "failed":
                body = w.txn_body(
                    zxid,
                    zk.OP_MULTI,
                    w.multi([(zk.OP_ERROR, w.error(0)), (zk.OP_ERROR, w.error(-101))]),
                    client_id=sid,
                    time=t,
                )
            else:
                body = w.txn_body(zxid, op, rec, client_id=sid, time=t)
        bodies.append(body)
        tree.apply(zk.parse_txn(body))
        states[zxid] = _state_of(tree.nodes)
        if draw(st.integers(0, 4)) == 0:
            snaps[zxid] = _snapshot_of(tree, zxid, zxid)
    cuts = sorted(set(draw(st.lists(st.integers(1, n_ops), max_size=4))) | {1})
    return bodies, states, snaps, cuts


def _write(d: Path, bodies: list[bytes], snaps: dict[int, bytes], cuts: list[int], prealloc: int = 0) -> None:
    d.mkdir(parents=True)
    for z, b in snaps.items():
        (d / f"snapshot.{z:x}").write_bytes(b)
    bounds = cuts + [len(bodies) + 1]
    for a, b in zip(bounds, bounds[1:]):
        (d / f"log.{a:x}").write_bytes(w.txn_log(bodies[a - 1 : b - 1], prealloc=prealloc))


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(h=_history(), as_of=st.integers(0, 40), prealloc=st.sampled_from([0, 100]))
def test_restore_is_independent_of_snapshots_and_log_splits(
    tmp_path_factory: Any, h: Any, as_of: int, prealloc: int
) -> None:
    bodies, states, snaps, cuts = h
    last = len(bodies)
    d = tmp_path_factory.mktemp("h")
    _write(d / "all", bodies, snaps, cuts, prealloc)
    s = zk.ZkSnapshotStore(d / "all")
    assert s.issues == [] and s.zxid == last and s.snapshot_zxid == max(snaps)
    assert _state_of(s._tree.nodes) == states[last]
    # Only the first snapshot: the whole history replayed.
    _write(d / "first", bodies, {0: snaps[0]}, cuts, prealloc)
    assert _state_of(zk.ZkSnapshotStore(d / "first")._tree.nodes) == states[last]
    # As of any zxid the files can give.
    if as_of <= last:
        s = zk.ZkSnapshotStore(d / "all", as_of_zxid=as_of)
        assert s.zxid == as_of and _state_of(s._tree.nodes) == states[as_of]
    else:
        with pytest.raises(ZooKeeperDataError, match="logs end at"):
            zk.ZkSnapshotStore(d / "all", as_of_zxid=as_of)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(h=_history(), data=st.data())
def test_fuzzy_snapshot_gives_the_same_state(tmp_path_factory: Any, h: Any, data: Any) -> None:
    """A snapshot named at zxid j that already holds everything up to k > j (the server kept applying while it
    was written): replaying j+1.. over it gives the same state as a clean restore."""
    bodies, states, snaps, cuts = h
    last = len(bodies)
    k = data.draw(st.integers(0, last))
    j = data.draw(st.integers(0, k))
    d = tmp_path_factory.mktemp("f")
    # The snapshot's content at k (rebuilt by replaying 1..k), named j with k as its trailer.
    tree = zk.DataTree({"/": zk.ZNode(b"", (), (0,) * 9)}, {})
    for b in bodies[:k]:
        tree.apply(zk.parse_txn(b))
    _write(d / "x", bodies, {j: _snapshot_of(tree, j, k)}, cuts)
    s = zk.ZkSnapshotStore(d / "x")
    assert s.zxid == last and s.snapshot_zxid == j
    assert _state_of(s._tree.nodes) == states[last]


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(h=_history(), data=st.data())
def test_snapshot_holding_the_next_transaction_is_not_used_as_of_its_trailer(
    tmp_path_factory: Any, h: Any, data: Any
) -> None:
    """The server bumps lastProcessedZxid after applying a transaction, so a snapshot whose trailer says k can
    already hold transaction k + 1 (seen once in CI with a real ZooKeeper 3.9). As of k, such a snapshot must
    not be the base: the state is the one at k, whatever k + 1 did."""
    bodies, states, _, cuts = h
    last = len(bodies)
    if last < 2:
        return
    k = data.draw(st.integers(1, last - 1))
    j = data.draw(st.integers(1, k))
    tree = zk.DataTree({"/": zk.ZNode(b"", (), (0,) * 9)}, {})
    for b in bodies[: k + 1]:
        tree.apply(zk.parse_txn(b))
    clean = zk.DataTree({"/": zk.ZNode(b"", (), (0,) * 9)}, {})
    d = tmp_path_factory.mktemp("leak")
    _write(d / "x", bodies, {0: _snapshot_of(clean, 0, 0), j: _snapshot_of(tree, j, k)}, cuts)
    s = zk.ZkSnapshotStore(d / "x", as_of_zxid=k)
    assert s.zxid == k and _state_of(s._tree.nodes) == states[k]
    s = zk.ZkSnapshotStore(d / "x", as_of_zxid=k + 1)
    assert s.zxid == k + 1 and s.snapshot_zxid == j and _state_of(s._tree.nodes) == states[k + 1]


def test_ledger_index_says_which_ledger_ids_were_issued(tmp_path):
    """Bookie GC trusts a ledger's absence only below the id generator's next id: under ``/ledgers/idgen``
    each id is a sequential suffix, the count of children created so far (ZooKeeper's stored cversion; the
    served one counts the deletes too, so it would overstate what was issued)."""
    from pulsarkit.metadata.reader import ChrootReader, LedgerIndex

    bodies, zxid = [], 2
    for i in range(3):  # PulsarLedgerIdGenerator: create ID-<seq> (ephemeral, sequential), delete it at once
        node = f"/pulsar/ledgers/idgen/ID-{i:010d}"
        bodies.append(w.txn_body(zxid, zk.OP_CREATE, w.create(node, ephemeral=True, parent_cversion=i + 1)))
        bodies.append(w.txn_body(zxid + 1, zk.OP_DELETE, w.delete(node)))
        zxid += 2
    d = w.data_dir(tmp_path / "zk", {"/pulsar/ledgers/idgen": b"", "/pulsar/ledgers/00/0000/L0001": b""}, 1, bodies)
    store = zk.ZkSnapshotStore(d)
    assert store.stat("/pulsar/ledgers/idgen").cversion == 6  # served: 3 creates and 3 deletes
    index = LedgerIndex(ChrootReader(store, "/pulsar"))
    assert index.ledger_ids() == [1]
    assert index.next_ledger_id() == 3  # ids 0, 1 and 2 were issued: ledger 2's absence is a deletion
    assert index.cluster_instance_id() is None
    # once the cluster has moved on to 63-bit ids the suffix under idgen says nothing
    d2 = w.data_dir(
        tmp_path / "zk2", {"/ledgers/idgen": b"", "/ledgers/idgen-long": b"", "/ledgers/INSTANCEID": b"c1"}, 1
    )
    index2 = LedgerIndex(zk.ZkSnapshotStore(d2))
    assert index2.next_ledger_id() is None and index2.cluster_instance_id() == "c1"


def test_rocksdb_store_says_which_ledger_ids_were_issued(tmp_path):
    """Pulsar's RocksDB store gives sequential nodes one counter for the whole store, which it keeps."""
    from pulsarkit.metadata.store import StoreItems

    with MetadataStore(tmp_path / "md") as s:
        ids = [s.generate_ledger_id() for _ in range(3)]
        assert s.next_ledger_id() == ids[-1] + 1
        pairs = list(s.raw_items())
    assert StoreItems(pairs).next_sequential("/ledgers/idgen") == ids[-1] + 1
    from pulsarkit.metadata.reader import LedgerIndex

    assert LedgerIndex(StoreItems(pairs)).next_ledger_id() == ids[-1] + 1
