"""``pulsarkit.analysis.sql`` on the real Pulsar 4.0.7 standalone data directories of the reader-side oracle
(test_datadir_oracle.py, its cached ``clean`` and ``killed`` directories): what SQL counts is what the real
Java Reader received."""

from __future__ import annotations

import collections
import json

import pytest
from pulsarkit.analysis.sql import query
from pulsarkit.scan.datadir import open_data_dir
from test_datadir_oracle import NS, oracle  # noqa: F401 - oracle is the fixture

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def test_sql_counts_what_the_java_reader_received(oracle):  # noqa: F811
    for kind in ("clean", "killed"):  # killed: the last burst is only in the journal
        received = [json.loads(line) for line in (oracle / kind / "reader.jsonl").read_text().splitlines()]
        by_topic = collections.defaultdict(collections.Counter)
        for e in received:
            by_topic[e["topic"]][e["key"]] += 1
        with open_data_dir(oracle / kind / "data") as dd:
            for topic, keys in by_topic.items():
                (n,) = query(dd, f"SELECT count(*) AS n FROM topic('{topic}')")["n"].to_pylist()
                assert n == sum(keys.values()), (kind, topic)
                per_key = query(dd, f"SELECT key, count(*) AS n FROM topic('{topic}') GROUP BY key").to_pylist()
                assert {r["key"]: r["n"] for r in per_key} == dict(keys), (kind, topic)
            parts = query(dd, f"SELECT partition, count(*) AS n FROM topic('{NS}parts') GROUP BY ALL").to_pylist()
            assert {r["partition"]: r["n"] for r in parts} == {
                p: sum(by_topic[f"{NS}parts-partition-{p}"].values()) for p in range(3)
            }
            assert dd.issues == []
        assert len(received) > 100 and (kind == "clean" or by_topic[NS + "burst"].total() == 30)
