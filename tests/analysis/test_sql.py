"""SQL in place (pulsarkit.analysis.sql): each query's result equals the same computation done in pyarrow over
``messages_table``, on the synthetic data directory (tests/datadir_fixtures.py)."""

from __future__ import annotations

import shutil
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datadir_fixtures import file_hashes
from pulsarkit.analysis import sql as sqlmod
from pulsarkit.analysis.messages import messages_table
from pulsarkit.analysis.sql import SqlEngineMissing, SqlError, bind_topics, query, query_reader, topic_refs
from pulsarkit.errors import PulsarkitError
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.scan.records import DataDirError
from pulsarkit.scan.schema import MESSAGE_FIELDS, arrow_schema, message_fields

ORDERS = "persistent://public/default/orders"
PAYMENTS = "persistent://public/default/payments"


@pytest.fixture(scope="module")
def dd(synthetic):
    root, _ = synthetic
    with open_data_dir(root) as d:
        yield d


def _sorted(rows: list[dict], *keys: str) -> list[dict]:
    return sorted(rows, key=lambda r: tuple((r[k] is None, r[k] or 0) for k in keys))


def test_the_columns_are_those_of_messages(dd):
    t = query(dd, f"SELECT * FROM topic('{ORDERS}')")
    assert t.column_names == [n for n, _ in MESSAGE_FIELDS]
    assert t.to_pylist() == messages_table(dd, ORDERS).to_pylist()
    marked = query(dd, "SELECT * FROM topic('payments')", markers=True, txn="all")
    assert marked.column_names[-1] == "marker"
    assert marked.to_pylist() == messages_table(dd, PAYMENTS, markers=True, txn="all").to_pylist()


def test_count_and_count_per_key(dd):
    m = messages_table(dd, ORDERS)
    assert query(dd, f"SELECT count(*) AS n FROM topic('{ORDERS}')").to_pylist() == [{"n": m.num_rows}]
    got = query(dd, "SELECT key, count(*) AS n FROM topic('orders') GROUP BY key").to_pylist()
    want = m.group_by("key").aggregate([([], "count_all")]).to_pylist()
    assert {r["key"]: r["n"] for r in got} == {r["key"]: r["count_all"] for r in want} and len(want) > 3


def test_filter_on_publish_time_and_projection(dd):
    m = messages_table(dd, ORDERS)
    times = sorted(m.column("publish_time").to_pylist())
    lo, hi = times[2], times[-3]
    got = query(
        dd,
        f"SELECT ledger_id, entry_id, batch_index, key FROM topic('public/default/orders') "
        f"WHERE publish_time >= {lo} AND publish_time < {hi} ORDER BY ledger_id, entry_id, batch_index",
    )
    mask = pc.and_(pc.greater_equal(m["publish_time"], lo), pc.less(m["publish_time"], hi))
    want = m.filter(mask).select(["ledger_id", "entry_id", "batch_index", "key"])
    want = want.sort_by([("ledger_id", "ascending"), ("entry_id", "ascending"), ("batch_index", "ascending")])
    assert got.to_pylist() == want.to_pylist() and 0 < got.num_rows < m.num_rows


def test_group_by_producer_and_payload_length(dd):
    m = pa.concat_tables([messages_table(dd, ORDERS), messages_table(dd, PAYMENTS)])
    got = query(
        dd,
        "SELECT producer_name, count(*) AS n, sum(octet_length(payload))::BIGINT AS bytes FROM "
        f"(SELECT * FROM topic('{ORDERS}') UNION ALL SELECT * FROM topic('{PAYMENTS}')) GROUP BY producer_name",
    ).to_pylist()
    lengths = pc.binary_length(m["payload"])
    want = (
        pa.table({"producer_name": m["producer_name"], "len": lengths})
        .group_by("producer_name")
        .aggregate([([], "count_all"), ("len", "sum")])
        .to_pylist()
    )
    assert {r["producer_name"]: (r["n"], r["bytes"]) for r in got} == {
        r["producer_name"]: (r["count_all"], r["len_sum"]) for r in want
    }
    assert sum(r["n"] for r in got) == m.num_rows


