"""Messages decoded with their topic's schema (issue 23) against a real Pulsar 4.0.7 standalone: topics written by
the real Java client (``schema_oracle/SchemaWorkload.java``) with AVRO (two compatible versions of one record, a
null value), JSON (a POJO's definition), PROTOBUF_NATIVE (a descriptor), PROTOBUF (a class generated from
``schema_oracle/shop.proto``), every primitive schema, KEY_VALUE INLINE and SEPARATED, and one payload that does
not match the topic's INT64 schema (sent without a schema). The same program then reads every topic back with a
Reader of ``Schema.AUTO_CONSUME()`` and dumps each value as JSON: pulsarkit's typed ``key``/``value`` columns must
equal it field by field, nulls included, and the message the Java consumer cannot decode is pulsarkit's error row.
``AUTO_CONSUME`` has no reader for PROTOBUF: that topic is dumped by a Reader of its generated class.

Its own harness and cache key (a hash of ``schema_oracle/`` and the protoc version):
``~/.cache/pulsarkit-tests/schema-oracle/<hash>``; one standalone start, a few hundred messages. The Pulsar jars
are the data-directory oracle's (``_lib``); ``protoc`` comes from Maven (``_protoc``)."""

from __future__ import annotations

import base64
import datetime as dt
import fcntl
import hashlib
import json
import platform
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pulsarkit as pk
import pyarrow as pa
import pytest
from helpers import free_port, maven_copy_dependencies
from pulsarkit.analysis.messages import messages_table
from pulsarkit.analysis.schemas import schema_history
from pulsarkit.cli import main
from test_datadir_oracle import CACHE as ORACLE_CACHE
from test_datadir_oracle import JVM, PULSAR_VERSION, _lib, _tool

pytestmark = [pytest.mark.interop, pytest.mark.slow]

HERE = Path(__file__).resolve().parent / "schema_oracle"
CACHE = ORACLE_CACHE.parent / "schema-oracle"
NS = "persistent://public/default/"
#: the client's protobuf-java (pulsar-client-original 4.0.7 depends on 3.25.5, not shaded)
PROTOC_VERSION = "3.25.5"


def _hash() -> str:
    h = hashlib.sha256((PULSAR_VERSION + PROTOC_VERSION).encode())
    for p in sorted(HERE.iterdir()):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()[:16]


def _start(lib: Path, work: Path) -> tuple[subprocess.Popen, int, int]:
    port, web = free_port(), free_port()
    conf = (HERE / "standalone.conf").read_text() + f"brokerServicePort={port}\nwebServicePort={web}\n"
    (work / "standalone.conf").write_text(conf)
    with open(work / "standalone.log", "ab") as log:
        cmd = [_tool("java"), *JVM, "-Dpulsar.log.dir=logs", "-cp", f"{lib}/*"]
        cmd += ["org.apache.pulsar.PulsarStandaloneStarter", "-c", "standalone.conf", "--metadata-dir", "data/metadata"]
        cmd += ["--bookkeeper-dir", "data/bookkeeper", "-nfw", "-nss", "-a", "127.0.0.1"]
        proc = subprocess.Popen(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{web}/admin/v2/namespaces/public", timeout=2) as r:
                if b"public/default" in r.read():
                    return proc, port, web
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc, signal.SIGKILL)
            raise RuntimeError(f"standalone did not start; see {work / 'standalone.log'}")
        time.sleep(1)


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _protoc() -> Path:
    """``protoc`` from Maven (``com.google.protobuf:protoc``, an executable per platform), at the version of the
    client's ``protobuf-java``: Pulsar's ``ProtobufSchema`` takes a ``GeneratedMessageV3``, which only the 3.x
    code generator emits (4.x's extends ``GeneratedMessage`` and checks for a 4.x runtime)."""
    machine = platform.machine().lower()
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch_64", "arm64": "aarch_64"}[machine]
    work = CACHE / f"protoc-{PROTOC_VERSION}"
    work.mkdir(parents=True, exist_ok=True)
    (work / "pom.xml").write_text(
        "<project xmlns='http://maven.apache.org/POM/4.0.0'><modelVersion>4.0.0</modelVersion>"
        "<groupId>pulsarkit.test</groupId><artifactId>protoc</artifactId><version>1</version><packaging>pom</packaging>"
        "<dependencies><dependency><groupId>com.google.protobuf</groupId><artifactId>protoc</artifactId>"
        f"<version>{PROTOC_VERSION}</version><classifier>linux-{arch}</classifier><type>exe</type></dependency>"
        "</dependencies></project>"
    )
    (exe,) = maven_copy_dependencies(_tool("mvn"), work / "pom.xml", work, work / "bin", "protoc").glob("protoc-*")
    exe.chmod(0o755)
    return exe


