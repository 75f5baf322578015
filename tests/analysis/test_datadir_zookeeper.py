"""A data directory whose metadata is a ZooKeeper data directory (``open_data_dir(zookeeper_dir=...)`` and the
commands' ``--zookeeper-dir``): the synthetic standalone's metadata written as ZooKeeper files (tests/zk_files.py)
must read exactly as its RocksDB store does. The real-server version is tests/interop/test_interop_zk_datadir.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import zk_files as zf
from datadir_fixtures import BOOKIE_IDS, assert_same_data, build_bookies, build_cluster_source, file_hashes
from pulsarkit.analysis.messages import read_messages
from pulsarkit.analysis.orphan_cleanup import OrphanCleanupError
from pulsarkit.analysis.orphan_cleanup import execute as execute_cleanup
from pulsarkit.analysis.orphans import cleanup_plan
from pulsarkit.cli import main
from pulsarkit.errors import ZooKeeperDataError
from pulsarkit.managed_ledger.position import Position
from pulsarkit.metadata import zookeeper as zk
from pulsarkit.metadata.reader import MergedReader, MetadataReader
from pulsarkit.metadata.store import (
    MetadataStore,
    StoreItems,
    ledger_id_from_path,
    ledger_path,
    serialize_ledger_metadata,
)
from pulsarkit.proto import LedgerMetadataFormat, ManagedLedgerInfo
from pulsarkit.scan.bookie_dir import find_layout
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.scan.records import DataDirError

SNAP_ZXID = 0x100000050
LATE = "/managed-ledgers/public/default/persistent/zk-late"
LATE_TOPIC = "persistent://public/default/zk-late"


def _write_zk(dest: Path, paths_data: dict[str, bytes], late: bool, ledger_ids_issued: int | None = None) -> Path:
    """A ZooKeeper dataDir: a snapshot at SNAP_ZXID holding ``paths_data``, and a log that creates LATE after it.
    ``ledger_ids_issued``: the RocksDB store's counter, kept as ZooKeeper keeps it (``/ledgers/idgen``'s count of
    children created)."""
    body = zf.create(LATE, ManagedLedgerInfo().SerializeToString(), parent_cversion=1)
    issued = (
        {"/ledgers/idgen": ledger_ids_issued}
        if ledger_ids_issued is not None and "/ledgers/idgen" in paths_data
        else {}
    )
    bodies = [zf.txn_body(SNAP_ZXID + 1, zk.OP_CREATE, body)] if late else []
    return zf.data_dir(dest, paths_data, SNAP_ZXID, bodies, issued)


@pytest.fixture(scope="module")
def cluster(synthetic, tmp_path_factory):
    """The synthetic standalone's metadata as two ZooKeeper dataDirs: the metadata store (with a LATE node
    created after the snapshot) and a separate configuration store (``/admin``)."""
    root, _ = synthetic
    md, bookies = find_layout(root)
    with MetadataStore(md, read_only=True) as store:
        items = StoreItems(store.raw_items())
    nodes = {p: items.get(p)[0] for p in items.keys()}  # type: ignore[index]
    assert any(p.startswith("/admin/") for p in nodes)
    base = tmp_path_factory.mktemp("zk")
    issued = items.next_sequential("/ledgers/idgen")
    whole = _write_zk(base / "whole", nodes, late=True, ledger_ids_issued=issued)
    local_nodes = {p: d for p, d in nodes.items() if not p.startswith("/admin/")}
    local = _write_zk(base / "local", local_nodes, late=True, ledger_ids_issued=issued)
    conf = _write_zk(base / "conf", {p: d for p, d in nodes.items() if p.startswith("/admin/")}, late=False)
    return root, bookies, whole, local, conf


def test_zookeeper_metadata_reads_as_the_rocksdb_store(cluster):
    root, bookies, whole, _, _ = cluster
    before = file_hashes(whole)
    rocks = open_data_dir(root)
    as_of = open_data_dir(zookeeper_dir=whole, ledger_dirs=bookies, zxid=SNAP_ZXID)
    assert as_of.metadata_zxid == SNAP_ZXID and "zxid 0x100000050" in as_of.metadata_source
    assert_same_data(as_of, rocks)
    newest = open_data_dir(zookeeper_dir=whole / "version-2", ledger_dirs=bookies)
    assert newest.metadata_zxid == SNAP_ZXID + 1
    assert LATE_TOPIC in [t.name for t in newest.topics()] and LATE_TOPIC not in [t.name for t in as_of.topics()]
    late = newest.topic(LATE_TOPIC)
    assert (late.ledgers, late.entries, late.cursors) == ([], 0, [])
    assert newest.ledgers_table().equals(rocks.ledgers_table())
    assert file_hashes(whole) == before  # opened read-only


def test_separate_configuration_store(cluster):
    root, bookies, _, local, conf = cluster
    rocks = open_data_dir(root)
    alone = open_data_dir(zookeeper_dir=local, ledger_dirs=bookies, zxid=SNAP_ZXID)
    assert not alone.partitioned and rocks.partitioned  # partitioned-topic metadata is the configuration store's
    both = open_data_dir(zookeeper_dir=local, configuration_zookeeper_dir=conf, ledger_dirs=bookies, zxid=SNAP_ZXID)
    assert "configuration store ZooKeeper" in both.metadata_source
    assert_same_data(both, rocks)


def test_merged_reader_is_a_metadata_reader(cluster):
    _, _, _, local, conf = cluster
    m = MergedReader(zk.ZkSnapshotStore(local), zk.ZkSnapshotStore(conf))
    assert isinstance(m, MetadataReader)
    keys = list(m.keys("/admin"))
    assert keys == sorted(set(keys)) and keys[0] == "/admin"  # shared parents once
    assert m.exists(LATE) and "admin" in m.children("/") and "managed-ledgers" in m.children("/")
    assert m.get("/nope") is None


def test_replay_problems_are_issues_and_strict_raises(cluster, tmp_path):
    _, bookies, whole, _, _ = cluster
    torn = shutil.copytree(whole, tmp_path / "torn")
    log = next((torn / "version-2").glob("log.*"))
    raw = log.read_bytes().rstrip(b"\0")
    log.write_bytes(raw[:-3])  # the last record torn: reported, ignored
    dd = open_data_dir(zookeeper_dir=torn, ledger_dirs=bookies)
    assert dd.metadata_zxid == SNAP_ZXID and LATE_TOPIC not in [t.name for t in dd.topics()]
    assert any(i.kind == "zookeeper_data" and str(log) == i.path for i in dd.issues)
    with pytest.raises(DataDirError, match="zookeeper_data"):
        open_data_dir(zookeeper_dir=torn, ledger_dirs=bookies, strict=True)
    no_logs = shutil.copytree(whole, tmp_path / "nolog")
    log = next((no_logs / "version-2").glob("log.*"))
    log.unlink()
    dd = open_data_dir(zookeeper_dir=no_logs, ledger_dirs=bookies)
    assert any("no transaction log" in i.message for i in dd.issues)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"zookeeper_dir": "{zk}", "metadata_dir": "{root}", "ledger_dirs": ["{bk}"]}, "without path or metadata_dir"),
        ({"path": "{root}", "zookeeper_dir": "{zk}"}, "without path or metadata_dir"),
        ({"zookeeper_dir": "{zk}"}, "give the bookies' ledger_dirs"),
        ({"path": "{root}", "zxid": 5}, "zxid without zookeeper_dir"),
        ({"path": "{root}", "configuration_zookeeper_dir": "{zk}"}, "configuration_zookeeper_dir without"),
        ({"zookeeper_dir": "/no/such/zk", "ledger_dirs": ["{bk}"]}, "no such directory"),
        ({"path": "{root}", "configuration_zookeeper_log_dir": "{zk}"}, "configuration_zookeeper_log_dir without"),
        (
            {"zookeeper_dir": "{zk}", "ledger_dirs": ["{bk}"], "configuration_zookeeper_log_dir": "{zk}"},
            "configuration_zookeeper_log_dir without configuration_zookeeper_dir",
        ),
        ({"zookeeper_dir": "{zk}", "ledger_dirs": ["{bk}"], "zxid": -1}, "negative"),
    ],
)
def test_argument_errors(cluster, kw, message):
    root, bookies, whole, _, _ = cluster
    sub = {"{root}": str(root), "{zk}": str(whole), "{bk}": str(bookies[0])}
    kw = {k: ([sub.get(x, x) for x in v] if isinstance(v, list) else sub.get(v, v)) for k, v in kw.items()}
    with pytest.raises(DataDirError, match=message):
        open_data_dir(**kw)


def test_a_state_the_files_cannot_give_is_a_typed_error(cluster):
    _, bookies, whole, _, _ = cluster
    with pytest.raises(ZooKeeperDataError, match="not in"):
        open_data_dir(zookeeper_dir=whole, ledger_dirs=bookies, zxid=SNAP_ZXID + 5)
    with pytest.raises(ZooKeeperDataError, match="every snapshot is newer"):
        open_data_dir(zookeeper_dir=whole, ledger_dirs=bookies, zxid=3)


def test_a_cleanup_plan_from_zookeeper_is_never_executed(cluster, tmp_path):
    _, bookies, whole, _, _ = cluster
    zk_copy = shutil.copytree(whole, tmp_path / "zk")
    before = file_hashes(zk_copy)
    plan = cleanup_plan(open_data_dir(zookeeper_dir=zk_copy, ledger_dirs=bookies, zxid=SNAP_ZXID))
    with pytest.raises(OrphanCleanupError, match="not a RocksDB metadata store"):
        execute_cleanup(plan, backup_dir=tmp_path / "backup")
    assert file_hashes(zk_copy) == before and not (tmp_path / "backup").exists()


def test_bookkeepers_own_nodes_in_zookeeper(synthetic, tmp_path):
    """What BookKeeper keeps under /ledgers in a ZooKeeper-backed cluster: ledger metadata in both layouts
    (hierarchical 2-4-4 and long-hierarchical 3-4-4-4-4 for ids from 2^31), format v3 (binary) and v2 (text),
    and its own nodes (LAYOUT, INSTANCEID, available bookies, cookies, under-replication), which are no ledgers."""
    _, bookies = find_layout(synthetic[0])
    md = LedgerMetadataFormat(quorumSize=2, ensembleSize=3, ackQuorumSize=2, length=10, lastEntryId=4)
    md.state = LedgerMetadataFormat.CLOSED
    md.segment.add(ensembleMember=["10.0.0.1:3181", "10.0.0.2:3181", "10.0.0.3:3181"], firstEntryId=0)
    big = 2**40 + 7
    v2 = b"BookieMetadataFormatVersion\t2\nquorumSize: 2\nensembleSize: 3\nlength: 10\nlastEntryId: 4\nstate: CLOSED\n"
    nodes = {
        "/ledgers/LAYOUT": b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1\n",
        "/ledgers/INSTANCEID": b"5f0c3a3e-0b7a-4c69-9d1e-6c3b2f0e1a2b",
        "/ledgers/available/10.0.0.1:3181": b"",
        "/ledgers/available/readonly/10.0.0.2:3181": b"",
        "/ledgers/cookies/10.0.0.1:3181": b'5\nbookieHost: "10.0.0.1:3181"\n',
        "/ledgers/underreplication/ledgers/0000/0000/0000/0009/urL0000000009": b"",
        "/ledgers/idgen-long/0000000000": b"",
        ledger_path(big): serialize_ledger_metadata(md),
        ledger_path(9): v2,
    }
    assert ledger_path(big) == "/ledgers/000/0001/0995/1162/L7783"
    zkd = _write_zk(tmp_path / "zk", nodes, late=False)
    dd = open_data_dir(zookeeper_dir=zkd, ledger_dirs=bookies)
    assert sorted(dd.ledger_metadata) == [9, big]
    assert [dd.ledgers[i].state for i in (9, big)] == ["CLOSED", "CLOSED"]
    assert dd.ledger_metadata[9].lastEntryId == dd.ledger_metadata[big].lastEntryId == 4
    assert not [i for i in dd.issues if i.kind in ("bad_ledger_metadata", "bad_metadata_value")]


def _long_path(path: str) -> str:
    """A ledger's node as LongHierarchicalLedgerManager lays it out for every id (3-4-4-4-4 digits)."""
    s = f"{ledger_id_from_path(path):019d}"
    return f"/ledgers/{s[0:3]}/{s[3:7]}/{s[7:11]}/{s[11:15]}/L{s[15:19]}"


