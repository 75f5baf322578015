"""pulsarkit.spark on a local Spark session agrees, row for row, with the local codec and bulk kernels."""

import os
import subprocess
import sys

import pulsarkit as pk
import pyarrow as pa
import pytest

pytestmark = pytest.mark.spark

KEY = ("ledger_id", "entry_id")
N_COPIES = 3  # every entry appears once per ledger, so each Spark partition sees several Arrow batches


def _entries():
    """(name, bytes or None): every codec, batches and single messages, PIP-70 headers, bad rows."""
    md = pk.message_metadata
    single = pk.encode_entry(
        md("p-single", 7, 1_700_000_000_000, partition_key="pk", event_time=42, properties={"a": "1"}),
        b"hello",
    )
    lz4 = pk.encode_batch(
        md("p-lz4", 100, 1_700_000_000_001),
        [
            {"payload": b"m0" * 50, "key": "k0", "properties": {"x": "y"}},
            {"payload": b"m1", "ordering_key": b"\x00ok"},
            b"m2",
        ],
        "LZ4",
    )
    zlib = pk.encode_batch(
        md("p-zlib", 200, 1_700_000_000_002),
        [b"z" * 300, {"payload": b"", "null_value": True, "key": "gone"}],
        "ZLIB",
    )
    zstd = pk.encode_batch(
        md("p-zstd", 2**62 + 1, 1_700_000_000_003),
        [{"payload": b"big-seq", "event_time": 9}, b"second"],
        "ZSTD",
    )
    snappy = pk.encode_batch(
        md("p-snappy", 300, 1_700_000_000_004),
        [
            {"payload": b"kept"},
            {"payload": b"compacted", "compacted_out": True},
            {"payload": b"s" * 70, "key": "ks"},
        ],
        "SNAPPY",
    )
    nocrc = pk.encode_entry(
        md("p-nocrc", 400, 1_700_000_000_005), b"no checksum " * 10, checksum=False, compression="ZSTD"
    )
    bad_crc = bytearray(pk.encode_entry(md("p-bad", 500, 1_700_000_000_006), b"flipped"))
    bad_crc[-1] ^= 0x01
    return [
        ("single", single),
        ("lz4", lz4),
        ("zlib_bem", pk.add_broker_entry_metadata(zlib, broker_timestamp=1_700_000_000_100, index=41)),
        ("zstd_bem", pk.add_broker_entry_metadata(zstd, broker_timestamp=1_700_000_000_200, index=2**53 + 1)),
        ("snappy_bem_index_only", pk.add_broker_entry_metadata(snappy, index=99)),
        ("nocrc_bem_time_only", pk.add_broker_entry_metadata(nocrc, broker_timestamp=1_700_000_000_300)),
        ("bad_crc", bytes(bad_crc)),
        ("truncated_bem", b"\x0e\x02\x00"),
        ("garbage", b"\x00\x00\x00\x05abc"),
        ("empty", b""),
        ("null", None),
    ]


ENTRIES = _entries()
GOOD = {"single", "lz4", "zlib_bem", "zstd_bem", "snappy_bem_index_only", "nocrc_bem_time_only"}


def _table():
    rows = [
        (ledger, entry_id, name, raw)
        for ledger in range(10, 10 + N_COPIES)
        for entry_id, (name, raw) in enumerate(ENTRIES)
    ]
    cols = list(zip(*rows))
    return pa.table(
        {
            "ledger_id": pa.array(cols[0], pa.int64()),
            "entry_id": pa.array(cols[1], pa.int64()),
            "name": pa.array(cols[2], pa.string()),
            "entry": pa.array(cols[3], pa.binary()),
        }
    )


TABLE = _table()
RAW = TABLE.column("entry").to_pylist()