def test_join_of_two_topics(dd):
    got = query(
        dd,
        f"SELECT o.sequence_id, o.key, p.payload FROM topic('{ORDERS}') o "
        f"JOIN topic('{PAYMENTS}') p USING (sequence_id) ORDER BY o.sequence_id, o.key",
    ).to_pylist()
    o = messages_table(dd, ORDERS).select(["sequence_id", "key"])
    p = messages_table(dd, PAYMENTS).select(["sequence_id", "payload"])
    want = o.join(p, "sequence_id", join_type="inner").to_pylist()
    assert _sorted(got, "sequence_id", "key") == _sorted(want, "sequence_id", "key") and got


def test_a_partitioned_topic_is_its_partitions(dd):
    got = query(dd, "SELECT topic, partition, payload FROM topic('parts')").to_pylist()
    want = messages_table(dd, "parts").select(["topic", "partition", "payload"]).to_pylist()
    assert got == want == [{"topic": "persistent://public/default/parts-partition-1", "partition": 1, "payload": b"p0"}]


def test_transactions_as_messages_has_them(dd):
    q = "SELECT payload, txn_state FROM topic('payments') ORDER BY sequence_id"
    for txn in ("committed", "all"):
        want = messages_table(dd, PAYMENTS, txn=txn).select(["payload", "txn_state"]).to_pylist()
        assert query(dd, q, txn=txn).to_pylist() == want
    assert len(query(dd, q, txn="all")) > len(query(dd, q))


def test_only_the_referenced_topics_are_read_and_streamed(dd, monkeypatch):
    read = []
    real = sqlmod.message_batches

    def spy(d, topics, **kw):
        read.append(list(topics))
        return real(d, topics, **kw)

    monkeypatch.setattr(sqlmod, "message_batches", spy)
    reader = query_reader(dd, "SELECT key FROM topic('orders') LIMIT 2")
    assert isinstance(reader, pa.RecordBatchReader) and reader.read_all().num_rows == 2
    assert read == [["public/default/persistent/orders"]]


def test_topic_references_outside_strings_and_comments():
    q = (
        "SELECT 'topic(''x'')' AS s, \"topic('y')\" -- topic('z')\n"
        "/* topic('w') */ FROM topic( 'it''s' ) JOIN TOPIC('b') USING (key) WHERE s.topic('c') = 1"
    )
    assert [name for _, _, name in topic_refs(q)] == ["it's", "b"]
    text, bound = bind_topics("SELECT * FROM topic('a') x, topic('a') y")
    assert text == 'SELECT * FROM "pulsarkit_topic_0" x, "pulsarkit_topic_1" y'
    assert bound == [("pulsarkit_topic_0", "a"), ("pulsarkit_topic_1", "a")]
    with pytest.raises(SqlError, match="single quotes"):
        topic_refs("SELECT * FROM topic(orders)")


def test_a_bad_query_is_a_typed_error_with_the_engines_message(dd):
    with pytest.raises(SqlError, match="syntax error") as e:
        query(dd, "SELEC key FROM topic('orders')")
    assert isinstance(e.value, PulsarkitError) and "\n" not in str(e.value)
    with pytest.raises(SqlError, match=r"nokey.*") as e:
        query(dd, "SELECT nokey FROM topic('orders')")
    assert "pulsarkit_topic" not in str(e.value)


def test_an_unknown_topic_is_named(dd):
    with pytest.raises(DataDirError, match="no topic 'nope'"):
        query(dd, "SELECT count(*) FROM topic('orders') JOIN topic('nope') USING (key)")


def test_without_the_engine_one_error_says_how_to_install_it(dd, monkeypatch):
    monkeypatch.setitem(sys.modules, "duckdb", None)  # import duckdb raises ImportError
    with pytest.raises(SqlEngineMissing, match=r"pip install 'pulsarkit\[sql\]'"):
        query(dd, "SELECT 1")


def test_the_engine_reaches_no_file_and_writes_nothing(synthetic, tmp_path):
    root, _ = synthetic
    before = file_hashes(root)
    with open_data_dir(root) as d:
        for q in (
            f"COPY (SELECT * FROM topic('orders')) TO '{root}/out.csv'",
            "SELECT * FROM read_csv('/etc/hostname')",
            f"ATTACH '{tmp_path}/x.db'",
            "SET enable_external_access = true",
        ):
            with pytest.raises(SqlError):
                query(d, q)
    assert file_hashes(root) == before and not list(tmp_path.iterdir())