def test_long_hierarchical_layout_and_text_format_values_read_theassert_same_data(synthetic, cluster, tmp_path):
    """An older or differently configured cluster: every ledger under the long-hierarchical layout, managed
    ledgers and cursors in protobuf text format. Everything reads as the binary, hierarchical original, and an
    orphan plan takes each ledger node's version from where the node really is."""
    from google.protobuf import text_format
    from pulsarkit.metadata.store import parse_managed_cursor_info, parse_managed_ledger_info

    root, bookies, _, _, _ = cluster
    md, _ = find_layout(root)
    with MetadataStore(md, read_only=True) as store:
        items = StoreItems(store.raw_items())
    nodes = {}
    for p in items.keys():
        data = items.get(p)[0]  # type: ignore[index]
        parts = p.split("/")
        if ledger_id_from_path(p) is not None:
            p = _long_path(p)
        elif p.startswith("/managed-ledgers/") and len(parts) in (6, 7) and parts[4] == "persistent":
            parse = parse_managed_ledger_info if len(parts) == 6 else parse_managed_cursor_info
            data = text_format.MessageToString(parse(data, p)).encode()
        nodes[p] = data
    assert any(ledger_id_from_path(p) is not None and p.count("/") == 6 for p in nodes)
    zkd = _write_zk(tmp_path / "zk", nodes, late=False)
    dd = open_data_dir(zookeeper_dir=zkd, ledger_dirs=bookies)
    rocks = open_data_dir(root)
    assert_same_data(dd, rocks)
    assert {lid: p.count("/") for lid, p in dd.ledger_paths.items()} == {lid: 6 for lid in rocks.ledger_metadata}
    ours, theirs = cleanup_plan(dd, include_review=True), cleanup_plan(rocks, include_review=True)
    assert [i.ledger_id for i in ours.items] == [i.ledger_id for i in theirs.items]
    deletable = [i for i in ours.items if i.category != "on_disk_only"]
    assert deletable and all(i.metadata_version >= 0 for i in deletable), ours.items


