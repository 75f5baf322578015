"""A data directory whose metadata is a live ZooKeeper (``open_data_dir(metadata_store="zk:...")`` and the commands'
``--metadata-store``): the synthetic standalone's metadata, served by the fake server of tests/zk_fake.py, must
read exactly as its RocksDB store does. The real-server version is tests/interop/test_interop_zk_live.py.
"""

from __future__ import annotations

import json

import pytest
from datadir_fixtures import assert_same_data, file_hashes
from helpers import read_export
from pulsarkit.cli import main
from pulsarkit.metadata.store import MetadataStore, StoreItems
from pulsarkit.scan.bookie_dir import find_layout
from pulsarkit.scan.datadir import DataDirSpec, open_data_dir
from pulsarkit.scan.records import topic_dict
from zk_fake import FakeServer, Tree

ORDERS = "/managed-ledgers/public/default/persistent/orders"


def _tree(nodes: dict[str, bytes], ledger_ids_issued: int | None = None) -> Tree:
    """The nodes with the parents ZooKeeper needs (empty), as a server holds them. ``ledger_ids_issued``: the
    RocksDB store's counter, carried over as ZooKeeper keeps it, in ``/ledgers/idgen``'s cversion (each id
    was a child created and deleted there: two changes)."""
    full = {"/": b""}
    for p, d in nodes.items():
        parts = p.split("/")
        for i in range(2, len(parts)):
            full.setdefault("/".join(parts[:i]), b"")
        full[p] = d
    tree = Tree(full)
    if ledger_ids_issued is not None and "/ledgers/idgen" in tree.nodes:
        tree.nodes["/ledgers/idgen"][1]["cversion"] = 2 * ledger_ids_issued
        tree.history = {tree.zxid: tree.state()}
    return tree


@pytest.fixture(scope="module")
def served(synthetic):
    """The synthetic standalone, and three fake servers: its whole metadata, the metadata store without /admin,
    the configuration store (/admin) alone."""
    root, _ = synthetic
    md, bookies = find_layout(root)
    with MetadataStore(md, read_only=True) as store:
        items = StoreItems(store.raw_items())
    nodes = {p: items.get(p)[0] for p in items.keys() if p != "/"}  # type: ignore[index]
    assert any(p.startswith("/admin/") for p in nodes) and ORDERS in nodes
    issued = items.next_sequential("/ledgers/idgen")
    servers = [
        FakeServer(_tree(nodes, issued)),
        FakeServer(_tree({p: d for p, d in nodes.items() if not p.startswith("/admin")}, issued)),
        FakeServer(_tree({p: d for p, d in nodes.items() if p.startswith("/admin")})),
    ]
    yield root, md, bookies, servers
    for s in servers:
        s.stop()


def test_live_metadata_reads_as_the_rocksdb_store(served):
    root, md, bookies, (whole, local, conf) = served
    rocks = open_data_dir(root)
    live = open_data_dir(metadata_store=whole.url(), ledger_dirs=bookies)
    assert live.metadata_zxid == whole.tree.zxid
    assert live.metadata_source.startswith(f"ZooKeeper zk:127.0.0.1:{whole.port} (live, read-only): ")
    assert str(live.metadata_dir) == f"zk:127.0.0.1:{whole.port}"
    assert_same_data(live, rocks)
    assert {op for op, _, _ in whole.requests} <= {4, 12, -11}  # getData, getChildren2, closeSession

    split = open_data_dir(metadata_store=local.url(), configuration_metadata_store=conf.url(), ledger_dirs=bookies)
    assert "; configuration store ZooKeeper" in split.metadata_source and split.partitioned
    assert_same_data(split, rocks)
    # rocksdb:PATH is the RocksDB store, alone or beside a ZooKeeper configuration store.
    assert_same_data(open_data_dir(metadata_store=f"rocksdb:{md}", ledger_dirs=bookies), rocks)
    assert_same_data(
        open_data_dir(metadata_store=f"rocksdb:{md}", configuration_metadata_store=conf.url(), ledger_dirs=bookies),
        rocks,
    )


