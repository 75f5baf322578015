"""pulsarkit's live ZooKeeper reader (``zk:host:port[/chroot]``) against a real ZooKeeper 3.9.3 server.

The server is test_interop_zookeeper.py's harness (the Maven jars, 127.0.0.1, small ``snapCount``, logs in a
separate ``dataLogDir``), driven with kazoo. The oracles:

* kazoo reads every node (data and whole stat) before and after pulsarkit's read: **nothing changed**; the
  server's transaction log, read with pulsarkit's own ``parse_txn_log``, holds between the two exactly one
  ``createSession`` and one ``closeSession``, of pulsarkit's session, and nothing else of that session;
* the server's data directory after it stopped, read offline (``ZkSnapshotStore``): the same nodes, data and
  stats as the live read, also below a chroot;
* a writer changing nodes while the tree is read: the read starts again and its state equals the offline state
  as of the zxid it reports (``as_of_zxid``), node for node;
* the real Pulsar 4.0.7 standalone's metadata (the datadir oracle's cached ``clean`` directory) written into the
  server under chroots: ``pulsarkit messages --metadata-store zk:127.0.0.1:PORT/chroot`` prints what
  ``pulsarkit messages <standalone>`` prints, with the configuration store apart too.

The timings of the live and the offline read of the same data are printed (``-s``).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pulsarkit.analysis.messages import read_messages
from pulsarkit.errors import ZooKeeperConnectionError, ZooKeeperServerError
from pulsarkit.metadata import zookeeper as zk
from pulsarkit.metadata import zookeeper_live as zl
from pulsarkit.metadata.store import MetadataStore, StoreItems
from pulsarkit.scan.bookie_dir import find_layout
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.scan.records import topic_dict
from standalone.test_datadir_oracle import _sha256_tree, oracle  # noqa: F401 - oracle is the fixture
from test_interop_zk_datadir import _load
from test_interop_zookeeper import Server, _create_special, _lib, _tool, kazoo_client, kazoo_security

pytestmark = [pytest.mark.interop, pytest.mark.slow]

AUTH = ("digest", "pulsarkit:secret")
PROTECTED = "/pulsar/secret"


def _zxid(server: Server) -> int:
    """The server's last processed zxid (the ``srvr`` four-letter word)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"srvr")
        out = b""
        while chunk := s.recv(4096):
            out += chunk
    m = re.search(rb"Zxid: (0x[0-9a-f]+)", out)
    assert m, out
    return int(m.group(1), 16)


def _client(server: Server, chroot: str = "", **kw: Any) -> Any:
    c = kazoo_client.KazooClient(hosts=f"127.0.0.1:{server.port}{chroot}", timeout=30, **kw)
    c.start(timeout=30)
    return c


def _everything(c: Any) -> dict[str, tuple[bytes, zk.ZkStat]]:
    """Every node kazoo (with the digest identity) reads: data and the whole stat."""
    nodes = {}
    todo = ["/"]
    while todo:
        p = todo.pop()
        data, st = c.get(p)
        nodes[p] = (data or b"", zk.ZkStat(*st))
        todo.extend(("" if p == "/" else p) + "/" + ch for ch in c.get_children(p))
    return nodes


