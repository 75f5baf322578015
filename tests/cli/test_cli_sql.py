"""``pulsarkit sql``: output formats, errors as one line, --strict, and nothing written into the data."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from datadir_fixtures import file_hashes
from pulsarkit.analysis.messages import messages_table
from pulsarkit.cli import main
from pulsarkit.scan.datadir import open_data_dir

ORDERS = "persistent://public/default/orders"
PER_KEY = f"SELECT key, count(*) AS n FROM topic('{ORDERS}') WHERE key IS NOT NULL GROUP BY key ORDER BY key"


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _expected(root) -> list[dict]:
    with open_data_dir(root) as dd:
        t = messages_table(dd, ORDERS)
    keys = sorted(k for k in t.column("key").to_pylist() if k is not None)
    return [{"key": k, "n": keys.count(k)} for k in dict.fromkeys(keys)]


def test_formats(synthetic, capsys, tmp_path):
    root, _ = synthetic
    want = _expected(root)
    rc, out, err = run(capsys, "sql", root, PER_KEY)
    lines = out.splitlines()
    assert rc == 0 and err == "" and lines[0].split() == ["KEY", "N"]
    assert [line.split() for line in lines[1:]] == [[r["key"], str(r["n"])] for r in want]
    rc, out, _ = run(capsys, "sql", root, PER_KEY, "--format", "json")
    assert rc == 0 and json.loads(out) == want
    rc, out, _ = run(capsys, "sql", root, PER_KEY, "--format", "jsonl")
    assert rc == 0 and [json.loads(x) for x in out.splitlines()] == want
    dest = tmp_path / "r.parquet"
    rc, _, _ = run(capsys, "sql", root, PER_KEY, "--format", "parquet", "-o", dest)
    assert rc == 0 and pq.read_table(dest).to_pylist() == want
    rc, _, err = run(capsys, "sql", root, PER_KEY, "--format", "parquet", "-o", dest)
    assert rc == 1 and "--overwrite" in err  # the project's output-file rules


def test_bytes_maps_and_same_named_columns(synthetic, capsys):
    root, _ = synthetic
    q = (
        "SELECT o.key, p.key, o.payload, o.properties FROM topic('orders') o "
        "JOIN topic('payments') p USING (sequence_id) WHERE o.key = 'k1'"
    )
    rc, out, _ = run(capsys, "sql", root, q, "--format", "jsonl")
    (row,) = [json.loads(x) for x in out.splitlines()]
    assert rc == 0 and row == {
        "key": "k1",
        "key_1": None,
        "payload": base64.b64encode(b"v1").decode(),
        "properties": {"n": "1"},
    }
    rc, out, _ = run(capsys, "sql", root, q)
    assert rc == 0 and out.splitlines()[0].split() == ["KEY", "KEY_1", "PAYLOAD", "PROPERTIES"]
    assert out.splitlines()[1].split()[:2] == ["k1", "v1"]


def test_txn_and_markers(synthetic, capsys):
    root, _ = synthetic
    q = "SELECT marker FROM topic('payments') WHERE marker IS NOT NULL ORDER BY sequence_id"
    rc, out, _ = run(capsys, "sql", root, q, "--markers", "--txn", "all", "--format", "json")
    assert rc == 0 and json.loads(out) == [{"marker": "TXN_COMMIT"}, {"marker": "TXN_ABORT"}]


def test_parquet_to_a_pipe(synthetic):
    root, _ = synthetic
    code = "import sys; from pulsarkit.cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", code, "sql", str(root), PER_KEY, "--format", "parquet"]
    r = subprocess.run(argv, capture_output=True, check=True)
    assert pq.read_table(io.BytesIO(r.stdout)).to_pylist() == _expected(root)


@pytest.mark.parametrize(
    "query, message",
    [
        ("SELEC 1", "syntax error"),
        ("SELECT count(*) FROM topic('nope')", "no topic 'nope'"),
        ("SELECT * FROM topic(orders)", "single quotes"),
        ("COPY (SELECT * FROM topic('orders')) TO '{root}/x.csv'", "disabled"),
    ],
)
def test_errors_are_one_line(synthetic, capsys, query, message):
    root, _ = synthetic
    before = file_hashes(root)
    rc, out, err = run(capsys, "sql", root, query.format(root=root))
    assert rc == 1 and out == "" and message in err and len(err.strip().splitlines()) == 1
    assert err.startswith("pulsarkit sql: error: ")
    assert file_hashes(root) == before


def test_without_the_engine_one_line_on_how_to_install_it(synthetic, capsys, monkeypatch):
    root, _ = synthetic
    monkeypatch.setitem(sys.modules, "duckdb", None)
    rc, out, err = run(capsys, "sql", root, "SELECT 1")
    assert rc == 1 and out == ""
    assert err == "pulsarkit sql: error: SQL needs DuckDB: pip install 'pulsarkit[sql]' (or pip install duckdb)\n"


def test_damaged_dir_warns_and_strict_fails(synthetic, capsys, tmp_path):
    root, _ = synthetic
    copy = tmp_path / "d"
    shutil.copytree(root, copy)
    shutil.rmtree(copy / "bookie" / "current" / "locations")
    q = "SELECT count(*) AS n FROM topic('orders')"
    rc, out, err = run(capsys, "sql", copy, q, "--format", "json")
    assert rc == 0 and "warning: missing_index" in err and json.loads(out)[0]["n"] > 0
    rc, _, _ = run(capsys, "sql", copy, q, "--strict")
    assert rc == 3