def norm(v):
    """Spark rows and Arrow pylists in one shape: bytes for binary, dicts for maps and structs."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if hasattr(v, "asDict"):
        return {k: norm(x) for k, x in v.asDict().items()}
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, list) and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return {k: norm(x) for k, x in v}  # Arrow map as pylist
    if isinstance(v, list):
        return [norm(x) for x in v]
    return v


def collect_sorted(df, extra=()):
    return collect_sorted_local([norm(r) for r in df.collect()], extra)


def collect_sorted_local(rows, extra=()):
    return sorted(rows, key=lambda r: tuple(-2 if r.get(k) is None else r[k] for k in KEY + tuple(extra)))


def local_rows(kernel, **kw):
    """The kernel run locally over the whole column, each row tagged with its input row's columns."""
    out = norm(getattr(pk.bulk, kernel)(TABLE.column("entry").combine_chunks(), **kw).to_pylist())
    inputs = norm(TABLE.to_pylist())
    return inputs, out


@pytest.fixture(scope="module")
def df(spark):
    frame = spark.createDataFrame(TABLE).repartition(2).cache()
    assert frame.count() == TABLE.num_rows
    yield frame
    frame.unpersist()


def test_sample_covers_every_codec_and_bad_rows():
    parsed = {name: pk.Entry.parse(raw) for name, raw in ENTRIES if name in GOOD}
    assert {e.compression for e in parsed.values()} == {"NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"}
    assert sum(e.is_batch for e in parsed.values()) == 4
    for name, raw in ENTRIES:
        if raw is not None and name not in GOOD:
            with pytest.raises(pk.PulsarkitError):
                pk.Entry.parse(raw).messages()


def test_import_without_pyspark():
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "import pulsarkit.spark as s\n"
        "from pulsarkit.spark import udfs\n"
        "assert callable(s.explode_messages) and callable(udfs.publish_time)\n"
        "try:\n    udfs.publish_time('entry')\nexcept ImportError:\n    print('lazy')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=os.environ.copy()
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "lazy"


@pytest.mark.parametrize("verify", [False, True])
def test_decode_metadata(df, verify):
    from pulsarkit.spark import decode_metadata

    got = collect_sorted(decode_metadata(df, "entry", verify_checksum=verify))
    inputs, out = local_rows("decode_metadata", verify_checksum=verify)
    expected = [{**i, **o} for i, o in zip(inputs, out)]
    assert got == collect_sorted_local(expected)
    assert len(got) == TABLE.num_rows
    by_name = {r["name"]: r for r in got if r["ledger_id"] == 10}
    for name in GOOD:
        e = pk.Entry.parse(by_name[name]["entry"])
        row = by_name[name]
        assert row["error"] is None
        assert (row["producer_name"], row["sequence_id"], row["publish_time"]) == (
            e.metadata.producer_name,
            e.metadata.sequence_id,
            e.metadata.publish_time,
        )
        assert (row["num_messages"], row["is_batch"], row["compression"]) == (
            e.num_messages,
            e.is_batch,
            e.compression,
        )
        bem = e.broker_entry_metadata
        assert (row["broker_timestamp"], row["index"]) == ((bem.broker_timestamp, bem.index) if bem else (None, None))
        assert row["checksum_ok"] == (True if verify and e.checksum is not None else None)
    assert by_name["zstd_bem"]["sequence_id"] == (2**62 + 1) and by_name["zstd_bem"]["index"] == (2**53 + 1)
    assert by_name["bad_crc"]["checksum_ok"] is (False if verify else None)
    for name in ("truncated_bem", "garbage", "empty"):
        assert "offset" in by_name[name]["error"] and by_name[name]["producer_name"] is None
    assert by_name["null"]["error"] is None and by_name["null"]["producer_name"] is None


@pytest.mark.parametrize("kernel", ["verify_checksums", "peek_broker_entry_metadata"])
def test_appending_transforms(df, kernel):
    import pulsarkit.spark as pks

    got = collect_sorted(getattr(pks, kernel)(df))
    inputs, out = local_rows(kernel)
    assert got == collect_sorted_local([{**i, **o} for i, o in zip(inputs, out)])
    assert any(r["error"] for r in got) and len(got) == TABLE.num_rows