def _generated_classes(lib: Path, root: Path) -> Path:
    """``shop.proto``'s Java class, generated and compiled for the workload's class path."""
    src, classes = root / "gen" / "src", root / "gen" / "classes"
    for d in (src, classes):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    subprocess.run([str(_protoc()), f"-I{HERE}", f"--java_out={src}", str(HERE / "shop.proto")], check=True)
    javac = [_tool("javac"), "-nowarn", "-cp", f"{lib}/*", "-d", str(classes), *map(str, src.rglob("*.java"))]
    subprocess.run(javac, check=True, capture_output=True)
    return classes


def _build(root: Path) -> None:
    lib = _lib(PULSAR_VERSION)
    classes = _generated_classes(lib, root)
    run = root / "run"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    proc, port, web = _start(lib, run)
    try:
        cmd = [_tool("java"), "-cp", f"{lib}/*:{classes}", str(HERE / "SchemaWorkload.java")]
        cmd.append(f"pulsar://127.0.0.1:{port}")
        cmd.append(f"http://127.0.0.1:{web}")
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"SchemaWorkload failed: {r.stderr[-4000:]}")
    finally:
        _stop(proc)
    dump = [line[4:] + "\n" for line in r.stdout.splitlines() if line.startswith("REC ")]
    (root / "java.jsonl").write_text("".join(dump))
    generated = [line[10:] + "\n" for line in r.stdout.splitlines() if line.startswith("GENERATED ")]
    (root / "java-generated.jsonl").write_text("".join(generated))
    noreader = [line[9:] + "\n" for line in r.stdout.splitlines() if line.startswith("NOREADER ")]
    (root / "java-noreader.jsonl").write_text("".join(noreader))
    admin = [line[7:] + "\n" for line in r.stdout.splitlines() if line.startswith("SCHEMA ")]
    (root / "admin-schemas.jsonl").write_text("".join(admin))
    shutil.copytree(run / "data", root / "data", symlinks=True)
    (root / "data" / "metadata" / "LOCK").unlink(missing_ok=True)
    shutil.rmtree(run, ignore_errors=True)
    (root / ".complete").write_text("ok")


@pytest.fixture(scope="module")
def schema_oracle() -> Path:
    """The standalone's data directory (``data/``) and the Java consumer's dump (``java.jsonl``), built once."""
    root = CACHE / _hash()
    if (root / ".complete").exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / ".complete").exists():
            _build(root)
    return root


# ------------------------------------------------------------------------- comparing with Java's dump

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _plain(v):
    """A decoded Arrow value (``as_py``) in the Java dump's terms (bytes in base64, times as stored numbers)."""
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):  # an Arrow map
            return {k: _plain(x) for k, x in v}
        return [_plain(x) for x in v]
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            raise AssertionError("naive datetimes are compared through their integer value")
        return (v - EPOCH) // dt.timedelta(milliseconds=1)
    return v


def _java_id(row) -> str:
    s = f"{row['ledger_id']}:{row['entry_id']}:{row['partition']}"
    return s + f":{row['batch_index']}" if row["batch_index"] >= 0 else s


