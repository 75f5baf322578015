"""pulsarkit's offline ZooKeeper reader against a real ZooKeeper 3.9.3 server (the Maven jars, on 127.0.0.1).

A workload driven with kazoo (persistent, sequential, container, TTL and ephemeral nodes, setData, deletes, setACL,
committed and failed multi, nested paths, binary and ~500 KB data, a few hundred nodes) runs on a server with a small
``snapCount`` (several snapshots and logs, logs in a separate ``dataLogDir``) and a container manager that really
deletes empty containers and expired TTL nodes. The data is copied once while the server runs (a fuzzy state,
torn tail included) and once after it stopped with a session still open (its ephemeral nodes stay).

The oracles: a server restarted on a copy (every node's data, stat and ACL read back with kazoo; the zxid from the
clean snapshot it writes at start), ZooKeeper's ``SnapshotFormatter -d`` on every snapshot and ``TxnLogToolkit`` on
every log, and ``LogChopper`` for a state as of an older zxid. Bad inputs (truncated newest snapshot, torn log tail,
corrupt checksum) are checked against the real server started on the same damaged copy where it starts.

The jars are resolved with Maven once and cached under ``~/.cache/pulsarkit-tests/zk-<hash of this harness>``.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import require_tool
from helpers import free_port, maven_copy_dependencies
from pulsarkit.metadata import zookeeper as zk
from pulsarkit.metadata.store import (
    ledger_id_from_path,
    ledger_path,
    parse_ledger_metadata,
    parse_managed_ledger_info,
    serialize_ledger_metadata,
)
from pulsarkit.proto import LedgerMetadataFormat, ManagedLedgerInfo

pytestmark = [pytest.mark.interop, pytest.mark.slow]

try:
    import kazoo.client as kazoo_client
    import kazoo.protocol.serialization as kazoo_serialization
    import kazoo.security as kazoo_security
except ImportError:  # a test dependency (scripts/requirements-test.txt): missing in CI is a failure
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("kazoo is not installed (scripts/requirements-test.txt)", allow_module_level=True)

HERE = Path(__file__).resolve().parent / "zookeeper"
CACHE = Path(os.environ.get("PULSARKIT_TEST_CACHE") or Path.home() / ".cache" / "pulsarkit-tests").resolve()
SNAP_COUNT = 40


def _tool(name: str) -> str:
    return require_tool(name, "the ZooKeeper oracle runs a real ZooKeeper server")


def _harness_hash() -> str:
    """The jars depend only on the pom (and files beside it)."""
    h = hashlib.sha256()
    for p in sorted(HERE.iterdir()):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()[:16]


def _lib() -> Path:
    """ZooKeeper 3.9.3 and its dependencies, resolved once with Maven (about 15 s)."""
    base = CACHE / f"zk-{_harness_hash()}"
    lib = base / "lib"
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (lib / ".complete").exists():
            return lib
        return maven_copy_dependencies(_tool("mvn"), HERE / "pom.xml", base, lib, "zookeeper 3.9.3")


class Server:
    """``ZooKeeperServerMain`` over ``<root>/data`` and ``<root>/txlog`` (dataLogDir)."""

    def __init__(self, lib: Path, root: Path, container_check_ms: int, *jvm: str) -> None:
        self.root, self.port = root, free_port()
        (root / "data").mkdir(parents=True, exist_ok=True)
        (root / "txlog").mkdir(parents=True, exist_ok=True)
        cfg = root / "zoo.cfg"
        cfg.write_text(
            f"tickTime=2000\ndataDir={root / 'data'}\ndataLogDir={root / 'txlog'}\nclientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\nmaxSessionTimeout=120000\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=srvr\n"
        )
        self.log = open(root / "server.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                _tool("java"),
                "-Xmx256m",
                "-Dzookeeper.extendedTypesEnabled=true",
                f"-Dzookeeper.snapCount={SNAP_COUNT}",
                "-Dzookeeper.preAllocSize=64",
                f"-Dznode.container.checkIntervalMs={container_check_ms}",
                "-Dznode.container.maxPerMinute=100000",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                *jvm,
                "-cp",
                f"{lib}/*",
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(cfg),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=root,
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"ZooKeeper exited: {(root / 'server.log').read_text()[-3000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"srvr")
                    if b"Zxid" in s.recv(4096):
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("ZooKeeper did not start in 60 s")

    def client(self, **kw: Any) -> Any:
        c = kazoo_client.KazooClient(hosts=f"127.0.0.1:{self.port}", timeout=30, **kw)
        c.start(timeout=30)
        return c

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)
        self.log.close()


def _copy(src: Path, dst: Path) -> Path:
    for sub in ("data", "txlog"):
        shutil.copytree(src / sub, dst / sub)
    return dst


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# ------------------------------------------------------------------------------------------ workload


def _ledger_md() -> Any:
    md = LedgerMetadataFormat(
        quorumSize=2,
        ensembleSize=3,
        ackQuorumSize=2,
        length=30,
        digestType=3,
        password=b"p",
        state=LedgerMetadataFormat.CLOSED,
        lastEntryId=2,
        ctime=1,
    )
    seg = md.segment.add()
    seg.ensembleMember.extend(["127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"])
    seg.firstEntryId = 0
    e = md.customMetadata.add()
    e.key, e.value = "component", b"managed-ledger"
    return md


# kazoo has no call for containers and TTL nodes: their requests are CreateRequest (+ a long ttl) under the
# opcodes createContainer (19) and createTTL (21), answered like create2.
class _CreateContainer(kazoo_serialization.Create2):
    type = zk.OP_CREATE_CONTAINER


class _CreateTTL(kazoo_serialization.Create2):
    type = zk.OP_CREATE_TTL
    ttl = 0

    def serialize(self) -> bytearray:
        return super().serialize() + struct.pack(">q", self.ttl)


def _create_special(c: Any, path: str, data: bytes, ttl: int | None = None) -> None:
    acl = kazoo_security.OPEN_ACL_UNSAFE
    if ttl is None:
        req = _CreateContainer(path, data, acl, 4)  # CreateMode.CONTAINER
    else:
        req = _CreateTTL(path, data, acl, 5)  # CreateMode.PERSISTENT_WITH_TTL
        req.ttl = ttl
    ar = c.handler.async_result()
    c._call(req, ar)
    ar.get(timeout=30)


def _workload(server: Server, copy_to: Path) -> dict[str, Any]:
    rnd = random.Random(20)
    facts: dict[str, Any] = {}
    c = server.client()
    c.ensure_path("/pulsar/a/b/c/d")
    c.create("/bin", bytes(range(256)))
    c.create("/big", rnd.randbytes(500 * 1024))
    for i in range(240):
        c.create(f"/many/n{i:04d}", rnd.randbytes(rnd.randrange(0, 300)), makepath=True)
    for _ in range(15):
        c.create("/seq/item-", b"s", sequence=True, makepath=True)
    c.create("/seq/eph-", b"e", sequence=True, ephemeral=True)
    for i in range(30):
        c.set("/pulsar/a/b", f"v{i}".encode())
    for i in range(0, 240, 3):
        c.delete(f"/many/n{i:04d}")
    _create_special(c, "/cont", b"c")
    c.create("/cont/child", b"x")
    _create_special(c, "/cont-kept", b"k")
    c.create("/cont-kept/child", b"x", include_data=True)  # a create2
    _create_special(c, "/ttl-long", b"t", ttl=3_600_000)
    _create_special(c, "/ttl-short", b"t", ttl=500)
    # Pulsar's own values under Pulsar's paths: BookKeeper ledger metadata (format v3) and a managed ledger.
    c.create(ledger_path(5), serialize_ledger_metadata(_ledger_md()), makepath=True)
    c.create(ledger_path(2**40 + 7), serialize_ledger_metadata(_ledger_md()), makepath=True)
    ml = ManagedLedgerInfo()
    ml.ledgerInfo.add(ledgerId=5, entries=3, size=30)
    c.create("/managed-ledgers/public/default/persistent/t", ml.SerializeToString(), makepath=True)
    c.set_acls(
        "/bin",
        [
            kazoo_security.ACL(
                kazoo_security.Permissions.READ | kazoo_security.Permissions.WRITE, kazoo_security.ANYONE_ID_UNSAFE
            )
        ],
    )
    # A committed multi and a failed one (its check fails: nothing applies, it is logged as errors).
    t = c.transaction()
    t.create("/multi-a", b"1")
    t.create("/multi-a/b", b"2")
    t.set_data("/many/n0001", b"multi")
    t.delete("/many/n0002")
    t.check("/pulsar", 0)
    assert not any(isinstance(r, Exception) for r in t.commit())
    t = c.transaction()
    t.create("/multi-failed", b"1")
    t.check("/pulsar", 99)
    assert any(isinstance(r, Exception) for r in t.commit())
    # A session that ends (its ephemerals go) and one that stays open through the stop (they stay).
    gone = server.client()
    gone.create("/eph/gone-1", b"g", ephemeral=True, makepath=True)
    gone.create("/eph/gone-2", b"g", ephemeral=True)
    gone.stop()
    gone.close()
    c.delete("/cont/child")  # /cont is now an empty container: the container manager deletes it
    time.sleep(3)
    # A copy while the server runs: a fuzzy state, possibly with a torn log tail.
    _copy(server.root, copy_to)
    kept = server.client()
    kept.create("/eph/kept-1", b"k", ephemeral=True, makepath=True)
    kept.create("/eph/kept-2", b"k", ephemeral=True)
    facts["kept_session"] = kept.client_id[0]
    alive = [k for k in range(240) if k % 3 and k != 2]
    for i in range(120):
        c.set(f"/many/n{alive[(i * 7) % len(alive)]:04d}", f"late{i}".encode())
    c.create("/last", b"last")
    c.stop()
    c.close()
    server.stop()
    kept.stop()
    kept.close()
    return facts


@pytest.fixture(scope="module")
def zk_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    _tool("java")
    lib = _lib()
    root = tmp_path_factory.mktemp("zk")
    server = Server(lib, root / "run", container_check_ms=1000)
    try:
        facts = _workload(server, root / "fuzzy")
    finally:
        server.stop(signal.SIGKILL)
    return {"lib": lib, "root": root, "final": root / "run", "fuzzy": root / "fuzzy", **facts}


# -------------------------------------------------------------------------------------------- oracles


def _served(lib: Path, root: Path, work: Path, *jvm: str) -> tuple[dict[str, Any], int]:
    """Every node a server restarted on a copy of ``root`` serves, and the zxid it restored (its start snapshot)."""
    copy = _copy(root, work)
    before = {p.name for p in (copy / "data" / "version-2").glob("snapshot.*")}
    # The container manager never runs here: it would delete empty containers and expired TTL nodes.
    server = Server(lib, copy, 3_600_000, *jvm)
    try:
        c = server.client()
        nodes: dict[str, Any] = {}
        todo = ["/"]
        while todo:
            p = todo.pop()
            data, st = c.get(p)
            acls, _ = c.get_acls(p)
            nodes[p] = (data or b"", st, tuple(zk.Acl(a.perms, a.id.scheme, a.id.id) for a in acls))
            todo.extend(("" if p == "/" else p) + "/" + ch for ch in c.get_children(p))
        c.stop()
        c.close()
    finally:
        server.stop()
    new = [p for p in (copy / "data" / "version-2").glob("snapshot.*") if p.name not in before]
    assert len(new) == 1, new
    return nodes, zk.zxid_from_name(new[0].name, "snapshot")


def _assert_same(store: zk.ZkSnapshotStore, served: dict[str, Any], zxid: int) -> int:
    assert store.zxid == zxid, (hex(store.zxid), hex(zxid))
    assert sorted(store.keys()) == sorted(served)
    for p, (data, st, acl) in served.items():
        got = store.stat(p)
        assert store.get(p)[0] == data, p
        assert got.czxid == st.czxid and got.mzxid == st.mzxid and got.pzxid == st.pzxid, p
        assert (got.version, got.cversion, got.aversion) == (st.version, st.cversion, st.aversion), p
        assert (got.ctime, got.mtime) == (st.ctime, st.mtime), p
        assert got.ephemeral_owner == st.ephemeralOwner, p
        assert (got.data_length, got.num_children) == (st.dataLength, st.numChildren), p
        assert store.node(p).acl == acl, p
        assert store.children(p) == sorted(
            ch.rsplit("/", 1)[-1] for ch in served if ch != p and ch.rsplit("/", 1)[0] == ("" if p == "/" else p)
        )
    return len(served)


def _java(lib: Path, cls: str, *args: str) -> str:
    r = subprocess.run(
        [_tool("java"), "-cp", f"{lib}/*", cls, *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout


def _formatter(lib: Path, snap: Path) -> dict[str, dict[str, str]]:
    """``SnapshotFormatter -d``: per node, its stat fields as printed and its data (base64)."""
    out = _java(lib, "org.apache.zookeeper.server.SnapshotFormatter", "-d", str(snap))
    body = out.split("ZNode Details", 1)[1].split("Session Details", 1)[0]
    nodes = {}
    for block in body.split("----\n")[1:]:
        lines = block.strip("\n").split("\n")
        if not lines or not lines[0].startswith("/"):
            continue
        fields = {k.strip(): v.strip() for k, v in (line.split("=", 1) for line in lines[1:] if "=" in line)}
        nodes[lines[0]] = fields
    return nodes


# ----------------------------------------------------------------------------------------------- tests


def test_offline_read_equals_the_restarted_server(zk_run: dict[str, Any], tmp_path: Path) -> None:
    final = zk_run["final"]
    before = _files(final)
    store = zk.ZkSnapshotStore(final / "data", log_dir=final / "txlog")
    assert _files(final) == before  # read-only
    served, zxid = _served(zk_run["lib"], final, tmp_path / "oracle")
    n = _assert_same(store, served, zxid)
    assert store.issues == [], store.issues  # preallocated zero tails are no issue
    snaps = list((final / "data" / "version-2").glob("snapshot.*"))
    logs = list((final / "txlog" / "version-2").glob("log.*"))
    assert len(snaps) >= 5 and len(logs) >= 5 and n > 150, (len(snaps), len(logs), n)
    # The workload's shapes are all there.
    assert len(store.get("/big")[0]) == 500 * 1024 and store.get("/bin")[0] == bytes(range(256))
    assert not store.exists("/cont") and store.exists("/cont-kept") and not store.exists("/ttl-short")
    assert zk.ttl_of(store.node("/ttl-long").ephemeral_owner) == 3_600_000
    assert not store.exists("/multi-failed") and store.get("/multi-a/b")[0] == b"2"
    assert store.children("/eph") == ["kept-1", "kept-2"]
    assert store.get("/eph/kept-1")[1].owner == zk_run["kept_session"]
    assert store.get("/eph/kept-1")[1].ephemeral
    # Pulsar's values read through the metadata layer's parsers.
    assert [ledger_id_from_path(p) for p in store.keys("/ledgers/") if ledger_id_from_path(p) is not None] == [
        5,
        2**40 + 7,
    ]
    assert parse_ledger_metadata(store.get(ledger_path(2**40 + 7))[0]) == _ledger_md()
    ml = parse_managed_ledger_info(store.get("/managed-ledgers/public/default/persistent/t")[0])
    assert [li.ledgerId for li in ml.ledgerInfo] == [5]
    print(
        f"ZooKeeper oracle: {n} nodes compared, zxid {zxid:#x}, {len(snaps)} snapshots, {len(logs)} logs, "
        f"{store.txns_applied} transactions replayed on {os.path.basename(store.snapshot)}"
    )


def test_fuzzy_copy_of_a_running_server(zk_run: dict[str, Any], tmp_path: Path) -> None:
    fuzzy = zk_run["fuzzy"]
    store = zk.ZkSnapshotStore(fuzzy / "data", log_dir=fuzzy / "txlog")
    served, zxid = _served(zk_run["lib"], fuzzy, tmp_path / "oracle")
    _assert_same(store, served, zxid)


def test_snapshot_formatter_agrees(zk_run: dict[str, Any]) -> None:
    snaps = sorted((zk_run["final"] / "data" / "version-2").glob("snapshot.*"))
    total = 0
    for snap in snaps:
        ours = zk.parse_snapshot(snap.read_bytes(), str(snap))
        theirs = _formatter(zk_run["lib"], snap)
        assert sorted(theirs) == sorted(ours.nodes), snap
        for p, f in theirs.items():
            n = ours.nodes[p]
            assert int(f["cZxid"], 16) == n.czxid and int(f["mZxid"], 16) == n.mzxid, (snap, p)
            assert int(f["pZxid"], 16) == n.pzxid, (snap, p)
            assert int(f["ephemeralOwner"], 16) == n.ephemeral_owner & 0xFFFFFFFFFFFFFFFF, (snap, p)
            assert (int(f["cversion"]), int(f["dataVersion"]), int(f["aclVersion"])) == (
                n.cversion,
                n.version,
                n.aversion,
            ), (snap, p)
            assert base64.b64decode(f.get("data", "")) == n.data, (snap, p)
        total += len(theirs)
    assert total > 0


def test_txn_log_toolkit_agrees(zk_run: dict[str, Any]) -> None:
    logs = sorted((zk_run["final"] / "txlog" / "version-2").glob("log.*"))
    line = re.compile(r" session 0x([0-9a-f]+) cxid 0x([0-9a-f]+) zxid 0x([0-9a-f]+) (\w+)")
    count = 0
    for log in logs:
        out = _java(zk_run["lib"], "org.apache.zookeeper.server.persistence.TxnLogToolkit", str(log))
        theirs = [(int(s, 16), int(c, 16), int(z, 16), op) for s, c, z, op in line.findall(out)]
        ours = zk.parse_txn_log(log.read_bytes(), str(log))
        assert ours.issues == []
        assert [(t.client_id & 0xFFFFFFFFFFFFFFFF, t.cxid & 0xFFFFFFFF, t.zxid, t.op) for t in ours.txns] == theirs
        assert f"EOF reached after {len(theirs)} txns." in out
        count += len(theirs)
    ops = {t.op for log in logs for t in zk.parse_txn_log(log.read_bytes(), str(log)).txns}
    assert {
        "create",
        "create2",
        "createContainer",
        "createTTL",
        "delete",
        "deleteContainer",
        "setData",
        "setACL",
        "multi",
        "createSession",
        "closeSession",
    } <= ops, ops
    assert count > 400


def test_as_of_zxid_equals_a_chopped_server(zk_run: dict[str, Any], tmp_path: Path) -> None:
    final = zk_run["final"]
    full = zk.ZkSnapshotStore(final / "data", log_dir=final / "txlog")
    target = full.zxid - 150
    store = zk.ZkSnapshotStore(final / "data", log_dir=final / "txlog", as_of_zxid=target)
    assert store.zxid == target and store.snapshot_zxid <= target
    # The oracle: the snapshots pulsarkit could start from, the logs chopped at the zxid by ZooKeeper's LogChopper.
    work = _copy(final, tmp_path / "chopped")
    for s in (work / "data" / "version-2").glob("snapshot.*"):
        if zk.zxid_from_name(s.name, "snapshot") > store.snapshot_zxid:
            s.unlink()
    logs = sorted((work / "txlog" / "version-2").glob("log.*"), key=lambda p: zk.zxid_from_name(p.name, "log"))
    for lg in logs:
        start = zk.zxid_from_name(lg.name, "log")
        if start > target:
            lg.unlink()
        elif lg == max(
            (x for x in logs if zk.zxid_from_name(x.name, "log") <= target),
            key=lambda p: zk.zxid_from_name(p.name, "log"),
        ):
            _java(
                zk_run["lib"], "org.apache.zookeeper.server.persistence.TxnLogToolkit", "-c", "-z", str(target), str(lg)
            )
            chopped = lg.with_name(f"{lg.name}.chopped{target}")
            chopped.replace(lg)
    served, zxid = _served(zk_run["lib"], work, tmp_path / "oracle")
    _assert_same(store, served, zxid)
    with pytest.raises(zk.ZooKeeperDataError, match="logs end at"):
        zk.ZkSnapshotStore(final / "data", log_dir=final / "txlog", as_of_zxid=full.zxid + 1)


def test_truncated_newest_snapshot_falls_back(zk_run: dict[str, Any], tmp_path: Path) -> None:
    work = _copy(zk_run["final"], tmp_path / "trunc")
    snaps = sorted(
        (work / "data" / "version-2").glob("snapshot.*"), key=lambda p: zk.zxid_from_name(p.name, "snapshot")
    )
    newest = snaps[-1]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    store = zk.ZkSnapshotStore(work / "data", log_dir=work / "txlog")
    assert os.path.basename(store.snapshot) == snaps[-2].name
    assert [i.file for i in store.issues] == [str(newest)] and "falling back" in store.issues[0].message
    served, zxid = _served(zk_run["lib"], work, tmp_path / "oracle")
    _assert_same(store, served, zxid)


def _last_log(work: Path) -> Path:
    return max((work / "txlog" / "version-2").glob("log.*"), key=lambda p: zk.zxid_from_name(p.name, "log"))


def test_torn_log_tail_is_reported_and_the_rest_read(zk_run: dict[str, Any], tmp_path: Path) -> None:
    work = _copy(zk_run["final"], tmp_path / "torn")
    log = _last_log(work)
    parsed = zk.parse_txn_log(log.read_bytes(), str(log))
    last = parsed.txns[-1]
    # A snapshot taken at or after the last transaction (the server's snapshot points vary) would leave nothing
    # to replay from the cut record: drop those, so that restoring must read up to it.
    for snap in (work / "data" / "version-2").glob("snapshot.*"):
        if zk.zxid_from_name(snap.name, "snapshot") >= last.zxid - 1:
            snap.unlink()
    raw = log.read_bytes()
    log.write_bytes(raw[: last.offset + 5])  # the last record is cut inside its body
    store = zk.ZkSnapshotStore(work / "data", log_dir=work / "txlog")
    assert [(i.file, i.offset) for i in store.issues] == [(str(log), last.offset - 12)]
    assert "torn record" in store.issues[0].message
    # the transaction before the torn one (a server may have begun this log with its very last transaction)
    assert store.zxid == (parsed.txns[-2].zxid if len(parsed.txns) > 1 else last.zxid - 1)
    served, zxid = _served(zk_run["lib"], work, tmp_path / "oracle")
    _assert_same(store, served, zxid)


def test_corrupt_checksum_stops_replay_with_an_issue(zk_run: dict[str, Any], tmp_path: Path) -> None:
    final = zk_run["final"]
    work = _copy(final, tmp_path / "crc")
    log = _last_log(work)
    parsed = zk.parse_txn_log(log.read_bytes(), str(log))
    victim = parsed.txns[len(parsed.txns) // 2]
    # Where the server snapshots varies from run to run (it randomises around snapCount): drop the
    # snapshots that already hold the victim, so that restoring must replay through it.
    for snap in (work / "data" / "version-2").glob("snapshot.*"):
        if zk.zxid_from_name(snap.name, "snapshot") >= victim.zxid - 1:
            snap.unlink()
    raw = bytearray(log.read_bytes())
    raw[victim.offset - 12] ^= 0x01  # the stored checksum
    log.write_bytes(bytes(raw))
    store = zk.ZkSnapshotStore(work / "data", log_dir=work / "txlog")
    assert len(store.issues) == 1 and "checksum mismatch" in store.issues[0].message
    assert store.issues[0].offset == victim.offset - 12
    # The server itself refuses such a directory ("CRC check failed"); pulsarkit keeps what precedes.
    with pytest.raises(AssertionError, match="CRC check failed"):
        Server(zk_run["lib"], work, 3_600_000).stop()
    expected = zk.ZkSnapshotStore(final / "data", log_dir=final / "txlog", as_of_zxid=victim.zxid - 1)
    assert store.zxid == expected.zxid == victim.zxid - 1
    assert {p: (store.get(p)[0], store.stat(p)) for p in store.keys()} == {
        p: (expected.get(p)[0], expected.stat(p)) for p in expected.keys()
    }


def _state(store: zk.ZkSnapshotStore) -> dict[str, Any]:
    return {p: (store.get(p)[0], store.stat(p), store.node(p).acl) for p in store.keys()}


def test_every_fuzzy_snapshot_replays_to_the_same_state(zk_run: dict[str, Any], tmp_path: Path) -> None:
    """Each real snapshot plus the logs gives, at every snapshot's end, the state replayed from the first one:
    transactions a fuzzy snapshot already holds are replayed harmlessly."""
    final = zk_run["final"]
    only_first = _copy(final, tmp_path / "first")
    snaps = sorted(
        (only_first / "data" / "version-2").glob("snapshot.*"), key=lambda p: zk.zxid_from_name(p.name, "snapshot")
    )
    for s in snaps[1:]:
        s.unlink()
    fuzzy = checked = 0
    for snap in sorted((final / "data" / "version-2").glob("snapshot.*")):
        parsed = zk.parse_snapshot(snap.read_bytes(), str(snap))
        end = parsed.last_processed_zxid
        assert end is not None and end >= parsed.zxid
        fuzzy += end > parsed.zxid
        store = zk.ZkSnapshotStore(final / "data", log_dir=final / "txlog", as_of_zxid=end)
        assert store.zxid <= end and store.snapshot_zxid <= parsed.zxid
        replayed = zk.ZkSnapshotStore(only_first / "data", log_dir=only_first / "txlog", as_of_zxid=end)
        assert replayed.snapshot_zxid == zk.zxid_from_name(snaps[0].name, "snapshot")
        assert _state(store) == _state(replayed), snap
        checked += 1
    print(f"{checked} snapshots restored and compared with a replay from the first, {fuzzy} of them fuzzy")
    assert checked >= 5


@pytest.mark.parametrize("method", ["gz", "snappy"])
def test_compressed_snapshots(zk_run: dict[str, Any], tmp_path: Path, method: str) -> None:
    """``zookeeper.snapshot.compression.method``: snapshots named ``snapshot.<zxid>.gz`` / ``.snappy``."""
    jvm = f"-Dzookeeper.snapshot.compression.method={method}"
    server = Server(zk_run["lib"], tmp_path / "run", 3_600_000, jvm)
    try:
        c = server.client()
        rnd = random.Random(method)
        for i in range(150):
            c.create(f"/c/{i // 10}/n{i}", rnd.randbytes(rnd.randrange(0, 2000)), makepath=True)
        c.set("/c/0/n0", b"x" * 100_000)
        c.stop()
        c.close()
    finally:
        server.stop()
    snaps = list((tmp_path / "run" / "data" / "version-2").glob(f"snapshot.*.{method}"))
    assert len(snaps) >= 3, snaps
    store = zk.ZkSnapshotStore(tmp_path / "run" / "data", log_dir=tmp_path / "run" / "txlog")
    # the newest snapshot is written in the background: the stop may cut it, and then it is skipped and said,
    # as the server itself falls back to the one before on restart (the served state below is the judge)
    newest = max(snaps, key=lambda p: zk.zxid_from_name(p.name, "snapshot"))
    assert store.snapshot.endswith(f".{method}")
    assert all(i.file == str(newest) and "falling back" in i.message for i in store.issues), store.issues
    served, zxid = _served(zk_run["lib"], tmp_path / "run", tmp_path / "oracle", jvm)
    _assert_same(store, served, zxid)


def test_mutated_real_files_raise_only_the_typed_error(zk_run: dict[str, Any]) -> None:
    """Bytes changed or cut anywhere in the real server's newest snapshot and log: a typed error or a partial read."""
    final = zk_run["final"]
    snap = max((final / "data" / "version-2").glob("snapshot.*"), key=lambda p: zk.zxid_from_name(p.name, "snapshot"))
    log = _last_log(final)
    rnd = random.Random(7)
    outcomes = {"error": 0, "read": 0}
    for path, parse in ((snap, zk.parse_snapshot), (log, zk.parse_txn_log)):
        good = path.read_bytes()
        used = len(good.rstrip(b"\x00")) + 16  # mutate where the records are, not only the zero tail
        for _ in range(300):
            b = bytearray(good[: 1 + rnd.randrange(used)] if rnd.random() < 0.2 else good)  # never empty
            for _ in range(rnd.randrange(1, 4)):
                b[rnd.randrange(min(len(b), used))] = rnd.randrange(256)
            try:
                parse(bytes(b), str(path))
                outcomes["read"] += 1
            except zk.ZooKeeperDataError:
                outcomes["error"] += 1
    assert outcomes["error"] > 0 and outcomes["read"] > 0, outcomes