def test_strip_broker_entry_metadata(df):
    from pulsarkit.spark import strip_broker_entry_metadata

    got = collect_sorted(strip_broker_entry_metadata(df))
    inputs, out = local_rows("strip_broker_entry_metadata")
    assert got == collect_sorted_local([{**i, **o} for i, o in zip(inputs, out)])
    for row in got:
        raw = dict(ENTRIES)[row["name"]]
        if row["name"] in GOOD:
            assert row["entry"] == pk.strip_broker_entry_metadata(raw) and row["error"] is None
    truncated = [r for r in got if r["name"] == "truncated_bem"]
    assert all(r["entry"] is None and "offset" in r["error"] for r in truncated)

    kept = collect_sorted(strip_broker_entry_metadata(df, output_col="stripped", error_col="strip_error"))
    assert [r["entry"] for r in kept] == [dict(ENTRIES)[r["name"]] for r in kept]
    assert [r["stripped"] for r in kept] == [r["entry"] for r in got]
    assert [r["strip_error"] for r in kept] == [r["error"] for r in got]


def expected_messages(include_compacted_out=False):
    """What a consumer would get, per input row, from the single-entry API."""
    rows = []
    for row in TABLE.to_pylist():
        raw = row["entry"]
        ids = {k: row[k] for k in KEY}
        if raw is None:
            rows.append({**ids, "payload": None, "error": None})
            continue
        try:
            msgs = pk.Entry.parse(raw).messages(include_compacted_out=include_compacted_out)
        except pk.PulsarkitError:
            rows.append({**ids, "payload": None, "error": "set"})
            continue
        for m in msgs:
            rows.append(
                {
                    **ids,
                    "batch_index": m.batch_index,
                    "payload": m.payload,
                    "key": m.key,
                    "ordering_key": m.ordering_key,
                    "properties": m.properties,
                    "event_time": m.event_time,
                    "publish_time": m.publish_time,
                    "producer_name": m.producer_name,
                    "sequence_id": m.sequence_id,
                    "null_value": m.null_value,
                    "compacted_out": m.compacted_out,
                    "broker_timestamp": m.broker_timestamp,
                    "index": m.index,
                    "error": None,
                }
            )
    return rows


@pytest.mark.parametrize("include_compacted_out", [False, True])
def test_explode_messages_matches_entry_parse(df, include_compacted_out):
    from pulsarkit.spark import explode_messages

    out = explode_messages(df, keep=list(KEY), include_compacted_out=include_compacted_out)
    assert out.columns[:2] == list(KEY) and "entry_index" not in out.columns and "name" not in out.columns
    got = collect_sorted(out, extra=("batch_index",))
    expected = collect_sorted_local(expected_messages(include_compacted_out), extra=("batch_index",))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if e["error"] is not None:
            assert g["error"] and g["payload"] is None and g["batch_index"] is None, g
            continue
        assert {k: g[k] for k in e} == e
    n_snappy = len([g for g in got if g["ledger_id"] == 10 and g["producer_name"] == "p-snappy"])
    assert n_snappy == (3 if include_compacted_out else 2)

    # Row for row the same as the local kernel (entry_index becomes the kept ids).
    local = pk.bulk.explode_messages(
        TABLE.column("entry").combine_chunks(), include_compacted_out=include_compacted_out
    )
    ids = TABLE.select(list(KEY)).take(local.column("entry_index"))
    local_rows_ = [
        {**i, **{k: v for k, v in m.items() if k != "entry_index"}}
        for i, m in zip(ids.to_pylist(), norm(local.to_pylist()))
    ]
    assert got == collect_sorted_local(local_rows_, extra=("batch_index",))


def test_explode_messages_default_keep_prefix_and_checksum(df):
    from pulsarkit.spark import explode_messages

    out = explode_messages(df, prefix="m_", verify_checksum=False)
    assert out.columns[:3] == ["ledger_id", "entry_id", "name"] and "m_payload" in out.columns
    rows = [norm(r) for r in out.where("name = 'bad_crc'").collect()]
    # Without verification the readable entry is decoded despite its bad checksum.
    assert len(rows) == N_COPIES
    assert all(r["m_payload"] == b"flippee" and r["m_error"] is None for r in rows)


def test_driver_side_checks(df):
    import pulsarkit.spark as pks

    with pytest.raises(ValueError, match="no column"):
        pks.decode_metadata(df, "nope")
    with pytest.raises(TypeError, match="binary"):
        pks.decode_metadata(df, "name")
    with pytest.raises(ValueError, match="repeat"):
        pks.decode_metadata(df.withColumnRenamed("name", "error"))
    with pytest.raises(ValueError, match="unknown columns"):
        pks.explode_messages(df, keep=["ledger_id", "missing"])
    renamed = pks.decode_metadata(df.withColumnRenamed("name", "error"), prefix="md_")
    assert "error" in renamed.columns and "md_error" in renamed.columns


