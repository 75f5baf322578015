"""The ``pulsarkit`` and ``pulsarkit-entries`` Spark data sources give exactly the single-process rows.

On the real Pulsar 4.0.7 standalone's directories (``clean`` and ``killed``, the ``oracle`` fixture of
``tests/interop/standalone/test_datadir_oracle.py``, whose ``reader.jsonl`` is what a Java Reader got)
the DataFrame equals ``read_messages`` row for row; on the synthetic directory (chunks across ledgers,
encrypted, markers, open and aborted transactions, a journal tail, a deleted ledger) as well, for
every partition size. Then the pushdown, the entries source and an empty directory.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pulsarkit as pk
import pyarrow as pa
import pytest
from pulsarkit.analysis.messages import messages_table, read_message_rows
from pulsarkit.scan import MESSAGE_FIELDS, ReadStats, plan, read_all
from pulsarkit.scan.datadir import open_data_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop" / "standalone"))
from test_datadir_oracle import oracle  # noqa: E402,F401  (the module-scoped fixture)

pytestmark = pytest.mark.spark

NS = "persistent://public/default/"


def _key(r):
    return (r["topic"] or "", r["ledger_id"], r["entry_id"], r["batch_index"])


def _norm(rows):
    out = []
    for r in rows:
        r = dict(r)
        props = r["properties"] or []
        r["properties"] = sorted(props.items() if isinstance(props, dict) else (tuple(kv) for kv in props))
        if r.get("payload") is not None:
            r["payload"] = bytes(r["payload"])
        out.append(r)
    return sorted(out, key=_key)


def _single(path, **kw):
    with open_data_dir(path) as dd:
        rows = list(read_message_rows(dd, **kw))
        assert dd.issues == [] or kw.get("include_system")
    return rows


def _spark_rows(spark, path, **options):
    r = spark.read.format("pulsarkit")
    for k, v in options.items():
        r = r.option(k, str(v))
    return [row.asDict() for row in r.load(str(path)).collect()]


@pytest.mark.interop
@pytest.mark.parametrize("kind", ["clean", "killed"])
def test_equals_the_single_process_and_the_java_reader_on_the_real_standalone(spark, oracle, kind):  # noqa: F811
    data = oracle / kind / "data"
    want = _single(data)
    # messages_table is the same contract as an Arrow table: same ids, keys, payloads, txn states
    with open_data_dir(data) as dd:
        table = messages_table(dd)
    assert table.num_rows == len(want)
    got = _spark_rows(spark, data, min_partitions=4, max_partition_bytes=64 << 10)
    assert _norm(got) == _norm(want)
    # what the Java Reader received: every id comes out, nothing else
    java = {json.loads(line)["id"].split(";")[-1] for line in (oracle / kind / "reader.jsonl").open()}
    ours = {
        f"{r['ledger_id']}:{r['entry_id']}:{r['partition']}" + (f":{r['batch_index']}" if r["batch_index"] >= 0 else "")
        for r in got
    }
    assert ours == java and len(got) > 100
    # the transactional topic: read-all flags aborted and open transactions exactly as the single process
    everything = _spark_rows(spark, data, txn="all")
    assert _norm(everything) == _norm(_single(data, txn="all"))
    assert {r["txn_state"] for r in everything if r["topic"] == NS + "txn-topic"} > {"COMMITTED"}


def test_synthetic_directory_every_partition_size_and_marker(spark, synthetic):
    root, facts = synthetic
    for txn in ("committed", "all"):
        want = _norm(_single(root, txn=txn, markers=True, include_system=True))
        for size in (1, 300, 64 << 20):  # one entry per partition: chunks spanning ledgers still whole
            got = read_all(str(root), txn=txn, markers=True, include_system=True, max_partition_bytes=size)
            assert _norm(got.to_pylist()) == want, (txn, size)
    got = _spark_rows(spark, root, txn="all", markers="true", system="true", max_partition_bytes=1)
    assert _norm(got) == _norm(_single(root, txn="all", markers=True, include_system=True))
    chunked = [r for r in got if r["payload"] == facts["chunk"]]
    assert len(chunked) == 1 and (chunked[0]["ledger_id"], chunked[0]["entry_id"]) == tuple(facts["ids"][9])
    assert {r["marker"] for r in got} == {None, "TXN_COMMIT", "TXN_ABORT"}
    assert any(r["encrypted"] and r["payload"] is None for r in got)


def test_incremental_bounds_keep_a_chunked_message_whose_first_chunks_are_before_the_mark(synthetic):
    root, facts = synthetic
    topic = NS + "orders"
    ids = [tuple(p) for p in facts["ids"]]
    whole = [r for r in read_all(str(root), filters=[("topic", "=", topic)]).to_pylist()]
    for mark in (ids[7], ids[8]):  # after the first and after the second of three chunks
        p = plan([str(root)], filters=[("topic", "=", topic)], after={str(root): {topic: mark}})
        rows = [r for task in p.tasks() for r in read_all_partition(task)]
        assert [_key(r) for r in rows] == [_key(r) for r in whole if (r["ledger_id"], r["entry_id"]) > mark]
        assert any(r["payload"] == facts["chunk"] for r in rows)
        assert p.marks[str(root)][topic] == (facts["journal_ledger"], facts["journal_first"] + 1)
    until = ids[5]
    p = plan([str(root)], filters=[("topic", "=", topic)], until={str(root): {topic: until}})
    rows = [r for task in p.tasks() for r in read_all_partition(task)]
    assert [_key(r) for r in rows] == [_key(r) for r in whole if (r["ledger_id"], r["entry_id"]) <= until]
    assert p.marks[str(root)][topic] == until


def read_all_partition(task):
    from pulsarkit.scan import read_partition

    return [r for b in read_partition(task) for r in b.to_pylist()]


def test_pushdown_prunes_topics_and_ledgers_and_filters_exactly(spark, synthetic):
    root, facts = synthetic
    orders = NS + "orders"
    first, second = facts["orders_ledgers"][:2]
    p = plan([str(root)], filters=[("topic", "=", orders), ("ledger_id", ">=", second)])
    assert {s.ledger_id for part in p.partitions for s in part.segments} <= set(facts["orders_ledgers"][1:])
    assert {part.topic for part in p.partitions} == {orders}
    df = spark.read.format("pulsarkit").option("pushdown", "true").load(str(root))
    q = df.where(f"topic = '{orders}' AND ledger_id >= {second} AND publish_time > 1700000000002")
    physical = q._jdf.queryExecution().executedPlan().toString()
    (spark_filter,) = [x for x in physical.splitlines() if "Filter (" in x]
    assert "isnotnull" in spark_filter and not any(op in spark_filter for op in ("=", ">", "<"))  # the source did it
    want = [
        r
        for r in _single(root)
        if r["topic"] == orders and r["ledger_id"] >= second and r["publish_time"] > 1_700_000_000_002
    ]
    assert _norm([r.asDict() for r in q.collect()]) == _norm(want) and want
    # what is not pushed (an OR, another column) is still applied by Spark
    q2 = (
        spark.read.format("pulsarkit")
        .option("pushdown", "true")
        .load(str(root))
        .where(f"ledger_id = {first} OR key = 'k5'")
        .select("ledger_id", "key")
    )
    assert sorted(tuple(r) for r in q2.collect()) == sorted(
        (r["ledger_id"], r["key"]) for r in _single(root) if r["ledger_id"] == first or r["key"] == "k5"
    )
    # PySpark 4.3 reuses the last pushed plan for a later query on the same DataFrame that has no
    # filter for Python (PythonDataSourceV2.readInfo): why pushdown is opt-in. Without it, reuse is right.
    assert df.count() == len(want)  # Spark's behaviour: q's rows, not df's (when this fails, Spark fixed it)
    plain = spark.read.format("pulsarkit").load(str(root))
    assert plain.where(f"ledger_id >= {second}").count() < plain.count() == len(_single(root))
    # a schema naming some columns builds only those
    few = spark.read.format("pulsarkit").schema("entry_id long, topic string").load(str(root))
    assert few.columns == ["entry_id", "topic"] and few.count() == len(_single(root))


def test_time_filters_are_pushed_and_prune_entries(spark, synthetic, tmp_path):
    from pulsarkit.spark.messages_source import read_stats

    root, _ = synthetic
    rows = _single(root)
    ts = sorted({r["broker_timestamp"] for r in rows if r["broker_timestamp"] is not None})
    lo, hi = ts[len(ts) // 3], ts[2 * len(ts) // 3]
    stats = tmp_path / "stats"
    q = (
        spark.read.format("pulsarkit")
        .option("pushdown", "true")
        .option("stats_dir", str(stats))
        .load(str(root))
        .where(f"broker_timestamp >= {lo} AND broker_timestamp < {hi}")
    )
    physical = q._jdf.queryExecution().executedPlan().toString()
    assert not [x for x in physical.splitlines() if "Filter (" in x and ">=" in x]  # the source applied it
    want = [r for r in rows if r["broker_timestamp"] is not None and lo <= r["broker_timestamp"] < hi]
    assert _norm([r.asDict() for r in q.collect()]) == _norm(want) and want
    got = read_stats(str(stats))
    with open_data_dir(root) as dd:
        entries = sum(
            dd.ledgers[lid].entries for t in dd.topics(include_system=False) for lid in dd.ml_ledgers(t.managed_ledger)
        )
    assert got["plan"].pruned_entries > 0 and 0 < got["tasks"].entry_reads < entries


def test_entries_source_and_deleted_ledgers(spark, synthetic):
    root, facts = synthetic
    with open_data_dir(root) as dd:
        want = {
            (t.name, pos.ledger_id, pos.entry_id): data
            for t in dd.topics()
            for pos, data in dd.ml_entries(t.managed_ledger)
            if isinstance(data, bytes)
        }
    rows = spark.read.format("pulsarkit-entries").load(str(root)).collect()
    assert {(r.topic, r.ledger_id, r.entry_id): bytes(r.payload) for r in rows} == want
    assert all(r.error is None for r in rows)
    with_deleted = (
        spark.read.format("pulsarkit-entries")
        .option("include_deleted", "true")
        .load(str(root))
        .where(f"ledger_id = {facts['deleted']}")
        .collect()
    )
    assert [(r.topic, r.kind, bytes(r.payload)) for r in with_deleted] == [(None, "deleted", b"gone")]


def test_an_empty_data_directory_gives_an_empty_dataframe(spark, tmp_path):
    pk.Store.open(tmp_path / "empty").close()
    df = spark.read.format("pulsarkit").load(str(tmp_path / "empty"))
    assert df.count() == 0 and df.columns == [n for n, _ in MESSAGE_FIELDS]
    assert read_all(str(tmp_path / "empty")).schema == pa.schema(MESSAGE_FIELDS)
    with pytest.raises(Exception, match="no such directory"):
        spark.read.format("pulsarkit").load(str(tmp_path / "missing")).collect()


def test_several_data_directories_in_one_read(spark, synthetic, tmp_path):
    root, _ = synthetic
    copy = shutil.copytree(root, tmp_path / "copy")
    one = _single(root)
    both = spark.read.format("pulsarkit").load(f"{root},{copy}")
    assert both.count() == 2 * len(one)
    assert _norm(read_all([str(root), str(copy)]).to_pylist()) == _norm(one + one)


def test_bulk_entry_reads_give_the_entry_by_entry_rows_for_damaged_and_missing_logs(synthetic, tmp_path, monkeypatch):
    """Partitions read their entries in native chunks (bounded in entries and bytes); a damaged entry
    and a missing entry log give exactly the rows and error messages of reading each entry on its own."""
    import dataclasses

    from pulsarkit.scan import read as ms

    root, _ = synthetic

    def both_ways(path):
        p = plan([str(path)], include_deleted=True)
        stats_bulk, stats_one = ReadStats(), ReadStats()
        bulk = [row for part in p.partitions for row in ms.iter_entries(part, stats_bulk)]
        one_by_one = []
        for part in p.partitions:
            # no digest known: the entry-by-entry path (it detects each entry's digest type)
            segs = [dataclasses.replace(s, digest=None) for s in part.segments]
            one_by_one += ms.iter_entries(dataclasses.replace(part, segments=segs), stats_one)
        assert stats_bulk == stats_one  # reads, bytes and journal entries counted alike
        return bulk, one_by_one

    import array

    seg = next(s for part in plan([str(root)]).partitions for s in part.segments if s.current and s.first == 0)
    lid, loc = seg.ledger_id, array.array("q", seg.locations)[0]
    damaged = tmp_path / "damaged"
    shutil.copytree(root, damaged)
    log = next((damaged / "bookie" / "current").glob(f"{loc >> 32:x}.log"))
    with open(log, "r+b") as f:  # one payload byte of the ledger's first entry
        f.seek((loc & 0xFFFFFFFF) + 40)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    bulk, one_by_one = both_ways(damaged)
    assert bulk == one_by_one
    monkeypatch.setattr(ms, "_READ_AHEAD_BYTES", 1)  # one entry per native call
    assert both_ways(damaged)[0] == bulk
    monkeypatch.setattr(ms, "_READ_AHEAD_BYTES", 1 << 20)
    bad = [r for r in bulk if r[3] is not None]
    assert [(r[0], r[1]) for r in bad] == [(lid, 0)] and "digest" in bad[0][3].lower()

    missing = tmp_path / "missing"
    shutil.copytree(root, missing)
    log = next((missing / "bookie" / "current").glob(f"{loc >> 32:x}.log"))
    log.unlink()
    bulk, one_by_one = both_ways(missing)
    assert bulk == one_by_one and any(r[3] and "entry log missing or unreadable" in r[3] for r in bulk)


def test_batches_cut_where_the_entry_by_entry_reader_cut_them(synthetic):
    """``_batches`` over native chunks gives the batches that appending entry by entry and cutting at
    ``batch_entries`` or ``batch_bytes`` gives, limits of 0 included (one entry per batch)."""
    from pulsarkit.scan import read as ms

    root, _ = synthetic

    def reference(part, batch_entries, batch_bytes):
        out, cur, size = [], [], 0
        for lid, eid, data, err in ms.iter_entries(part):
            cur.append((lid, eid, data, err))
            size += len(data) if data else 0
            if len(cur) >= batch_entries or size >= batch_bytes:
                out.append(cur)
                cur, size = [], 0
        return out + ([cur] if cur else [])

    parts = plan([str(root)], include_deleted=True).partitions
    for part in parts:
        # a byte limit met exactly by the first entry: the batch ends with it
        exact = next((len(d) for _, _, d, _ in ms.iter_entries(part) if d), 1)
        for batch_entries, batch_bytes in [(0, 1 << 20), (1, 1 << 20), (3, 1 << 20), (7, 500), (2048, 0), (5, 1)] + [
            (2048, exact)
        ]:
            got = [list(zip(*b)) for b in ms._batches(part, batch_entries, batch_bytes)]
            assert got == reference(part, batch_entries, batch_bytes), (batch_entries, batch_bytes)
