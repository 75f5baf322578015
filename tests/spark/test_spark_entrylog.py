"""The pulsarkit-entrylog Spark data source over a bookie directory written by the embedded store."""

import pulsarkit as pk
import pytest
from pulsarkit.managed_ledger import Store

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def bookie_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    expected = {}
    with Store.open(root, sync=False, log_size_limit=64 * 1024) as store:
        for t, codec in enumerate(pk.COMPRESSION_TYPES):
            ml = store.managed_ledger(f"public/default/persistent/t{t}")
            for i in range(40):
                e = pk.encode_batch(
                    pk.message_metadata(f"p{t}", i * 3, 1000 + i),
                    [b"%d-%d-%d|" % (t, i, j) + bytes(range(256)) * 2 for j in range(3)],
                    codec,
                )
                pos = ml.add_entry(e, num_messages=3)
                expected[(pos.ledger_id, pos.entry_id)] = e
            ml.close()
        store.flush()
    return root / "bookie" / "current", expected


def test_read_entries_one_partition_per_log(spark, bookie_dir):
    from pulsarkit.spark import read_entries

    current, expected = bookie_dir
    df = read_entries(spark, str(current))
    logs = sorted(p.name for p in current.glob("*.log"))
    assert len(logs) > 1 and df.rdd.getNumPartitions() == len(logs)
    rows = df.where("issue IS NULL").select("ledger_id", "entry_id", "digest_ok", "payload").collect()
    got = {(r.ledger_id, r.entry_id): bytes(r.payload) for r in rows}
    assert got == expected
    assert all(r.digest_ok for r in rows)


def test_read_messages_end_to_end(spark, bookie_dir):
    from pulsarkit.spark import read_messages

    current, expected = bookie_dir
    msgs = read_messages(spark, str(current)).collect()
    assert len(msgs) == 3 * len(expected)
    assert all(m.error is None for m in msgs)
    assert sorted(bytes(m.payload) for m in msgs) == sorted(
        m.payload for e in expected.values() for m in pk.Entry.parse(e).messages()
    )


def test_missing_path_is_an_error(spark):
    from pulsarkit.spark import register

    register(spark)
    with pytest.raises(Exception, match="path"):
        spark.read.format("pulsarkit-entrylog").load().collect()
