"""The data-directory commands: ledgers, topics, messages, backlog, transactions, readjournal."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest
from pulsarkit.cli import main

ORDERS = "persistent://public/default/orders"


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_ledgers_table_and_json(synthetic, capsys):
    root, facts = synthetic
    rc, out, err = run(capsys, "ledgers", root)
    assert rc == 0 and err == ""
    assert out.splitlines()[0].split()[:3] == ["LEDGER_ID", "KIND", "STATE"]
    assert any(line.split()[:2] == [str(facts["schema"]), "schema"] for line in out.splitlines())
    rc, out, _ = run(capsys, "ledgers", root, "--format", "json", "--kind", "deleted")
    rows = [json.loads(x) for x in out.splitlines()]
    assert [(r["ledger_id"], r["state"]) for r in rows] == [(facts["deleted"], "DELETED")]


def test_ledgers_parquet(synthetic, capsys, tmp_path):
    root, _ = synthetic
    rc, _, _ = run(capsys, "ledgers", root, "--format", "parquet", "-o", tmp_path / "l.parquet")
    t = pq.read_table(tmp_path / "l.parquet")
    assert rc == 0 and "kind" in t.column_names and t.num_rows >= 10


def test_topics_json_lists_cursors(synthetic, capsys):
    root, _ = synthetic
    rc, out, _ = run(capsys, "topics", root, "--format", "json", "--no-system")
    topics = {t["topic"]: t for t in json.loads(out)}
    assert rc == 0 and "persistent://pulsar/system/__transaction_log_0" not in topics
    assert {c["name"] for c in topics[ORDERS]["cursors"]} == {"sub-ind", "sub-none", "sub-ledger"}
    assert topics["persistent://public/default/parts-partition-1"]["partition"] == 1
    rc, out, _ = run(capsys, "topics", root)
    assert "cursor sub-ledger: mark-delete" in out and "transaction_log, system" in out


def test_messages_jsonl_table_parquet(synthetic, capsys, tmp_path):
    root, _ = synthetic
    rc, out, _ = run(capsys, "messages", root, "--topic", ORDERS, "--format", "jsonl")
    recs = [json.loads(x) for x in out.splitlines()]
    assert rc == 0 and len(recs) == 13 and recs[0]["topic"] == ORDERS
    rc, out, _ = run(capsys, "messages", root, "--topic", ORDERS)
    assert "<encrypted>" in out and "journal-1" in out
    rc, _, _ = run(capsys, "messages", root, "--format", "parquet", "-o", tmp_path / "m.parquet", "--txn", "all")
    assert rc == 0 and pq.read_table(tmp_path / "m.parquet").num_rows == 13 + 1 + 5
    rc, out, _ = run(
        capsys,
        "messages",
        root,
        "--topic",
        "persistent://public/default/payments",
        "--markers",
        "--format",
        "jsonl",
        "--txn",
        "all",
    )
    markers = [json.loads(x)["marker"] for x in out.splitlines()]
    assert markers == [None, None, None, None, "TXN_COMMIT", "TXN_ABORT", None]


def test_backlog(synthetic, capsys):
    root, _ = synthetic
    rc, out, _ = run(capsys, "backlog", root, ORDERS, "sub-ind")
    assert rc == 0 and "message(s) in the backlog of sub-ind" in out
    rc, out, _ = run(capsys, "backlog", root, ORDERS, "sub-none", "--format", "jsonl")
    assert len(out.splitlines()) == 11  # two held back by its pending-ack store


def test_transactions(synthetic, capsys):
    root, _ = synthetic
    rc, out, _ = run(capsys, "transactions", root, "--format", "json")
    states = {tuple(json.loads(x)["txn"].strip("()").split(",")): json.loads(x)["state"] for x in out.splitlines()}
    assert rc == 0 and states == {
        ("0", "1"): "COMMITTED",
        ("0", "2"): "ABORTED",
        ("0", "3"): "OPEN",
        ("0", "7"): "COMMITTED",  # known only from the pending-ack store
        ("0", "8"): "ABORTED",
        ("0", "9"): "OPEN",
    }


def test_readjournal(synthetic, capsys):
    root, facts = synthetic
    rc, out, _ = run(capsys, "readjournal", root / "bookie" / "current")
    assert rc == 0 and "journal version 6" in out
    assert f"Lid={facts['journal_ledger']}, Eid={facts['journal_first']}, ByteOffset=512" in out
    rc, out, _ = run(capsys, "readjournal", root / "bookie" / "current", "--json")
    assert [json.loads(x)["entry_id"] for x in out.splitlines()] == [
        facts["journal_first"],
        facts["journal_first"] + 1,
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["topics", "/no/such/dir"], "no such directory"),
        (["messages", "{root}", "--topic", "persistent://public/default/nope"], "no topic"),
        (["backlog", "{root}", ORDERS, "nope"], "no subscription 'nope'"),
        (["readjournal", "/no/such/file.txn"], "no such file"),
    ],
)
def test_bad_input_one_clear_line(synthetic, capsys, argv, message):
    root, _ = synthetic
    rc, out, err = run(capsys, *[a.format(root=root) for a in argv])
    assert rc != 0 and message in err and len(err.strip().splitlines()) == 1


def test_damaged_dir_warns_and_strict_fails(synthetic, capsys, tmp_path):
    root, _ = synthetic
    copy = tmp_path / "d"
    shutil.copytree(root, copy)
    shutil.rmtree(copy / "bookie" / "current" / "locations")
    rc, out, err = run(capsys, "messages", copy, "--format", "jsonl")
    assert rc == 0 and "warning: missing_index" in err and len(out.splitlines()) > 0
    rc, _, _ = run(capsys, "messages", copy, "--format", "jsonl", "--strict")
    assert rc == 3


def test_markers_to_parquet_keep_java_long_sequence_ids(synthetic, capsys, tmp_path):
    root, _ = synthetic
    out = tmp_path / "mk.parquet"
    argv = ["messages", root, "--topic", "persistent://public/default/payments", "--markers", "--txn", "all"]
    rc, _, _ = run(capsys, *argv, "--format", "parquet", "-o", out)
    rows = pq.read_table(out).to_pylist()
    assert rc == 0 and [r["marker"] for r in rows if r["marker"]] == ["TXN_COMMIT", "TXN_ABORT"]


def test_parquet_to_a_pipe(synthetic):
    import io
    import subprocess
    import sys

    root, _ = synthetic
    code = "import sys; from pulsarkit.cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", code, "messages", str(root), "--format", "parquet", "--no-progress"]
    r = subprocess.run(argv, capture_output=True, check=True)
    assert pq.read_table(io.BytesIO(r.stdout)).num_rows == 13 + 1 + 2  # read-committed


def _field(no: int, value: bytes | int | str) -> bytes:
    from pulsarkit.codec.protobuf_wire import encode_varint

    if isinstance(value, int):
        return encode_varint(no << 3) + encode_varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return encode_varint(no << 3 | 2) + encode_varint(len(raw)) + raw


def _string_topic(root) -> None:
    """public/default/orders with a STRING schema (type 2) registered as the broker's registry stores it: a schema
    ledger holding a SchemaEntry and the /schemas locator naming version 0 there; two messages of version 0."""
    import hashlib
    import struct

    import pulsarkit as pk
    from pulsarkit.managed_ledger.ledger_handle import LedgerHandle

    with pk.Store.open(root, clock=lambda: 1_700_000_000_000) as store:
        h = LedgerHandle.create(store, {"application": b"pulsar", "component": b"schema"}, "CRC32C")
        info = _field(1, "public/default/orders") + _field(2, "") + _field(3, 2) + _field(4, b"") + _field(5, 1)
        eid = h.add_entry(_field(2, info + _field(6, 0)))
        h.close()
        place = _field(1, 0) + _field(2, _field(1, h.ledger_id) + _field(2, eid)) + _field(3, hashlib.sha256().digest())
        store.metadata.put("/schemas/public/default/orders", _field(1, place) + _field(2, place))
        ml = store.managed_ledger("public/default/persistent/orders")
        for seq, text in enumerate(["first", "second"]):
            md = pk.message_metadata("p", seq, 1_700_000_000_000 + seq)
            md.schema_version = struct.pack(">q", 0)
            ml.add_entry(pk.encode_entry(md, text.encode()))


@pytest.mark.parametrize("topic", ["orders", ORDERS])
def test_messages_decode_schema_reads_the_topics_schema(tmp_path, capsys, topic):
    # the command named the topic's schema by its managed-ledger name: every topic was refused
    _string_topic(tmp_path / "d")
    rc, out, err = run(capsys, "messages", tmp_path / "d", "--topic", topic, "--decode", "schema", "--format", "jsonl")
    assert rc == 0 and err == ""
    assert [(r["value"], r["schema_version"], r["decode_error"]) for r in map(json.loads, out.splitlines())] == [
        ("first", 0, None),
        ("second", 0, None),
    ]
    rc, out, err = run(capsys, "messages", tmp_path / "d", "--topic", topic, "--decode", "schema")
    assert rc == 0 and err == "" and "first" in out and "second" in out


def test_ledgers_kind_is_one_of_the_kinds_the_help_names(synthetic, capsys):
    # a mistyped kind printed an empty table with exit 0, and the help spelled a kind "transaction log"
    from pulsarkit.broker.topic_name import KINDS
    from pulsarkit.cli import build_parser

    root, _ = synthetic
    with pytest.raises(SystemExit) as e:
        main(["ledgers", str(root), "--kind", "topc"])
    assert e.value.code == 2 and "invalid choice: 'topc'" in capsys.readouterr().err
    rc, out, _ = run(capsys, "ledgers", root, "--format", "json", "--kind", "transaction_log")
    assert rc == 0 and out and {json.loads(x)["kind"] for x in out.splitlines()} == {"transaction_log"}
    text = " ".join(build_parser(["ledgers"]).format_help().split())
    assert f"by its kind ({', '.join(KINDS)})" in text


@pytest.mark.parametrize("fmt", ["jsonl", "table", "parquet"])
def test_progress_counts_entries_and_writes_no_escapes_to_a_file(synthetic, capsys, tmp_path, fmt):
    # the total counted entries, the updates messages, the unit said bytes (100% early); and a redirected stderr
    # got the terminal's line rewriting
    from pulsarkit.analysis.messages import message_entries

    root, _ = synthetic
    from pulsarkit.scan.datadir import open_data_dir

    with open_data_dir(root) as dd:
        total = message_entries(dd, [dd.resolve(ORDERS)])
    argv = ["messages", root, "--topic", ORDERS, "--format", fmt, "--progress"]
    rc, _, err = run(capsys, *argv, *(["-o", tmp_path / f"m.{fmt}"] if fmt != "table" else []))
    lines = err.splitlines()
    assert rc == 0 and lines and "\x1b" not in err and "\r" not in err
    assert lines[-1] == f"reading: 100.0% ({total}/{total} entries)"
    assert all(line.startswith("reading: ") and line.endswith(f"/{total} entries)") for line in lines)


def test_progress_on_a_terminal_rewrites_its_line(monkeypatch):
    import io
    import sys

    from pulsarkit.cli.command import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setitem(sys.modules, "rich", None)  # the plain line, as without rich
    stream = Tty()
    p = Progress(4, "reading", enabled=True, stream=stream, unit="entries")
    p.update(2)
    p.close()
    assert stream.getvalue() == "\rreading:  50.0% (2/4 entries)\x1b[K\rreading: 100.0% (4/4 entries)\x1b[K\n"


def test_errors_name_what_the_user_gave(synthetic, capsys, tmp_path):
    # they named /no/such/current's entry log name, the output's private temporary file, a raw "[Errno 2]", and
    # a file's metadata/CURRENT
    root, _ = synthetic
    (tmp_path / "afile").write_text("not a data directory")
    for argv, message in [
        (["topics", root, "--ledger-dir", "/no/such/ledgers"], "error: /no/such/ledgers: no such directory"),
        (["topics", root, "--journal-dir", tmp_path / "afile"], f"error: {tmp_path / 'afile'}: not a directory"),
        (
            ["messages", root, "--format", "jsonl", "-o", tmp_path / "nodir" / "x.jsonl"],
            f"error: {tmp_path / 'nodir' / 'x.jsonl'}: the output's directory {tmp_path / 'nodir'} does not exist",
        ),
        (["readlog", "/no/such.log"], "error: /no/such.log: No such file or directory"),
        (["readlogmetadata", "/no/such.log"], "error: /no/such.log: No such file or directory"),
        (["topics", tmp_path / "afile"], f"error: {tmp_path / 'afile'}: not a directory (a data directory is one)"),
    ]:
        rc, _, err = run(capsys, *argv)
        assert rc == 1 and err.strip().splitlines() == [f"pulsarkit {argv[0]}: {message}"], err
    assert not (tmp_path / "nodir").exists()