# ------------------------------------------------------------------------------------------------ the CLI


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_topics_from_a_zookeeper_dir(cluster, capsys):
    root, bookies, whole, local, conf = cluster
    rc, want, err = run(capsys, "topics", root, "--format", "json")
    assert rc == 0 and err == ""
    zk_args = ["--zookeeper-dir", local, "--configuration-zookeeper-dir", conf, "--ledger-dir", bookies[0]]
    rc, out, err = run(capsys, "topics", *zk_args, "--zxid", hex(SNAP_ZXID), "--format", "json")
    assert rc == 0 and out == want
    assert err.startswith("pulsarkit topics: metadata: ZooKeeper ") and "zxid 0x100000050" in err
    rc, out, _ = run(capsys, "topics", *zk_args, "--format", "json")
    assert rc == 0 and LATE_TOPIC in [t["topic"] for t in json.loads(out)]
    rc, out, err = run(capsys, "ledgers", *zk_args, "--zxid", str(SNAP_ZXID), "--format", "json")
    assert rc == 0 and out == run(capsys, "ledgers", root, "--format", "json")[1]


def test_cli_backlog_from_a_zookeeper_dir(cluster, capsys):
    """``backlog`` takes the cluster's metadata too: DATA_DIR left out, TOPIC and SUBSCRIPTION still placed."""
    root, bookies, _, local, conf = cluster
    orders, sub = "persistent://public/default/orders", "sub-none"
    rc, want, _ = run(capsys, "backlog", root, orders, sub, "--format", "jsonl")
    assert rc == 0 and want
    zk_args = ["--zookeeper-dir", local, "--configuration-zookeeper-dir", conf, "--ledger-dir", bookies[0]]
    rc, out, err = run(capsys, "backlog", orders, sub, *zk_args, "--zxid", str(SNAP_ZXID), "--format", "jsonl")
    assert rc == 0 and out == want and "metadata: ZooKeeper" in err