@pytest.mark.parametrize("flavour", ["arrow", "pandas"])
def test_column_udfs(df, flavour):
    from pulsarkit.spark import udfs
    from pyspark.sql import functions as F

    if flavour == "arrow" and not udfs.arrow_udf_available():
        pytest.skip("arrow_udf needs Spark >= 4.1")
    out = df.select(
        *KEY,
        "name",
        udfs.broker_timestamp("entry", flavour).alias("broker_timestamp"),
        udfs.broker_index(F.col("entry"), flavour).alias("broker_index"),
        udfs.strip_bem("entry", flavour).alias("stripped"),
        udfs.checksum_ok("entry", flavour).alias("checksum_ok"),
        udfs.publish_time("entry", flavour).alias("publish_time"),
        udfs.producer_name("entry", flavour).alias("producer_name"),
        udfs.sequence_id("entry", flavour).alias("sequence_id"),
        udfs.num_messages("entry", flavour).alias("num_messages"),
        udfs.entry_error("entry", flavour).alias("entry_error"),
        udfs.entry_metadata("entry", flavour, verify_checksum=True).alias("md"),
    )
    got = collect_sorted(out)
    assert len(got) == TABLE.num_rows
    arr = TABLE.column("entry").combine_chunks()
    peek = pk.bulk.peek_broker_entry_metadata(arr).to_pydict()
    strip = pk.bulk.strip_broker_entry_metadata(arr).to_pydict()
    ver = pk.bulk.verify_checksums(arr).to_pydict()
    dec = pk.bulk.decode_metadata(arr).to_pydict()
    dec_v = norm(pk.bulk.decode_metadata(arr, verify_checksum=True).to_pylist())
    expected = []
    for i, row in enumerate(TABLE.select([*KEY, "name"]).to_pylist()):
        expected.append(
            {
                **row,
                "broker_timestamp": peek["broker_timestamp"][i],
                "broker_index": peek["index"][i],
                "stripped": strip["entry"][i],
                "checksum_ok": ver["checksum_ok"][i],
                "publish_time": dec["publish_time"][i],
                "producer_name": dec["producer_name"][i],
                "sequence_id": dec["sequence_id"][i],
                "num_messages": dec["num_messages"][i],
                "entry_error": dec["error"][i],
                "md": dec_v[i],
            }
        )
    assert got == collect_sorted_local(expected)
    zstd = next(r for r in got if r["name"] == "zstd_bem")
    assert zstd["sequence_id"] == (2**62 + 1) and zstd["broker_index"] == (2**53 + 1)  # exact, also through pandas
    assert next(r for r in got if r["name"] == "bad_crc")["checksum_ok"] is False
    assert "offset" in next(r for r in got if r["name"] == "garbage")["entry_error"]


def test_udf_flavour_validation():
    from pulsarkit.spark import udfs

    with pytest.raises(ValueError, match="flavour"):
        udfs.make_udf("x", "decode_metadata", "error", "rows")
    with pytest.raises(ValueError, match="unknown metadata field"):
        udfs.metadata_field("entry", "nope")


def test_auto_flavour_falls_back_to_pandas_udf(spark, monkeypatch):
    from pulsarkit.spark import udfs
    from pyspark.rdd import PythonEvalType

    build = udfs.make_udf.__wrapped__  # bypass the cache: the choice depends on the patched probe
    auto = build("publish_time", "decode_metadata", "publish_time", "auto", verify_checksum=False)
    if udfs.arrow_udf_available():
        assert auto.evalType == PythonEvalType.SQL_SCALAR_ARROW_UDF
    monkeypatch.setattr(udfs, "arrow_udf_available", lambda: False)
    fallback = build("publish_time", "decode_metadata", "publish_time", "auto", verify_checksum=False)
    assert fallback.evalType == PythonEvalType.SQL_SCALAR_PANDAS_UDF