def _workload(server: Server) -> Any:
    """Pulsar-like paths under /pulsar, binary and large data, sequential, container and TTL nodes, a multi, a
    node only a digest identity may read, and a session that stays open with its ephemeral nodes (returned)."""
    c = _client(server)
    c.create("/pulsar/ledgers/00/0000/L0005", b"\x0a\x02ledger", makepath=True)
    c.create("/pulsar/ledgers/available/127.0.0.1:3181", b"", makepath=True)
    c.create("/pulsar/managed-ledgers/public/default/persistent/t", b"\x08\x01", makepath=True)
    c.create("/pulsar/admin/policies/public/default", b'{"retention_policies": null}', makepath=True)
    c.create("/pulsar/loadbalance/brokers/b1", b"{}", makepath=True)
    c.create("/bin", bytes(range(256)))
    c.create("/big", bytes(range(256)) * 2000)  # 512 KB
    for i in range(120):
        c.create(f"/many/{i // 10}/n{i:03d}", f"v{i}".encode() * (i % 7), makepath=True)
    for _ in range(5):
        c.create("/seq/item-", b"s", sequence=True, makepath=True)
    for i in range(20):
        c.set("/many/0/n001", f"set{i}".encode())
    _create_special(c, "/cont", b"c")
    c.create("/cont/child", b"x")
    _create_special(c, "/ttl", b"t", ttl=3_600_000)
    t = c.transaction()
    t.create("/multi", b"1")
    t.set_data("/bin", b"multi")
    assert not any(isinstance(r, Exception) for r in t.commit())
    acl = kazoo_security.make_digest_acl("pulsarkit", "secret", all=True)
    c.create(PROTECTED, b"hidden", acl=[acl])
    c.add_auth(*AUTH)
    c.create(PROTECTED + "/child", b"hidden too", acl=[acl])
    c.stop()
    c.close()
    kept = _client(server)
    kept.create("/eph/a", b"e", ephemeral=True, makepath=True)
    kept.create("/pulsar/ledgers/available/127.0.0.1:3182", b"", ephemeral=True)
    return kept


@pytest.fixture
def zk_server(tmp_path: Path) -> Any:
    _tool("java")
    server = Server(_lib(), tmp_path / "zk", 3_600_000)  # no container manager: nothing changes on its own
    kept = None
    try:
        kept = _workload(server)
        yield server
    finally:
        if kept is not None:  # open through the stop: its ephemeral nodes stay in the data
            kept.stop()
        server.stop()


def _offline(server: Server, **kw: Any) -> zk.ZkSnapshotStore:
    return zk.ZkSnapshotStore(server.root / "data", log_dir=server.root / "txlog", **kw)


def _txns(server: Server) -> list[zk.Txn]:
    logs = sorted((server.root / "txlog" / "version-2").glob("log.*"), key=lambda p: zk.zxid_from_name(p.name, "log"))
    return [t for log in logs for t in zk.parse_txn_log(log.read_bytes(), str(log)).txns]


def _protected(p: str) -> bool:
    return p == PROTECTED or p.startswith(PROTECTED + "/")


def test_live_read_changes_nothing_and_equals_the_offline_read(zk_server: Server) -> None:
    oracle_client = _client(zk_server, auth_data=[AUTH])
    before = _everything(oracle_client)
    zxid_before = _zxid(zk_server)
    started = time.monotonic()
    live = zl.ZkLiveStore(f"zk:127.0.0.1:{zk_server.port}", subtrees=None)
    live_s = time.monotonic() - started
    zxid_after = _zxid(zk_server)
    after = _everything(oracle_client)
    oracle_client.stop()
    oracle_client.close()

    # Nothing changed: every node's data and stat (version, cversion, aversion, zxids, ...).
    assert after == before and len(before) > 150
    # The read is the state at its zxid: its own createSession is the only transaction before that read.
    assert live.zxid == zxid_before + 1 and zxid_after == zxid_before + 2 and live.attempts == 1
    # Everything but what needs the digest identity, which is named as an issue.
    assert sorted(live.keys()) == sorted(p for p in before if not _protected(p))
    assert {p: (live.get(p)[0], live.stat(p)) for p in live.keys()} == {
        p: v for p, v in before.items() if not _protected(p)
    }
    assert [i.message for i in live.issues] == [f"{PROTECTED}: not readable without authentication (NoAuth): left out"]
    assert live.get("/eph/a")[1].ephemeral and live.get("/eph/a")[1].owner == live.stat("/eph/a").ephemeral_owner
    assert live.children("/pulsar") == ["admin", "ledgers", "loadbalance", "managed-ledgers", "secret"]

    zk_server.stop()
    # Its only transactions: its own session's createSession and closeSession.
    txns = _txns(zk_server)
    between = [(t.op, t.client_id) for t in txns if zxid_before < t.zxid <= zxid_after]
    assert between == [("createSession", live.session_id), ("closeSession", live.session_id)]
    assert [t.op for t in txns if t.client_id == live.session_id] == ["createSession", "closeSession"]
    # The server's data directory, read offline, holds the same tree.
    started = time.monotonic()
    offline = _offline(zk_server)
    offline_s = time.monotonic() - started
    assert offline.zxid > live.zxid and offline.issues == []
    assert sorted(offline.keys()) == sorted(before)
    for p in live.keys():
        assert offline.get(p)[0] == live.get(p)[0] and offline.stat(p) == live.stat(p), p
        assert offline.get(p)[1] == live.get(p)[1], p
        assert offline.children(p) == live.children(p), p
    print(
        f"live ZooKeeper read: {len(live)} nodes in {live_s * 1000:.0f} ms (zxid {live.zxid:#x}); "
        f"offline read of the same server's data dir: {len(offline)} nodes in {offline_s * 1000:.0f} ms "
        f"({offline.txns_applied} transactions replayed on {Path(offline.snapshot).name})"
    )