def test_a_node_it_may_not_read_is_an_issue(served):
    root, _, bookies, _ = served
    with MetadataStore(find_layout(root)[0], read_only=True) as store:
        items = StoreItems(store.raw_items())
    with FakeServer(_tree({p: items.get(p)[0] for p in items.keys() if p != "/"}), noauth=(ORDERS,)) as srv:  # type: ignore[index]
        dd = open_data_dir(metadata_store=srv.url(), ledger_dirs=bookies)
    assert [(i.kind, i.message) for i in dd.issues if i.kind == "zookeeper_live"] == [
        ("zookeeper_live", f"{ORDERS}: not readable without authentication (NoAuth): left out")
    ]
    assert "persistent://public/default/orders" not in [t.name for t in dd.topics()]


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_with_the_live_metadata_store(served, capsys):
    root, _, bookies, (whole, local, conf) = served
    rc, want, err = run(capsys, "topics", root, "--format", "json")
    assert rc == 0 and err == ""
    rc, out, err = run(
        capsys, "topics", "--metadata-store", whole.url(), "--ledger-dir", bookies[0], "--format", "json"
    )
    assert rc == 0 and out == want and len(json.loads(out)) > 3
    assert err.startswith(f"pulsarkit topics: metadata: ZooKeeper zk:127.0.0.1:{whole.port} (live, read-only)")
    args = ["--metadata-store", local.url(), "--configuration-metadata-store", conf.url(), "--ledger-dir", bookies[0]]
    rc, out, _ = run(capsys, "ledgers", *args, "--format", "json")
    assert rc == 0 and out == run(capsys, "ledgers", root, "--format", "json")[1]
    orders, sub = "persistent://public/default/orders", "sub-none"
    rc, want, _ = run(capsys, "backlog", root, orders, sub, "--format", "jsonl")
    rc2, out, _ = run(capsys, "backlog", orders, sub, *args, "--format", "jsonl")
    assert rc == rc2 == 0 and out == want and want
    md = next(iter(open_data_dir(root).ledger_metadata.values()))
    bookie = f"{md.segment[0].ensembleMember[0]}={bookies[0]}"  # the synthetic bookie has no cookie
    rc, out, _ = run(capsys, "replicas", "--metadata-store", whole.url(), "--bookie", bookie, "--json")
    rc2, want, _ = run(capsys, "replicas", "--metadata-dir", root, "--bookie", bookie, "--json")
    assert rc == rc2 == 0 and out == want


@pytest.mark.parametrize(
    "argv, message",
    [
        (["topics", "--metadata-store", "etcd:http://127.0.0.1:2379", "--ledger-dir", "{bk}"], "etcd is not supported"),
        (["topics", "--metadata-store", "oxia://127.0.0.1:6648", "--ledger-dir", "{bk}"], "Oxia is not supported"),
        (["topics", "--metadata-store", "{url}", "{root}"], "--metadata-store replaces DATA_DIR"),
        (["topics", "--metadata-store", "{url}"], "give the bookies with --ledger-dir"),
        (["topics", "--metadata-store", "{url}", "--zookeeper-dir", "{root}", "--ledger-dir", "{bk}"], "once"),
        (["topics", "{root}", "--configuration-metadata-store", "{url}"], "goes with --metadata-store"),
        (["topics", "--metadata-store", "{url}", "--ledger-dir", "{bk}", "--zxid", "5"], "go with --zookeeper-dir"),
        (["topics", "--metadata-store", "zk:127.0.0.1:{url}/nope", "--ledger-dir", "{bk}"], "chroot /nope does not"),
        (["topics", "--metadata-store", "rocksdb:/no/such", "--ledger-dir", "{bk}"], "not a RocksDB database"),
        (["replicas", "--metadata-store", "{url}", "--metadata-dir", "{root}", "--bookie", "{bk}"], "one of them"),
    ],
)
def test_cli_argument_errors_are_one_line(served, capsys, argv, message):
    root, _, bookies, (whole, _, _) = served
    sub = {"{root}": root, "{bk}": bookies[0], "{url}": whole.url()}
    argv = [str(sub.get(a, a)).replace("zk:127.0.0.1:{url}", f"zk:127.0.0.1:{whole.port}") for a in argv]
    rc, out, err = run(capsys, *argv)
    assert rc == 1 and out == "" and message in err and len(err.strip().splitlines()) == 1, err