def test_cli_export_from_a_zookeeper_dir(cluster, capsys, tmp_path):
    """``export`` of a cluster (ZooKeeper metadata + bookie directories): the same rows as the standalone's
    export, its marks kept under the ZooKeeper directory's key; a rerun exports nothing new; an output inside
    any input directory is refused."""
    import pyarrow.compute as pc
    from helpers import read_export

    root, bookies, _, local, conf = cluster
    zk_args = ["--zookeeper-dir", local, "--configuration-zookeeper-dir", conf, "--ledger-dir", bookies[0]]
    rc, _, err = run(capsys, "export", root, "--to", "parquet", tmp_path / "a", "--engine", "local", "--no-progress")
    assert rc == 0, err
    argv = ["export", *zk_args, "--zxid", hex(SNAP_ZXID), "--to", "parquet", tmp_path / "b", "--json"]
    rc, out, err = run(capsys, *argv, "--engine", "local", "--no-progress")
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["data_dir"] == "zookeeper:" + str(Path(local).resolve()) and summary["rows"] > 0
    cols = ["topic", "ledger_id", "entry_id", "batch_index", "payload", "publish_time", "properties"]
    a, b = read_export("parquet", tmp_path / "a"), read_export("parquet", tmp_path / "b")
    order = [
        ("topic", "ascending"),
        ("ledger_id", "ascending"),
        ("entry_id", "ascending"),
        ("batch_index", "ascending"),
    ]
    assert a.select(cols).sort_by(order).equals(b.select(cols).sort_by(order))
    assert pc.sum(pc.equal(b["topic"], LATE_TOPIC)).as_py() in (0, None)
    rc, out, err = run(capsys, *argv, "--engine", "local", "--no-progress")  # incremental: nothing new
    assert rc == 0 and json.loads(out)["rows"] == 0, err
    rc, _, err = run(capsys, "export", *zk_args, "--to", "parquet", Path(bookies[0]) / "out", "--no-progress")
    assert rc == 1 and "inside the data directory" in err and not (Path(bookies[0]) / "out").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["topics", "--zookeeper-dir", "{zk}", "{root}"], "--zookeeper-dir replaces DATA_DIR"),
        (["topics", "--zookeeper-dir", "{zk}", "--metadata-dir", "{md}", "--ledger-dir", "{bk}"], "replaces"),
        (["topics", "--zookeeper-dir", "{zk}"], "give the bookies with --ledger-dir"),
        (["topics", "{root}", "--zxid", "5"], "go with --zookeeper-dir"),
        (["ledgers", "{root}", "--zookeeper-log-dir", "{zk}"], "go with --zookeeper-dir"),
        (["du", "{root}", "--configuration-zookeeper-log-dir", "{zk}"], "go with --zookeeper-dir"),
        (["orphans", "--ledger-dir", "{bk}"], "give DATA_DIR, or --metadata-dir (or --zookeeper-dir)"),
        (["topics", "--zookeeper-dir", "{zk}", "--ledger-dir", "{bk}", "--zxid", "0x200000000"], "not in"),
        (["topics", "--zookeeper-dir", "/no/such/zk", "--ledger-dir", "{bk}"], "no such directory"),
    ],
)
def test_cli_argument_errors_are_one_line(cluster, capsys, argv, message):
    root, bookies, whole, _, _ = cluster
    md, _ = find_layout(root)
    sub = {"{root}": root, "{zk}": whole, "{bk}": bookies[0], "{md}": md}
    rc, out, err = run(capsys, *[sub.get(a, a) for a in argv])
    assert rc == 1 and out == "" and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["abc", "-1", "1.5"])
