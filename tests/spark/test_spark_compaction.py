"""Compaction on Spark gives, entry for entry, what the single-process compactor writes."""

from __future__ import annotations

import random

import pulsarkit as pk
import pyarrow as pa
import pytest
from pulsarkit import _native
from pulsarkit.broker.compaction import CompactionOptions
from pulsarkit.spark.compaction import compact, key_report, latest_for_key

T0 = 1_700_000_000_000


def entries(seed, n=400, keys=30):
    rng = random.Random(seed)
    out, i, e = [], 0, 0
    while i < n:
        size = rng.randint(1, 8)
        items = []
        for _ in range(size):
            k = None if rng.random() < 0.05 else f"k{rng.randrange(keys)}"
            items.append({"payload": b"" if rng.random() < 0.1 else b"v%d" % i, **({"key": k} if k else {})})
            i += 1
        codec = rng.choice(["NONE", "LZ4", "ZSTD"])
        if size == 1 and rng.random() < 0.5 and items[0].get("key"):
            md = pk.message_metadata("p", i, T0 + i, partition_key=items[0]["key"])
            data = pk.encode_entry(md, items[0]["payload"])
        else:
            data = pk.encode_batch(pk.message_metadata("p", i, T0 + i, event_time=T0 - i), items, compression=codec)
        out.append((3 + e // 50, e % 50, data))
        e += 1
    return out


def single_process(rows, **kw):
    latest = _native.LatestForKey(kw.pop("event_time_order", False))
    cols = (pa.array([r[2] for r in rows]), pa.array([r[0] for r in rows]), pa.array([r[1] for r in rows]))
    latest.add_entries(*cols)
    return latest, latest.compact_entries(*cols, **kw).to_pylist()


@pytest.mark.parametrize(
    "options", [{}, {"retain_null_key": True}, {"retained_only": True}, {"event_time_order": True}]
)
def test_spark_compaction_equals_the_single_process_compactor(spark, options):
    rows = entries(hash(str(options)) % 1000)
    df = spark.createDataFrame(rows, "ledger_id long, entry_id long, entry binary").repartition(3)
    latest, want = single_process(rows, **options)
    got = [r.asDict() for r in compact(df, CompactionOptions(**options)).collect()]
    assert [(r["ledger_id"], r["entry_id"], bytes(r["raw_message"])) for r in got] == [
        (r["ledger_id"], r["entry_id"], r["raw_message"]) for r in want
    ]
    ours = {r["key"]: (r["ledger_id"], r["entry_id"], r["batch_index"]) for r in latest.retained().to_pylist()}
    theirs = {
        r.key: (r.ledger_id, r.entry_id, r.batch_index)
        for r in latest_for_key(df, options.get("event_time_order", False)).where("payload_size > 0").collect()
    }
    assert theirs == ours


def test_key_report(spark):
    rows = entries(5)
    df = spark.createDataFrame(rows, "ledger_id long, entry_id long, entry binary")
    latest, _ = single_process(rows)
    r = key_report(df)
    assert r["messages"] == latest.messages and r["keyless_messages"] == latest.keyless
    assert r["live_keys"] == len(latest) and r["tombstoned_keys"] == latest.tombstones
    assert 0 < r["reclaimable_bytes"] < r["payload_bytes"]
