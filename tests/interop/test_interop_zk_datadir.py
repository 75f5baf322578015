"""A real ZooKeeper server's data directory as a data dir's metadata, against the real Pulsar 4.0.7 standalone.

Every node of the standalone's metadata store (the datadir oracle's cached ``clean`` directory) is written with
kazoo into a real ZooKeeper 3.9.3 server (the harness of test_interop_zookeeper.py: small ``snapCount``, the logs in
a separate ``dataLogDir``), one more managed ledger is created after them, and the server is stopped: its data dir
then holds snapshots and transaction logs written by ZooKeeper itself. ``open_data_dir(zookeeper_dir=...)`` with
the standalone's bookie must give exactly the topics, cursors, ledgers, orphans and messages that
``open_data_dir(<standalone>)`` gives, as of the zxid before the late node (which it lacks) and at the newest state
(which has it); ``pulsarkit topics --zookeeper-dir`` is run once as a command. Reuses the session's caches (the
standalone's data and the ZooKeeper jars): about 15 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pulsarkit.analysis.messages import read_messages
from pulsarkit.analysis.orphans import find_orphans
from pulsarkit.cli import main
from pulsarkit.metadata.store import MetadataStore, StoreItems
from pulsarkit.scan.bookie_dir import find_layout
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.scan.records import topic_dict
from standalone.test_datadir_oracle import _sha256_tree, oracle  # noqa: F401 - oracle is the fixture
from test_interop_zookeeper import Server, _lib, _tool

pytestmark = [pytest.mark.interop, pytest.mark.slow]

LATE = "/managed-ledgers/public/default/persistent/zk-late"
LATE_TOPIC = "persistent://public/default/zk-late"


def _load(server: Server, items: StoreItems, paths: list[str]) -> int:
    """Writes ``paths`` (parents before children) with kazoo; the zxid of the last write."""
    c = server.client()
    try:
        for p in paths:
            data = items.get(p)[0]  # type: ignore[index]
            if c.exists(p):  # created empty as a parent of an earlier path
                c.set(p, data)
            else:
                c.create(p, data, makepath=True)
        return max(c.exists(p).mzxid for p in paths)
    finally:
        c.stop()
        c.close()


@pytest.fixture(scope="module")
def cluster(oracle, tmp_path_factory):  # noqa: F811 - the imported fixture
    """(standalone dir, its bookie dirs, ZooKeeper root with data/ and txlog/, zxid before the late node, nodes,
    zxid before the configuration store's nodes (/admin), a second ZooKeeper's root holding those alone)."""
    _tool("java")
    lib = _lib()
    standalone = oracle / "clean" / "data"
    _, bookies = find_layout(standalone)
    with MetadataStore(standalone / "metadata", read_only=True) as store:
        items = StoreItems(store.raw_items())
    admin = [p for p in items.keys() if p.startswith("/admin/")]
    local = [p for p in items.keys() if not p.startswith("/admin/")]
    root = tmp_path_factory.mktemp("zk-datadir")
    server = Server(lib, root, 3_600_000)  # no container manager: nothing here is a container
    try:
        before_admin = _load(server, items, local)
        before_late = _load(server, items, admin)
        c = server.client()
        c.create(LATE, b"")
        c.stop()
        c.close()
    finally:
        server.stop()
    snaps = list((root / "data" / "version-2").glob("snapshot.*"))
    logs = list((root / "txlog" / "version-2").glob("log.*"))
    assert len(snaps) >= 2 and logs, (snaps, logs)
    conf = tmp_path_factory.mktemp("zk-configuration")
    server = Server(lib, conf, 3_600_000)
    try:
        _load(server, items, admin)
    finally:
        server.stop()
    return standalone, bookies, root, before_late, len(items), before_admin, conf


def _zk(root: Path) -> dict[str, Path]:
    return {"zookeeper_dir": root / "data", "zookeeper_log_dir": root / "txlog"}


def test_zookeeper_data_dir_reads_as_the_standalones_metadata_store(cluster):
    standalone, bookies, root, before_late, n_nodes, _, _ = cluster
    files = _sha256_tree(root)
    rocks = open_data_dir(standalone)
    as_of = open_data_dir(**_zk(root), ledger_dirs=bookies, zxid=before_late)
    assert as_of.metadata_zxid == before_late
    assert " + 0 transaction(s)" not in as_of.metadata_source  # a snapshot, then transactions replayed on it
    assert n_nodes > 100 and all(p in as_of.nodes for p in rocks.nodes)
    topics = [topic_dict(t) for t in rocks.topics()]
    assert len(topics) > 15 and sum(len(t["cursors"]) for t in topics) > 15
    assert [topic_dict(t) for t in as_of.topics()] == topics
    assert len(rocks.ledgers) > 20 and as_of.ledgers_table().equals(rocks.ledgers_table())
    assert as_of.partitioned == rocks.partitioned and as_of.schemas == rocks.schemas and rocks.schemas
    assert [f.__dict__ for f in find_orphans(as_of)] == [f.__dict__ for f in find_orphans(rocks)]
    want = list(read_messages(rocks, txn="all", markers=True, include_system=True))
    assert len(want) > 100 and list(read_messages(as_of, txn="all", markers=True, include_system=True)) == want
    assert [str(i) for i in as_of.issues] == [str(i) for i in rocks.issues] == []

    newest = open_data_dir(**_zk(root), ledger_dirs=bookies)
    assert newest.metadata_zxid > before_late and newest.issues == []
    assert [t.name for t in newest.topics()] == sorted([t["topic"] for t in topics] + [LATE_TOPIC])
    assert LATE_TOPIC not in [t["topic"] for t in topics]
    assert newest.ledgers_table().equals(rocks.ledgers_table())
    assert list(read_messages(newest)) == list(read_messages(rocks))
    assert _sha256_tree(root) == files  # read-only


def test_a_separate_configuration_store(cluster):
    """The state before /admin was written, with a second ZooKeeper holding /admin as the configuration store."""
    standalone, bookies, root, _, _, before_admin, conf = cluster
    rocks = open_data_dir(standalone)
    alone = open_data_dir(**_zk(root), ledger_dirs=bookies, zxid=before_admin)
    assert rocks.partitioned and not alone.partitioned and not any(p.startswith("/admin/") for p in alone.nodes)
    both = open_data_dir(
        **_zk(root),
        configuration_zookeeper_dir=conf / "data",
        configuration_zookeeper_log_dir=conf / "txlog",
        ledger_dirs=bookies,
        zxid=before_admin,
    )
    assert "; configuration store ZooKeeper" in both.metadata_source and both.issues == []
    assert both.partitioned == rocks.partitioned
    assert [topic_dict(t) for t in both.topics()] == [topic_dict(t) for t in rocks.topics()]
    assert both.ledgers_table().equals(rocks.ledgers_table())


def test_cli_topics_from_the_zookeeper_data_dir(cluster, capsys):
    standalone, bookies, root, before_late, *_ = cluster
    assert main(["topics", str(standalone), "--format", "json"]) == 0
    want = capsys.readouterr().out
    args = ["--zookeeper-dir", root / "data", "--zookeeper-log-dir", root / "txlog", "--ledger-dir", bookies[0]]
    got = subprocess.run(
        [sys.executable, "-m", "pulsarkit", "topics", *map(str, args), "--zxid", str(before_late), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == json.loads(want)
    source = open_data_dir(**_zk(root), ledger_dirs=bookies, zxid=before_late).metadata_source
    assert got.stderr == f"pulsarkit topics: metadata: {source}\n" and f"zxid {before_late:#x}" in source