def test_cli_zxid_must_be_a_number(cluster, capsys, value):
    _, bookies, whole, _, _ = cluster
    with pytest.raises(SystemExit) as e:
        main(["topics", "--zookeeper-dir", str(whole), "--ledger-dir", str(bookies[0]), "--zxid", value])
    assert e.value.code == 2 and "a zxid is a non-negative number" in capsys.readouterr().err


def test_position_is_unchanged_by_the_source(cluster):
    # cursors recovered from their cursor ledgers: the same mark-delete through either metadata source
    root, bookies, whole, _, _ = cluster
    a = open_data_dir(root)
    b = open_data_dir(zookeeper_dir=whole, ledger_dirs=bookies)
    for ml in a.managed_ledger_names():
        assert [(c.name, c.mark_delete, c.source) for c in a.cursors(ml)] == [
            (c.name, c.mark_delete, c.source) for c in b.cursors(ml)
        ]
    assert all(isinstance(c.mark_delete, Position) for ml in a.managed_ledger_names() for c in a.cursors(ml))


def test_cli_replicas_of_three_bookies_from_a_zookeeper_dir(tmp_path_factory, capsys):
    """Several bookies under one ZooKeeper: ``replicas --zookeeper-dir`` reports as ``--metadata-dir`` does."""
    source = build_cluster_source(tmp_path_factory.mktemp("replicas"))
    dirs, _ = build_bookies(source, tmp_path_factory.mktemp("bookies"))
    md = source["root"] / "src" / "metadata"
    with MetadataStore(md, read_only=True) as store:
        items = StoreItems(store.raw_items())
    zkd = zf.data_dir(tmp_path_factory.mktemp("zk") / "zk", {p: items.get(p)[0] for p in items.keys()}, SNAP_ZXID)  # type: ignore[index]
    bookie_args = [x for d in dirs for x in ("--bookie", str(d))]
    outs = {}
    for view in ("ledgers", "problems"):
        rc, want, err = run(capsys, "replicas", "--metadata-dir", md, *bookie_args, "--json", "--view", view)
        assert rc == 0 and err == ""
        rc, got, err = run(capsys, "replicas", "--zookeeper-dir", zkd, *bookie_args, "--json", "--view", view)
        assert rc == 0 and got == want and "zxid 0x100000050" in err
        outs[view] = [json.loads(x) for x in got.splitlines()]
    assert len(outs["ledgers"]) == len(source["ledgers"]) and outs["problems"] == []
    assert {b for r in outs["ledgers"] for b in r["read_from"]} == set(BOOKIE_IDS)
    rc, _, err = run(capsys, "replicas", *bookie_args)
    assert rc == 1 and "--metadata-dir or --zookeeper-dir" in err
    rc, _, err = run(capsys, "replicas", "--metadata-dir", md, "--zookeeper-dir", zkd, *bookie_args)
    assert rc == 1 and "--metadata-dir or --zookeeper-dir" in err