def test_chroot_and_hosts(zk_server: Server) -> None:
    dead = socket.create_server(("127.0.0.1", 0))
    dead_port = dead.getsockname()[1]
    dead.close()
    live = zl.ZkLiveStore(f"zk:127.0.0.1:{dead_port},127.0.0.1:{zk_server.port}/pulsar")
    assert live.server == f"127.0.0.1:{zk_server.port}"
    with pytest.raises(ZooKeeperServerError, match="the chroot /nope does not exist") as e:
        zl.ZkLiveStore(f"zk:127.0.0.1:{zk_server.port}/nope")
    assert e.value.code == zl.NO_NODE
    with pytest.raises(ZooKeeperConnectionError, match="no ZooKeeper server could be read"):
        zl.ZkLiveStore(f"zk:127.0.0.1:{dead_port}/pulsar", session=zl.SessionOptions(connect_timeout=2))
    zk_server.stop()
    offline = _offline(zk_server)
    # Pulsar's subtrees below the chroot (not /loadbalance), paths as the brokers see them.
    want = {
        p[len("/pulsar") :] or "/"
        for p in offline.keys("/pulsar")
        if p == "/pulsar" or any(p.startswith("/pulsar" + s) for s in zl.PULSAR_SUBTREES)
    }
    assert set(live.keys()) == want and "/ledgers/00/0000/L0005" in want and not live.exists("/loadbalance")
    assert "/ledgers/available/127.0.0.1:3182" in want  # the kept session's ephemeral node
    for p in live.keys():
        full = "/pulsar" + (p if p != "/" else "")
        assert (live.get(p)[0], live.stat(p)) == (offline.get(full)[0], offline.stat(full)), p