def _java_rows(root: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for line in (root / "java.jsonl").read_text().splitlines():
        r = json.loads(line)
        out.setdefault(r["topic"], []).append(r)
    return out


def _ours(dd, topic: str) -> list[dict]:
    t = messages_table(dd, topic, decode="schema")
    ty = t.schema.field("value").type
    if pa.types.is_temporal(ty):  # the dump gives the stored numbers: ms, ns, epoch days, ns of the day
        ints = t.column("value").cast(pa.int32() if pa.types.is_date32(ty) else pa.int64())
        t = t.set_column(t.schema.get_field_index("value"), "value", ints)
    return t.to_pylist()


def _same(java, ours, where: str) -> None:
    """Java's value equals ours; a record field Java lacks (written by an older version) is ours at its default."""
    if isinstance(java, dict) and ours == []:  # an empty Arrow map reads back as an empty list of pairs
        assert java == {}, where
        return
    if isinstance(java, dict) and isinstance(ours, dict):
        for k, v in java.items():
            assert k in ours, f"{where}: field {k} missing"
            _same(v, ours[k], f"{where}.{k}")
        return
    if isinstance(java, list) and isinstance(ours, list):
        assert len(java) == len(ours), f"{where}: {java} != {ours}"
        for i, (a, b) in enumerate(zip(java, ours, strict=True)):
            _same(a, b, f"{where}[{i}]")
        return
    if isinstance(java, float) or isinstance(ours, float):
        # a float32 prints shortest in Java (1.4E-45): equal as float32 when ours is one, else exactly
        f32 = isinstance(ours, float) and abs(ours) < 3e38 and float(np.float32(ours)) == ours
        assert (np.float32(java) == np.float32(ours)) if f32 else java == ours, f"{where}: {java} != {ours}"
        return
    assert java == ours, f"{where}: {java!r} != {ours!r}"


def test_decoded_values_equal_the_java_consumers(schema_oracle):
    java = _java_rows(schema_oracle)
    assert len(java) == 21  # AVRO, JSON, PROTOBUF_NATIVE, 16 primitives, 2 KEY_VALUE (PROTOBUF: its own test)
    mismatches: list[str] = []
    with pk.open_data_dir(schema_oracle / "data") as dd:
        for topic, expected in java.items():
            ours = _ours(dd, topic)
            assert [_java_id(r) for r in ours] == [r["id"] for r in expected], topic
            for j, o in zip(expected, ours, strict=True):
                where = f"{topic} {j['id']}"
                assert o["schema_version"] == j["schema_version"], where
                if "error" in j:
                    assert o["decode_error"], f"{where}: Java failed ({j['error']}), pulsarkit decoded {o['value']}"
                    assert o["value"] is None
                    continue
                if j["key"] == "mismatch":
                    # sent through AUTO_PRODUCE_BYTES with the topic's version, not matching it: Java's consumer
                    # reads bytes that are not UTF-8 as U+FFFD and does not check JSON against the record;
                    # pulsarkit gives an error row keeping the payload
                    assert o["value"] is None and o["decode_error"] and o["payload"], where
                    assert o["schema_version"] == 0, where
                    mismatches.append(o["decode_error"])
                    continue
                if j["schema_version"] is None and "int64" in topic:
                    # written without a schema on a topic with one: AUTO_CONSUME gives the bytes, pulsarkit an
                    # error row keeping them
                    assert o["value"] is None and "without a schema version" in o["decode_error"], where
                    assert _plain(o["payload"]) == j["value"], where
                    continue
                assert o["decode_error"] is None, f"{where}: {o['decode_error']}"
                jv = j["value"]
                if "kv-" in topic:
                    _same(jv["key"], _plain(o["key"]), where + " key")
                    _same(jv["value"], _plain(o["value"]), where + " value")
                else:
                    _same(jv, _plain(o["value"]), where)
        assert dd.issues == []
    assert len(mismatches) == 2
    assert any("STRING: not UTF-8" in m for m in mismatches) and any(m.startswith("JSON: ") for m in mismatches)


def test_the_schema_history_equals_the_admin_apis(schema_oracle):
    admin = [json.loads(x) for x in (schema_oracle / "admin-schemas.jsonl").read_text().splitlines()]
    assert {(a["topic"].rsplit("/", 1)[1], a["version"]) for a in admin} >= {("schema-avro", 0), ("schema-avro", 1)}
    with pk.open_data_dir(schema_oracle / "data") as dd:
        for a in admin:
            stored = {s.version: s for s in schema_history(dd, [a["topic"]])}
            s = stored[a["version"]]
            where = (a["topic"], a["version"])
            assert (s.type, s.deleted, s.hash_matches) == (a["type"], False, True), where
            assert base64.b64encode(s.definition).decode() == a["definition"], where
            assert dict(s.properties) == a["properties"], where
        topics = {a["topic"] for a in admin}
        assert all(len(schema_history(dd, [t])) == sum(a["topic"] == t for a in admin) for t in topics)


#: the fields of shop.proto's Purchase the stored schema has no numbers for: nested messages (a map is a repeated
#: entry message) and an enum, each with the value its unset field reads as
UNNUMBERED = {"channel": "WEB", "address": None, "lines": [], "counts": []}


def test_the_protobuf_topic_equals_its_generated_class(schema_oracle, capsys):
    """``Schema.PROTOBUF(Purchase.class)`` (``shop.proto``, compiled by the protoc of the client's protobuf-java).
    Java's ``AUTO_CONSUME`` cannot read the topic at all (the client has no generic reader for the PROTOBUF type),
    so the values to equal are the generated class's (a Reader of ``Schema.PROTOBUF(Purchase.class)``). The stored
    schema numbers only the root message's fields: a message setting a nested message, a map or an enum past its
    first value is an error row naming the field, keeping the payload (never guessed); every other message equals
    the class's view field by field (scalars, repeated scalars, unsigned as Java's signed, unset and empty values)."""
    (noreader,) = [json.loads(x) for x in (schema_oracle / "java-noreader.jsonl").read_text().splitlines()]
    assert noreader["topic"] == NS + "schema-protobuf" and "'PROTOBUF' is not supported" in noreader["error"]
    java = [json.loads(x) for x in (schema_oracle / "java-generated.jsonl").read_text().splitlines()]
    assert len(java) == 21 and {j["topic"] for j in java} == {NS + "schema-protobuf"}
    with pk.open_data_dir(schema_oracle / "data") as dd:
        table = messages_table(dd, NS + "schema-protobuf", decode="schema")
        assert dd.issues == []
    # the table is typed by the stored Avro-style schema, in the class's declaration order
    ty = table.schema.field("value").type
    assert [f.name for f in ty] == list(java[0]["value"])
    assert ty.field("channel").type == pa.string() and pa.types.is_struct(ty.field("address").type)
    assert ty.field("counts").type == pa.list_(pa.struct([("key", pa.string()), ("value", pa.int32())]))
    ours = table.to_pylist()
    assert [_java_id(r) for r in ours] == [r["id"] for r in java]
    decoded, refused = [], []
    for j, o in zip(java, ours, strict=True):
        where, jv = f"schema-protobuf {j['id']}", j["value"]
        assert o["schema_version"] == 0, where
        if o["value"] is None:
            assert o["payload"] and o["decode_error"], where
            (field,) = [k for k in UNNUMBERED if f"field {k} is set" in o["decode_error"]]
            assert jv[field] != UNNUMBERED[field], f"{where}: {field} is unset in Java's view"
            refused.append(j["id"])
            continue
        assert o["decode_error"] is None, where
        assert all(jv[k] == v for k, v in UNNUMBERED.items()), f"{where}: Java sees a field pulsarkit cannot read"
        plain = _plain(o["value"])
        assert set(plain) == set(jv), where
        _same(jv, plain, where)
        decoded.append(jv)
    assert (len(decoded), len(refused)) == (11, 10)
    # the data covers what it is meant to: unsigned past the signed range, empty and unset values, an empty payload
    assert {-1} <= {d["big"] for d in decoded} and {-1} <= {d["code"] for d in decoded}
    assert {"", "comment 0"} <= {d["comment"] for d in decoded} and {""} <= {d["id"] for d in decoded}
    assert any(d["tags"] == [] and d["note"] == "" for d in decoded) and decoded[-1]["id"] == ""
    # `pulsarkit schemas` gives the type, definition and properties the admin API gives
    admin = [json.loads(x) for x in (schema_oracle / "admin-schemas.jsonl").read_text().splitlines()]
    (a,) = [a for a in admin if a["topic"] == NS + "schema-protobuf"]
    assert main(["schemas", str(schema_oracle / "data"), "--topic", "schema-protobuf", "--format", "json"]) == 0
    (cli,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert (cli["type"], cli["version"], cli["properties"]) == ("PROTOBUF", 0, a["properties"])
    assert cli["definition"].encode() == base64.b64decode(a["definition"])
    assert json.loads(cli["definition"])["name"] == "Purchase" and "__PARSING_INFO__" in cli["properties"]


def test_the_evolving_avro_topic_has_the_newest_versions_table_schema(schema_oracle):
    with pk.open_data_dir(schema_oracle / "data") as dd:
        t = messages_table(dd, NS + "schema-avro", decode="schema")
    names = [f.name for f in t.schema.field("value").type]
    assert {"score", "blob", "inner"} <= set(names)  # version 1 added score
    rows = t.to_pylist()
    assert {r["schema_version"] for r in rows} == {0, 1}
    assert all(r["value"]["score"] is None for r in rows if r["schema_version"] == 0 and r["value"] is not None)
    (null,) = [r for r in rows if r["key"] == "null-value"]
    assert null["value"] is None and null["decode_error"] is None and null["null_value"]


def test_sql_over_decoded_topics_sees_the_typed_columns(schema_oracle, capsys):
    """``pulsarkit sql --decode schema``: a query reaches the typed fields; its answers equal the decoded table's."""
    pytest.importorskip("duckdb", reason="pulsarkit[sql] is installed by the test command")
    from pulsarkit.analysis.sql import query

    data = schema_oracle / "data"
    with pk.open_data_dir(data) as dd:
        table = messages_table(dd, NS + "schema-avro", decode="schema").to_pylist()
        got = query(
            dd,
            f"SELECT schema_version, count(*) AS n, count(value.score) AS scored FROM topic('{NS}schema-avro') "
            "WHERE value IS NOT NULL GROUP BY schema_version ORDER BY schema_version",
            decode="schema",
        ).to_pylist()
        kv = query(dd, "SELECT key, value FROM topic('schema-kv-separated') ORDER BY entry_id", decode="schema")
    want = {}
    for r in table:
        if r["value"] is not None:
            n, scored = want.get(r["schema_version"], (0, 0))
            want[r["schema_version"]] = (n + 1, scored + (r["value"]["score"] is not None))
    assert [(g["schema_version"], g["n"], g["scored"]) for g in got] == [(v, *c) for v, c in sorted(want.items())]
    with pk.open_data_dir(data) as dd:
        ref = messages_table(dd, NS + "schema-kv-separated", decode="schema")
    assert kv.column("key").to_pylist() == ref.column("key").to_pylist() and kv.num_rows == ref.num_rows
    assert main(["sql", str(data), f"SELECT count(*) AS n FROM topic('{NS}schema-int64') WHERE value > 0",
                 "--decode", "schema", "--format", "jsonl"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out) == {"n": 3}


def test_the_mismatched_payload_is_an_error_row(schema_oracle, capsys):
    data = schema_oracle / "data"
    with pk.open_data_dir(data) as dd:
        rows = messages_table(dd, NS + "schema-int64", decode="schema").to_pylist()
    bad = [r for r in rows if r["decode_error"]]
    assert len(bad) == 1 and bad[0]["payload"] == b"\x01\x02\x03" and "INT64" in bad[0]["decode_error"]
    assert bad[0]["schema_version"] is None and len(rows) == 7
    assert main(["messages", str(data), "--topic", "schema-int64", "--decode", "schema", "--format", "jsonl"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["value"] for r in out[:6]] == [0, 1, -1, 2**63 - 1, -(2**63), 1234567890123]
    assert out[6]["value"] is None and out[6]["payload_b64"] == "AQID" and "INT64" in out[6]["decode_error"]


def test_export_decode_schema_writes_each_topics_typed_rows(schema_oracle, tmp_path):
    import pyarrow.parquet as pq
    from pulsarkit.export import export

    data = schema_oracle / "data"
    topics = [NS + "schema-avro", NS + "schema-kv-separated", NS + "schema-local-date"]
    out = tmp_path / "out"
    s = export(str(data), "parquet", str(out), topics=topics, decode="schema", log=lambda m: None)
    assert s.rows == 61 + 12 + 2 and s.issues == []
    with pk.open_data_dir(data) as dd:
        for t in topics:
            expected = messages_table(dd, t, decode="schema").drop_columns(["topic"])
            (d,) = [x for x in out.iterdir() if x.name.startswith("topic=") and x.name.endswith(t.rsplit("/", 1)[1])]
            got = pa.concat_tables([pq.read_table(f) for f in sorted(d.rglob("*.parquet"))])
            assert got.schema.field("value").type == expected.schema.field("value").type
            assert got.select(expected.column_names).to_pylist() == expected.to_pylist(), t
    # the next run has nothing new; a Delta table has one schema: topics of several are refused
    assert export(str(data), "parquet", str(out), topics=topics, decode="schema", log=lambda m: None).rows == 0
    with pytest.raises(pk.PulsarkitError, match="one table of one schema"):
        export(str(data), "delta", str(tmp_path / "d"), topics=topics, decode="schema", log=lambda m: None)
    assert not (tmp_path / "d" / "_delta_log").exists()
    assert main(["export", str(data), "--to", "parquet", str(tmp_path / "cli"), "--decode", "schema",
                 "--topic", "schema-json", "--engine", "local"]) == 0  # fmt: skip
    got = pq.read_table(next((tmp_path / "cli").rglob("*.parquet")))
    assert got.schema.field("value").type.get_field_index("nicknames") >= 0 and got.num_rows == 31


def _spark_plain(v):
    """A Spark row value (``asDict(recursive=True)``) as ``_plain`` gives ours."""
    if isinstance(v, bytearray):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, dt.datetime) and v.tzinfo is None:  # Spark's TimestampType, in the local time zone
        return _plain(v.astimezone(dt.timezone.utc))
    if v == {}:  # an empty map (ours reads back as an empty list of pairs)
        return []
    if isinstance(v, dict):
        return {k: _spark_plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_spark_plain(x) for x in v]
    return _plain(v)


@pytest.mark.parametrize(
    "name", ["schema-avro", "schema-kv-separated", "schema-protobuf-native", "schema-protobuf", "schema-timestamp"]
)
def test_the_spark_source_decodes_as_messages_table(schema_oracle, spark, name):
    data, topic = schema_oracle / "data", NS + name
    r = spark.read.format("pulsarkit").option("decode", "schema").option("topics", json.dumps([topic]))
    rows = (row.asDict(recursive=True) for row in r.load(str(data)).collect())
    got = sorted(rows, key=lambda r: (r["ledger_id"], r["entry_id"], r["batch_index"]))
    with pk.open_data_dir(data) as dd:
        want = messages_table(dd, topic, decode="schema").to_pylist()
    assert [_java_id(r) for r in got] == [_java_id(r) for r in want]
    for g, w in zip(got, want, strict=True):
        for col in ("key", "value", "schema_version", "decode_error"):
            assert _spark_plain(g[col]) == _plain(w[col]), (name, _java_id(w), col)


def test_spark_sql_over_the_data_source_answers_as_pulsarkit_sql(schema_oracle, spark):
    """The same query over a decoded topic, at scale through Spark SQL on ``format("pulsarkit")``
    (``decode=schema``, a temporary view), in place through ``pulsarkit sql`` (DuckDB): the same answer."""
    pytest.importorskip("duckdb", reason="pulsarkit[sql] is installed by the test command")
    from pulsarkit.analysis.sql import query

    data, topic = schema_oracle / "data", NS + "schema-avro"
    df = spark.read.format("pulsarkit").option("decode", "schema").option("topics", json.dumps([topic])).load(str(data))
    df.createOrReplaceTempView("avro_topic")
    select = (
        "SELECT schema_version, count(*) AS n, count(value.score) AS scored, min(entry_id) AS first_entry FROM {} "
        "WHERE value IS NOT NULL GROUP BY schema_version ORDER BY schema_version"
    )
    got = [r.asDict() for r in spark.sql(select.format("avro_topic")).collect()]
    with pk.open_data_dir(data) as dd:
        want = query(dd, select.format(f"topic('{topic}')"), decode="schema").to_pylist()
    assert got == want and len(want) == 2  # the topic's two schema versions