def test_cli_gc_against_a_zookeeper_dir(cluster, capsys, tmp_path):
    """Bookie GC of a cluster whose metadata is a ZooKeeper data directory (a stopped cluster): the same plan as
    against the RocksDB store, the plan names the zxid it was made at; --execute applies a reviewed plan only
    to that same state, and refuses --zxid (an older state would make newer ledgers look deleted)."""
    root, bookies, whole, _, _ = cluster
    same = ["--json", "--force", "--disk-usage", "0.5"]  # the measured fill level moves between two runs
    rc, want, err = run(capsys, "gc", root, *same)
    assert rc == 0, err
    rc, out, err = run(capsys, "gc", "--zookeeper-dir", whole, "--ledger-dir", bookies[0], *same)
    assert rc == 0, err
    theirs, ours = json.loads(want), json.loads(out)
    zxid = SNAP_ZXID + 1
    assert ours.pop("state") == {**theirs.pop("state"), "metadata_zxid": zxid}
    for doc in (ours, theirs, *ours["bookies"], *theirs["bookies"]):
        doc.pop("created_ms")
    assert ours == theirs and any(b["ledgers_to_delete"] for b in ours["bookies"])
    # executed on a copy of the bookie, from a reviewed plan
    copy = shutil.copytree(root, tmp_path / "copy")
    _, (bk,) = find_layout(copy)
    zk_args = ["--zookeeper-dir", whole, "--ledger-dir", bk]
    plan = tmp_path / "plan.json"
    assert run(capsys, "gc", *zk_args, "--force", "--plan", plan)[0] == 0
    assert json.loads(plan.read_text())["state"]["metadata_zxid"] == zxid
    stale = tmp_path / "stale.json"
    doc = json.loads(plan.read_text())
    doc["state"]["metadata_zxid"] = SNAP_ZXID
    stale.write_text(json.dumps(doc))
    before = file_hashes(copy)
    rc, _, err = run(capsys, "gc", *zk_args, "--execute", "--from-plan", stale)
    assert rc == 1 and "plan again" in err and file_hashes(copy) == before
    rc, _, err = run(capsys, "gc", *zk_args, "--zxid", str(SNAP_ZXID), "--execute")
    assert rc == 1 and "--zxid" in err and file_hashes(copy) == before
    rc, out, err = run(capsys, "gc", *zk_args, "--execute", "--from-plan", plan, "--json")
    assert rc == 0, err
    done = json.loads(out)["bookies"][0]["result"]
    assert sorted(done["deleted_ledgers"]) == sorted(d["ledger_id"] for d in doc["bookies"][0]["ledgers_to_delete"])
    # what is left reads as before: every message of every live topic
    assert list(read_messages(open_data_dir(zookeeper_dir=whole, ledger_dirs=[bk], zxid=SNAP_ZXID))) == list(
        read_messages(open_data_dir(root))
    )