def test_a_concurrent_writer_makes_the_read_retry_and_it_stays_consistent(
    zk_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = _client(zk_server)
    stop = threading.Event()
    writes = [0]

    def write_loop() -> None:
        i = 0
        while not stop.is_set():
            for _ in range(20):  # a burst, then a pause: a walk fits in some of the pauses
                i += 1
                writer.create(f"/w/{i % 50}/n{i}", b"w", makepath=True)
                writer.set("/many/5/n055", f"w{i}".encode())
                if i > 10:
                    writer.delete(f"/w/{(i - 10) % 50}/n{i - 10}")
                writes[0] += 1
            stop.wait(0.3)

    # And one write the first attempt is sure to see: made between two of its levels.
    calls = [0]
    real_calls = zl._Connection.calls

    def calls_with_a_write(self: Any, requests: Any) -> Any:
        calls[0] += 1
        if calls[0] == 3:
            writer.set("/many/9/n099", b"changed under the walk")
        return real_calls(self, requests)

    monkeypatch.setattr(zl._Connection, "calls", calls_with_a_write)
    thread = threading.Thread(target=write_loop, daemon=True)
    thread.start()
    try:
        time.sleep(0.2)
        live = zl.ZkLiveStore(f"zk:127.0.0.1:{zk_server.port}", subtrees=None, max_attempts=40)
    finally:
        stop.set()
        thread.join(timeout=30)
        writer.stop()
        writer.close()
    assert live.attempts >= 2 and writes[0] > 0
    assert live.get("/many/9/n099")[0] == b"changed under the walk"
    zk_server.stop()
    # Every attempt in one session: created and closed once.
    assert [t.op for t in _txns(zk_server) if t.client_id == live.session_id] == ["createSession", "closeSession"]
    at = _offline(zk_server, as_of_zxid=live.zxid)
    assert at.zxid == live.zxid
    assert sorted(live.keys()) == sorted(p for p in at.keys() if not _protected(p))
    for p in live.keys():
        assert (live.get(p)[0], live.stat(p)) == (at.get(p)[0], at.stat(p)), p
    print(f"concurrent writer: {writes[0]} writes, the read took {live.attempts} attempts, zxid {live.zxid:#x}")


def test_a_lost_connection_resumes_the_same_session(zk_server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The connection drops mid-walk: the session is taken over on a new connection (the server accepts its id and
    password), the walk starts again, and the server still logs one createSession and one closeSession."""
    calls = [0]
    real_calls = zl._Connection.calls

    def calls_then_drop(self: Any, requests: Any) -> Any:
        calls[0] += 1
        if calls[0] == 3:
            self.sock.shutdown(socket.SHUT_RDWR)
        return real_calls(self, requests)

    monkeypatch.setattr(zl._Connection, "calls", calls_then_drop)
    live = zl.ZkLiveStore(f"zk:127.0.0.1:{zk_server.port}", subtrees=None)
    assert live.attempts == 2 and len(live) > 150
    zk_server.stop()
    assert [t.op for t in _txns(zk_server) if t.client_id == live.session_id] == ["createSession", "closeSession"]
    at = _offline(zk_server, as_of_zxid=live.zxid)
    for p in live.keys():
        assert (live.get(p)[0], live.stat(p)) == (at.get(p)[0], at.stat(p)), p


# ------------------------------------------------------------------------------- a real Pulsar's metadata


class _Chrooted:
    """What ``_load`` needs of a server: a kazoo client, here below a chroot."""

    def __init__(self, server: Server, chroot: str) -> None:
        self.server, self.chroot = server, chroot

    def client(self) -> Any:
        return _client(self.server, self.chroot)


@pytest.fixture(scope="module")
def pulsar_zk(oracle, tmp_path_factory):  # noqa: F811 - the imported fixture
    """A running ZooKeeper holding the standalone's metadata three times: all of it under /full, the metadata store
    alone under /local, the configuration store (/admin) alone under /conf."""
    _tool("java")
    standalone = oracle / "clean" / "data"
    _, bookies = find_layout(standalone)
    with MetadataStore(standalone / "metadata", read_only=True) as store:
        items = StoreItems(store.raw_items())
    paths = [p for p in items.keys() if p != "/"]
    server = Server(_lib(), tmp_path_factory.mktemp("zk-live-pulsar"), 3_600_000)
    try:
        c = _client(server)
        for chroot in ("/full", "/local", "/conf"):
            c.create(chroot, b"")
        c.stop()
        c.close()
        _load(_Chrooted(server, "/full"), items, paths)
        _load(_Chrooted(server, "/local"), items, [p for p in paths if not p.startswith("/admin")])
        _load(_Chrooted(server, "/conf"), items, [p for p in paths if p.startswith("/admin")])
        yield standalone, bookies, server, len(paths)
    finally:
        server.stop()


def test_messages_through_the_live_zookeeper_equal_the_standalones(pulsar_zk) -> None:
    standalone, bookies, server, n_nodes = pulsar_zk
    files = _sha256_tree(standalone)
    url = f"zk:127.0.0.1:{server.port}/full"

    def cli(*args: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pulsarkit", *map(str, args)], capture_output=True, text=True, timeout=600
        )

    want = cli("messages", standalone, "--format", "jsonl")
    assert want.returncode == 0, want.stderr
    got = cli("messages", "--metadata-store", url, "--ledger-dir", bookies[0], "--format", "jsonl")
    assert got.returncode == 0, got.stderr
    rows = [json.loads(line) for line in got.stdout.splitlines()]
    assert len(rows) > 100 and rows == [json.loads(line) for line in want.stdout.splitlines()]
    assert got.stderr.startswith(f"pulsarkit messages: metadata: ZooKeeper {url} (live, read-only): ")
    for cmd in (["topics", "--format", "json"], ["ledgers", "--format", "json"]):
        a, b = cli(*cmd, standalone), cli(*cmd, "--metadata-store", url, "--ledger-dir", bookies[0])
        assert a.returncode == b.returncode == 0, b.stderr
        assert a.stdout == b.stdout and len(a.stdout) > 1000, cmd

    rocks = open_data_dir(standalone)
    live = open_data_dir(metadata_store=url, ledger_dirs=bookies)
    assert live.issues == [] and live.metadata_zxid is not None
    read = [p for p in rocks.nodes if p.startswith(tuple(s + "/" for s in zl.PULSAR_SUBTREES))]
    assert len(read) > 100 and all(live.nodes.get(p) == rocks.nodes[p] for p in read)
    assert all(p == "/" or p.startswith(zl.PULSAR_SUBTREES) for p in live.nodes)  # only Pulsar's subtrees
    assert all(live.nodes[p] == b"" for p in set(live.nodes) - set(rocks.nodes))  # parents ZooKeeper needs
    assert [topic_dict(t) for t in live.topics()] == [topic_dict(t) for t in rocks.topics()]
    assert live.ledgers_table().equals(rocks.ledgers_table()) and live.partitioned == rocks.partitioned
    full = list(read_messages(rocks, txn="all", markers=True, include_system=True))
    assert list(read_messages(live, txn="all", markers=True, include_system=True)) == full

    # The configuration store apart: /admin from its own chroot.
    split = open_data_dir(
        metadata_store=f"zk:127.0.0.1:{server.port}/local",
        configuration_metadata_store=f"zk:127.0.0.1:{server.port}/conf",
        ledger_dirs=bookies,
    )
    assert "; configuration store ZooKeeper" in split.metadata_source
    assert split.partitioned == rocks.partitioned and split.partitioned
    assert [topic_dict(t) for t in split.topics()] == [topic_dict(t) for t in rocks.topics()]
    assert list(read_messages(split)) == list(read_messages(rocks))
    assert _sha256_tree(standalone) == files
    # etcd and Oxia are refused, one line.
    bad = cli("topics", "--metadata-store", "etcd:http://127.0.0.1:2379", "--ledger-dir", bookies[0])
    assert bad.returncode == 1 and "etcd is not supported" in bad.stderr and len(bad.stderr.splitlines()) == 1

    # Timings: the live read of Pulsar's subtrees, of everything, and the offline read of the data dir.
    t0 = time.monotonic()
    sub = zl.ZkLiveStore(f"zk:127.0.0.1:{server.port}/full")
    t1 = time.monotonic()
    whole = zl.ZkLiveStore(f"zk:127.0.0.1:{server.port}", subtrees=None)
    t2 = time.monotonic()
    server.stop()
    t3 = time.monotonic()
    offline = zk.ZkSnapshotStore(server.root / "data", log_dir=server.root / "txlog")
    t4 = time.monotonic()
    assert len(whole) == len(offline) and set(sub.keys()) == set(live.nodes)
    print(
        f"Pulsar metadata ({n_nodes} nodes, {len(rows)} messages compared): live read of /full {len(sub)} nodes "
        f"{(t1 - t0) * 1000:.0f} ms; live read of the whole server {len(whole)} nodes {(t2 - t1) * 1000:.0f} ms; "
        f"offline read of its data dir {len(offline)} nodes {(t4 - t3) * 1000:.0f} ms "
        f"({offline.txns_applied} transactions replayed)"
    )


# ------------------------------------------------------------------------------- an orphan cleanup, live


def _versions(server: Server) -> dict[str, tuple[bytes, int]]:
    c = _client(server, "/cluster")
    try:
        return {p: (d, st.version) for p, (d, st) in _everything(c).items()}
    finally:
        c.stop()
        c.close()


def test_orphan_cleanup_against_the_live_zookeeper(oracle, tmp_path, capsys) -> None:  # noqa: F811
    """A cluster's orphan cleanup executed against the live ZooKeeper: the standalone's metadata without two
    topics' managed ledgers (their ledgers are orphans, ``owner_gone``); the plan re-checked by one live read; a
    node changed after the plan is left alone; the others are backed up, then compare-and-deleted, and nothing
    else changes; the backup puts them back where they were."""
    from pulsarkit.analysis.orphan_cleanup import restore_backup
    from pulsarkit.analysis.orphans import OrphanCleanupPlan, cleanup_plan
    from pulsarkit.cli import main

    _tool("java")
    standalone = oracle / "clean" / "data"
    _, bookies = find_layout(standalone)
    with MetadataStore(standalone / "metadata", read_only=True) as store:
        items = StoreItems(store.raw_items())
    gone = (
        "/managed-ledgers/public/default/persistent/codec-none",
        "/managed-ledgers/public/default/persistent/codec-lz4",
    )
    paths = [p for p in items.keys() if p != "/" and not any(p == g or p.startswith(g + "/") for g in gone)]
    server = Server(_lib(), tmp_path / "zk", 3_600_000)
    try:
        c = _client(server)
        c.create("/cluster", b"")
        _load(_Chrooted(server, "/cluster"), items, paths)
        url = f"zk:127.0.0.1:{server.port}/cluster"
        with open_data_dir(metadata_store=url, ledger_dirs=bookies) as dd:
            plan = cleanup_plan(dd)
            paths_of = {i.ledger_id: dd.ledger_paths[i.ledger_id] for i in plan.to_delete}
        planned = sorted(paths_of)
        assert len(planned) >= 2 and {i.category for i in plan.to_delete} == {"owner_gone"}
        plan_file = tmp_path / "plan.json"
        plan.write(str(plan_file))
        moved = planned[0]
        c.set("/cluster" + paths_of[moved], c.get("/cluster" + paths_of[moved])[0])  # its version moves on
        before = _versions(server)
        rc = main(
            ["orphans-cleanup", str(plan_file), "--execute", "--metadata-store", url, "--backup", str(tmp_path / "b")]
            + ["--json"]
        )
        res = json.loads(capsys.readouterr().out)
        assert rc == 0 and sorted(res["deleted"]) == planned[1:]
        assert res["skipped"] == [{"kind": "ledger", "id": moved, "why": "its metadata changed since the plan"}]
        after = _versions(server)
        assert {p: v for p, v in before.items() if p not in after} == {
            paths_of[lid]: before[paths_of[lid]] for lid in planned[1:]
        }
        assert all(after[p] == v for p, v in before.items() if p in after) and set(after) <= set(before)
        assert sorted(restore_backup(tmp_path / "b", metadata_store=url)) == planned[1:]
        restored = _versions(server)
        assert all(restored[paths_of[lid]][0] == before[paths_of[lid]][0] for lid in planned[1:])
        assert OrphanCleanupPlan.read(str(plan_file)) == plan
        c.stop()
        c.close()
    finally:
        server.stop()
