"""Many bookies through the message data source (issue 14): one metadata store and three bookie
directories (ensemble 3, write quorum 2, one ledger with an ensemble change; tests/datadir_fixtures.py),
given as ``ledger_dirs``. Every message is read once, from the copy its write set chooses, exactly as
the single process reads the same cluster; a damaged copy is passed over for the other one (and
counted), an entry no copy of which verifies is an error row, never a dropped or doubled one."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest
from datadir_fixtures import BOOKIE_IDS, ORDERS, build_bookies, build_cluster_source, direct_write_set
from pulsarkit.analysis.messages import read_message_rows
from pulsarkit.errors import PulsarkitError
from pulsarkit.scan import ReadStats, plan, read_all, read_partition
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.scan.replicas import read_order

A, B, C = BOOKIE_IDS


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> dict:
    return build_cluster_source(tmp_path_factory.mktemp("many-bookies"))


def _flip(d, loc: int) -> None:
    """Flips the last byte of the record at ``loc`` (its payload's last byte)."""
    path = d / "current" / f"{loc >> 32:x}.log"
    pos = loc & 0xFFFFFFFF
    with open(path, "r+b") as f:
        f.seek(pos - 4)
        size = int.from_bytes(f.read(4), "big")
        f.seek(pos + size - 1)
        b = f.read(1)
        f.seek(pos + size - 1)
        f.write(bytes([b[0] ^ 0x5A]))


def _single(source: dict, dirs) -> list[dict]:
    with open_data_dir(source["root"] / "src", ledger_dirs=dirs) as dd:
        assert dd.replicas is not None
        return list(read_message_rows(dd, ORDERS))


def _engine(source: dict, dirs, **kw) -> list[dict]:
    t = read_all(str(source["root"] / "src"), ledger_dirs=[str(d) for d in dirs], **kw)
    return t.to_pylist()


def _norm(rows: list[dict]) -> list[tuple]:
    return sorted(
        (r["topic"], r["ledger_id"], r["entry_id"], r["batch_index"], bytes(r["payload"]), r["sequence_id"])
        for r in rows
    )


@pytest.mark.parametrize("max_partition_bytes", [64 << 20, 200])
def test_each_message_once_equal_to_the_single_process(source, tmp_path, max_partition_bytes):
    dirs, _ = build_bookies(source, tmp_path)
    rows = _engine(source, dirs, max_partition_bytes=max_partition_bytes, min_partitions=3)
    assert _norm(rows) == _norm(_single(source, dirs))
    assert [bytes(r["payload"]) for r in sorted(rows, key=lambda r: (r["ledger_id"], r["entry_id"]))] == source["sent"]
    # the raw entries too: one row per entry, none doubled
    entries = read_all(str(source["root"] / "src"), kind="entries", ledger_dirs=[str(d) for d in dirs])
    pos = list(zip(entries.column("ledger_id").to_pylist(), entries.column("entry_id").to_pylist(), strict=True))
    assert len(pos) == len(set(pos)) == len(source["sent"]) and entries.column("error").null_count == len(pos)


def test_each_entry_is_read_from_the_first_of_its_write_set(source, tmp_path):
    dirs, _ = build_bookies(source, tmp_path)
    p = plan([str(source["root"] / "src")], ledger_dirs=[str(d) for d in dirs], max_partition_bytes=200)
    seen = set()
    for part in p.partitions:
        for seg in part.segments:
            assert seg.current is None and seg.layout is not None
            for e in range(seg.first, seg.last + 1):
                i = (e - seg.first) * 8
                holders = [
                    r.bookie_id
                    for r in seg.replicas
                    if int.from_bytes(r.locations[i : i + 8], "little", signed=True) >= 0
                ]
                ws = direct_write_set(source["segments"][seg.ledger_id], 2, e)
                assert sorted(holders) == sorted(ws)  # the partition carries exactly the write set's copies
                assert read_order(seg.layout, holders, e) == ws  # and tries them in write-set order
                seen.add((seg.ledger_id, e))
    assert len(seen) == len(source["sent"])


def test_a_damaged_copy_is_passed_over_for_the_other(source, tmp_path):
    dirs, locs = build_bookies(source, tmp_path)
    lid, eid = source["ledgers"][1], 4  # after the ensemble change its write set is [C, B]
    ws = direct_write_set(source["segments"][lid], 2, eid)
    assert ws == [C, B]
    _flip(dirs[BOOKIE_IDS.index(C)], locs[(C, lid, eid)])
    rows = _engine(source, dirs)
    assert _norm(rows) == _norm(_single(source, dirs))
    stats = ReadStats()
    p = plan([str(source["root"] / "src")], ledger_dirs=[str(d) for d in dirs])
    n = sum(b.num_rows for t in p.tasks() for b in read_partition(t, stats=stats))
    assert n == len(source["sent"]) and stats.skipped_copies == 1


def test_an_entry_no_copy_of_which_verifies_is_an_error_row(source, tmp_path):
    dirs, locs = build_bookies(source, tmp_path)
    lid, eid = source["ledgers"][0], 1
    for b in direct_write_set(source["segments"][lid], 2, eid):
        _flip(dirs[BOOKIE_IDS.index(b)], locs[(b, lid, eid)])
    entries = read_all(str(source["root"] / "src"), kind="entries", ledger_dirs=[str(d) for d in dirs])
    bad = entries.filter(pc.is_valid(entries.column("error")))
    assert bad.num_rows == 1 and (bad.column("ledger_id")[0].as_py(), bad.column("entry_id")[0].as_py()) == (lid, eid)
    assert "no copy verifies" in bad.column("error")[0].as_py()
    assert entries.num_rows == len(source["sent"])
    # messages skip it as the single process does (which records it as an issue)
    assert _norm(_engine(source, dirs)) == _norm(_single(source, dirs))


def test_ledger_dirs_need_one_metadata_store(source, tmp_path):
    dirs, _ = build_bookies(source, tmp_path)
    with pytest.raises(PulsarkitError, match="exactly one data directory"):
        plan([str(source["root"] / "src"), str(source["root"] / "single")], ledger_dirs=[str(d) for d in dirs])


@pytest.mark.spark
def test_spark_source_with_ledger_dirs(spark, source, tmp_path):
    dirs, _ = build_bookies(source, tmp_path)
    df = (
        spark.read.format("pulsarkit")
        .option("ledger_dirs", ",".join(str(d) for d in dirs))
        .option("min_partitions", "3")
        .load(str(source["root"] / "src"))
    )
    rows = [r.asDict() for r in df.collect()]
    assert _norm(rows) == _norm(_single(source, dirs))


def test_export_reads_each_message_once_from_the_bookies(source, tmp_path):
    import pyarrow.dataset as ds
    from pulsarkit.cli import main

    dirs, locs = build_bookies(source, tmp_path)
    lid, eid = source["ledgers"][1], 4
    _flip(dirs[BOOKIE_IDS.index(C)], locs[(C, lid, eid)])  # a damaged copy is passed over here too
    out = tmp_path / "export"
    args = ["export", str(source["root"] / "src"), "--to", "parquet", str(out), "--no-progress"]
    for d in dirs:
        args += ["--ledger-dir", str(d)]
    assert main(args) == 0
    t = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    got = sorted(zip(t.column("ledger_id").to_pylist(), t.column("entry_id").to_pylist(), strict=True))
    assert len(got) == len(set(got)) == len(source["sent"])
    assert sorted(bytes(p) for p in t.column("payload").to_pylist()) == sorted(source["sent"])


@pytest.mark.spark
def test_spark_source_and_export_of_a_zookeeper_cluster(spark, source, tmp_path):
    """A cluster whose metadata is a ZooKeeper data directory: the Spark source takes its parts as options
    (``zookeeper_dir``, ``ledger_dirs``; no path), and the ``spark-sql`` export engine passes them on."""
    import pyarrow.dataset as ds
    import zk_files
    from pulsarkit.metadata.store import MetadataStore, StoreItems
    from pulsarkit.scan import DataDirSpec
    from pulsarkit.spark.export import export

    dirs, _ = build_bookies(source, tmp_path)
    with MetadataStore(source["root"] / "src" / "metadata", read_only=True) as store:
        items = StoreItems(store.raw_items())
    zkd = zk_files.data_dir(tmp_path / "zk", {p: items.get(p)[0] for p in items.keys()}, 0x100000001)
    bookies = ",".join(str(d) for d in dirs)
    df = spark.read.format("pulsarkit").option("zookeeper_dir", str(zkd)).option("ledger_dirs", bookies).load()
    want = _norm(_single(source, dirs))
    assert _norm([r.asDict() for r in df.collect()]) == want
    spec = DataDirSpec.of(zookeeper_dir=zkd, ledger_dirs=dirs)
    summary = export(spec, "parquet", str(tmp_path / "out"), engine="spark-sql", spark=spark, log=lambda _: None)
    assert summary.data_dir == spec.key == f"zookeeper:{zkd.resolve()}" and summary.rows == len(want)
    t = ds.dataset(tmp_path / "out", format="parquet", partitioning="hive").to_table()
    assert _norm(t.to_pylist()) == want