def test_a_cluster_below_a_chroot(cluster, capsys, tmp_path):
    """A cluster whose metadataStoreUrl ends in a chroot (``zk:zk1:2181/pulsar``) keeps its tree under /pulsar of
    its ZooKeeper: ``zookeeper_chroot`` / ``--zookeeper-chroot`` reads it as the RocksDB original; a chroot that is
    not there is a one-line error."""
    from pulsarkit.metadata.reader import ChrootReader
    from pulsarkit.scan.datadir import DataDirSpec

    root, bookies, _, _, _ = cluster
    md, _ = find_layout(root)
    with MetadataStore(md, read_only=True) as store:
        items = StoreItems(store.raw_items())
    nodes = {"/pulsar" + p: items.get(p)[0] for p in items.keys() if p != "/"}  # type: ignore[index]
    nodes["/other/app"] = b"not Pulsar's"
    zkd = _write_zk(tmp_path / "zk", nodes, late=False)
    dd = open_data_dir(zookeeper_dir=zkd, ledger_dirs=bookies, zookeeper_chroot="/pulsar")
    assert_same_data(dd, open_data_dir(root))
    assert "below /pulsar" in dd.metadata_source
    whole = zk.ZkSnapshotStore(zkd)
    reader = ChrootReader(whole, "/pulsar")
    below = [p[len("/pulsar") :] or "/" for p in whole.keys() if p == "/pulsar" or p.startswith("/pulsar/")]
    assert list(reader.keys()) == below and set(items.keys()) <= set(below)
    assert list(reader.keys("/ledgers/")) == [p for p in below if p.startswith("/ledgers/")]
    assert not reader.exists("/other/app") and reader.get("/ledgers") is not None
    rc, want, _ = run(capsys, "topics", root, "--format", "json")
    rc, out, err = run(
        capsys,
        "topics",
        "--zookeeper-dir",
        zkd,
        "--zookeeper-chroot",
        "/pulsar",
        "--ledger-dir",
        bookies[0],
        "--format",
        "json",
    )
    assert rc == 0 and out == want, err
    rc, _, err = run(
        capsys, "topics", "--zookeeper-dir", zkd, "--zookeeper-chroot", "/nope", "--ledger-dir", bookies[0]
    )
    assert rc == 1 and "the chroot /nope does not exist" in err and len(err.strip().splitlines()) == 1
    spec = DataDirSpec.of(zookeeper_dir=zkd, ledger_dirs=bookies, zookeeper_chroot="/pulsar")
    assert spec.key == f"zookeeper:{zkd.resolve()}/pulsar"
    assert DataDirSpec.from_options(None, spec.options()) == spec