def test_nothing_in_the_directory_changes(served):
    root, _, bookies, (whole, _, _) = served
    before = file_hashes(root)
    open_data_dir(metadata_store=whole.url(), ledger_dirs=bookies)
    assert file_hashes(root) == before


def test_the_spec_and_the_export_take_the_live_store(served, tmp_path):
    """``DataDirSpec`` carries the URLs (its key is the normalised URL, chroot included; a rocksdb: URL's path
    is one of its inputs), and ``pulsarkit export --metadata-store`` writes what the standalone's export does."""
    root, md, bookies, (whole, local, conf) = served
    spec = DataDirSpec.of(metadata_store=f"zk://127.0.0.1:{whole.port}/", ledger_dirs=bookies)
    assert spec.key == f"zk:127.0.0.1:{whole.port}" and spec.inputs() == [str(b) for b in bookies]
    assert DataDirSpec.from_options(None, spec.options()) == spec
    assert DataDirSpec.of(metadata_store=f"rocksdb:{md}", ledger_dirs=bookies).key == f"metadata:{md.resolve()}"
    assert str(md) in DataDirSpec.of(metadata_store=f"rocksdb:{md}", ledger_dirs=bookies).inputs()
    split = DataDirSpec.of(metadata_store=local.url(), configuration_metadata_store=conf.url(), ledger_dirs=bookies)
    assert [topic_dict(t) for t in split.open().topics()] == [topic_dict(t) for t in open_data_dir(root).topics()]

    want, got = tmp_path / "want", tmp_path / "got"
    assert main(["export", str(root), "--to", "parquet", str(want)]) == 0
    args = ["--metadata-store", local.url(), "--configuration-metadata-store", conf.url(), "--ledger-dir", bookies[0]]
    assert main(["export", *map(str, args), "--to", "parquet", str(got)]) == 0
    order = [(c, "ascending") for c in ("topic", "ledger_id", "entry_id", "batch_index")]
    a, b = (read_export("parquet", d).sort_by(order) for d in (want, got))
    assert a.num_rows > 10 and a.equals(b)


def test_gc_plans_from_the_live_store_and_refuses_to_execute(served, capsys):
    """A GC plan from the live ZooKeeper is the RocksDB store's (made at its zxid); executing against a tree that
    moves on after it was read is refused."""
    root, md, bookies, (whole, _, _) = served
    same = ["--ledger-dir", bookies[0], "--disk-usage", "0.5", "--json"]  # not the shared disk's, which moves
    rc, want, _ = run(capsys, "gc", "--metadata-dir", md, *same)
    rc2, got, _ = run(capsys, "gc", "--metadata-store", whole.url(), *same)
    assert rc == rc2 == 0
    a, b = json.loads(want), json.loads(got)
    assert b["state"].pop("metadata_zxid") == whole.tree.zxid and "metadata_zxid" not in a["state"]
    for plan in (a, b):
        plan.pop("created_ms")
        for bk in plan["bookies"]:
            bk.pop("created_ms")
    assert a == b and a["bookies"]
    rc, out, err = run(capsys, "gc", "--metadata-store", whole.url(), "--ledger-dir", bookies[0], "--execute")
    assert rc == 1 and out == "" and "refusing --execute with --metadata-store" in err