def test_read_issues_go_to_the_directory_as_messages_reports_them(synthetic, tmp_path):
    root, _ = synthetic
    copy = tmp_path / "d"
    shutil.copytree(root, copy)
    shutil.rmtree(copy / "bookie" / "current" / "locations")
    with open_data_dir(copy) as d:
        n = query(d, "SELECT count(*) AS n FROM topic('orders')").column("n")[0].as_py()
        sql_issues = [str(i) for i in d.issues]
    with open_data_dir(copy) as d:
        assert n == messages_table(d, ORDERS).num_rows
        assert sql_issues == [str(i) for i in d.issues] and sql_issues


def test_the_engine_pulls_the_stream_as_it_needs_it(dd, monkeypatch):
    one = messages_table(dd, ORDERS).to_batches()[0]
    pulled = []

    def many(d, topics, **kw):  # a long topic: 500 batches
        for i in range(500):
            pulled.append(i)
            yield one

    monkeypatch.setattr(sqlmod, "message_batches", many)
    reader = query_reader(dd, "SELECT key FROM topic('orders') LIMIT 3")
    assert reader.read_all().num_rows == 3 and len(pulled) < 500
    assert query(dd, "SELECT count(*) AS n FROM topic('orders')")["n"].to_pylist() == [500 * one.num_rows]


def test_decode_schema_reads_each_topics_schema_and_decodes_its_batches(dd, monkeypatch):
    """``decode="schema"``: the stream's columns are the topic's decoded schema and every batch goes through the
    schema decoder (the decoding itself is checked against the real Java consumer in test_schema_decode_real)."""
    seen: list[str] = []

    class Ts:
        pass

    def schema_of(d, topic):
        seen.append(topic)
        return Ts()

    def decoded(ts, markers=False):
        return arrow_schema(message_fields(markers)).append(pa.field("value", pa.int64()))

    def decode(d, batches):
        for b in batches:
            yield b.append_column("value", pa.array(range(b.num_rows), pa.int64()))

    monkeypatch.setattr(sqlmod, "topic_schema", schema_of)
    monkeypatch.setattr(sqlmod, "decoded_schema", decoded)
    monkeypatch.setattr(sqlmod, "decode_batches", decode)
    got = query(dd, "SELECT max(value) AS m FROM topic('orders')", decode="schema")
    assert seen == [ORDERS] and got["m"].to_pylist() == [messages_table(dd, ORDERS).num_rows - 1]
    with pytest.raises(SqlError, match="decode must be one of"):
        query(dd, "SELECT 1 FROM topic('orders')", decode="avro")


def test_importing_the_command_line_does_not_load_the_engine():
    import json
    import subprocess

    probe = (
        "import json, sys, pulsarkit.cli, pulsarkit.analysis.sql; pulsarkit.cli.build_parser(); "
        "assert 'pulsarkit.cli.sql' in sys.modules; print(json.dumps(sorted(sys.modules)))"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert "duckdb" not in json.loads(r.stdout.splitlines()[-1])


def test_a_query_without_topics_and_a_statement_without_rows(dd):
    assert query(dd, "SELECT 40 + 2 AS x").to_pylist() == [{"x": 42}]
    assert query(dd, "CREATE TEMP TABLE scratch (a INT)").num_rows == 0


def test_a_read_error_reaches_the_caller_as_itself(dd, monkeypatch):
    real = sqlmod.message_batches

    one = messages_table(dd, ORDERS).to_batches()[0]

    def failing(d, topics, **kw):
        yield from real(d, topics, **kw)
        for _ in range(2000):  # long enough that the results stream before the failure
            yield one
        raise DataDirError("bad entry in some.log at offset 7")

    monkeypatch.setattr(sqlmod, "message_batches", failing)
    for q in ("SELECT count(*) FROM topic('orders')", "SELECT key, ledger_id + 1 FROM topic('orders')"):
        with pytest.raises(DataDirError, match="^bad entry in some.log at offset 7$"):
            query(dd, q)
