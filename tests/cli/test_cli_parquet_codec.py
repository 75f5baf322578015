"""``messages``/``backlog --format parquet`` choose the payload's codec on a single topic's first rows
(``scan.schema.parquet_options``): uncompressed when Snappy cannot shrink them, Snappy otherwise and for a file
of several topics (one topic's payloads say nothing of another's); empty first batches are looked past."""

from __future__ import annotations

import argparse
import random

import pulsarkit as pk
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datadir_fixtures import _md
from pulsarkit.cli import main
from pulsarkit.cli.datadir import _print_records
from pulsarkit.scan.schema import arrow_schema, message_fields

RANDOM = "public/default/persistent/random"
JSON = "public/default/persistent/json"


@pytest.fixture(scope="module")
def datadir(tmp_path_factory):
    root = tmp_path_factory.mktemp("codec")
    rng = random.Random(3)
    store = pk.Store.open(root, sync=False)
    order = b'{"order": %d, "customer": "alice", "items": ["book", "pen"]}'
    for name, payload in ((RANDOM, lambda i: rng.randbytes(1024)), (JSON, lambda i: order % i * 8)):
        ml = store.managed_ledger(name, pk.ManagedLedgerConfig())
        for i in range(40):
            ml.add_entry(pk.encode_entry(_md(i), payload(i)))
        ml.flush()
    store.close()
    return root


def _payload_codec(path) -> str:
    rg = pq.ParquetFile(path).metadata.row_group(0)
    codecs = {rg.column(i).path_in_schema: rg.column(i).compression for i in range(rg.num_columns)}
    assert {c for n, c in codecs.items() if n != "payload"} == {"SNAPPY"}
    return codecs["payload"]


@pytest.mark.parametrize(
    ("topics", "codec"),
    [(["random"], "UNCOMPRESSED"), (["json"], "SNAPPY"), (["random", "json"], "SNAPPY"), ([], "SNAPPY")],
)
def test_the_payload_codec_of_messages(datadir, tmp_path, topics, codec):
    out = tmp_path / "m.parquet"
    argv = ["messages", str(datadir), "--format", "parquet", "-o", str(out), "--no-progress"]
    assert main(argv + [a for t in topics for a in ("--topic", t)]) == 0
    assert _payload_codec(out) == codec
    assert pq.read_table(out).num_rows == 40 * max(len(topics), 1) * (2 if not topics else 1)


def test_empty_first_batches_are_looked_past(tmp_path):
    schema = arrow_schema(message_fields())
    rng = random.Random(5)
    rows = pa.RecordBatch.from_pylist(
        [{"topic": "t", "partition": -1, "ledger_id": 1, "entry_id": i, "batch_index": -1,
          "payload": rng.randbytes(512), "publish_time": 1, "sequence_id": i, "null_value": False,
          "encrypted": False} for i in range(64)],
        schema=schema,
    )  # fmt: skip
    out = tmp_path / "b.parquet"
    args = argparse.Namespace(format="parquet", dest=str(out), progress=False)
    assert _print_records(iter([rows.slice(0, 0), rows.slice(0, 0), rows]), args, 64, one_topic=True) == 64
    assert _payload_codec(out) == "UNCOMPRESSED"
    assert pq.read_table(out).num_rows == 64
