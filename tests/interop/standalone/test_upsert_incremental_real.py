"""An incremental upsert on a real Pulsar 4.0.7 standalone's directory (the data-directory oracle's, its
compacted topics compacted by the real broker, one of LZ4 batches with tombstones and keyless messages): a
first run up to the middle of the topic, a second one continued from that mark up to the broker's compaction
horizon, reading only the topic's entries after the mark, gives the table of one run to the horizon, which is
what the real readCompacted Reader received (one row per key, same message id and value). The first run's
table is the state at its mark, from the topic's own entries: the compacted view is the state at the horizon
(a run up to an earlier position once took it from the view, missing the keys superseded after it).

The same topics with the ledgers the compaction consumed trimmed (simulated: left out of the managed ledger, as
the broker's retention removes them from the metadata): every row comes from Pulsar's own compacted ledger and the
table is still what the real readCompacted Reader received."""

from __future__ import annotations

import pytest
from helpers import read_export
from pulsarkit.analysis.compaction import compacted_topic, phase_one
from pulsarkit.export.marks import MessageId
from pulsarkit.export.run import export
from pulsarkit.managed_ledger.position import Position
from pulsarkit.scan.datadir import DataDir, open_data_dir
from test_datadir_oracle import COMPACTED_TOPICS, PULSAR_VERSION, PULSAR_VERSIONS, _oracle, _read_compacted

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def _table(to: str, out) -> dict[str, tuple[str, str]]:
    rows = read_export(to, out).to_pylist()
    got = {r["key"]: (f"{r['ledger_id']}:{r['entry_id']}:{r['batch_index']}", r["payload"].hex()) for r in rows}
    assert len(got) == len(rows)  # one row per key
    return got


@pytest.mark.parametrize("to", ["delta", "iceberg"])
def test_a_continued_upsert_equals_the_real_read_compacted_view(tmp_path, to):
    pytest.importorskip({"delta": "deltalake", "iceberg": "pyiceberg"}[to])
    recorded = _oracle(PULSAR_VERSION)
    real = _read_compacted(recorded, "clean")
    data = recorded / "clean" / "data"
    for topic in COMPACTED_TOPICS:
        with open_data_dir(data) as dd:
            h = compacted_topic(dd, topic).horizon
            entries = [p for p, _ in dd.ml_entries(dd.resolve(topic)) if p <= h]
        mid = entries[len(entries) // 2]
        out = tmp_path / to / topic.rsplit("/", 1)[1]
        kw = {"topics": [topic], "mode": "upsert", "log": lambda m: None}
        first = export(str(data), to, str(out), until={topic: MessageId(mid.ledger_id, mid.entry_id)}, **kw)
        assert first.topics[topic].until == tuple(mid)
        with open_data_dir(data) as dd:  # the state at mid: the topic's own entries (the compacted view is at h)
            at_mid = phase_one(dd, topic, up_to=mid).retained().to_pylist()
        assert at_mid and sorted(v[0] for v in _table(to, out).values()) == sorted(
            f"{r['ledger_id']}:{r['entry_id']}:{r['batch_index']}" for r in at_mid
        )
        second = export(str(data), to, str(out), until={topic: MessageId(h.ledger_id, h.entry_id)}, **kw)
        assert second.warnings == [] and second.topics[topic].after == tuple(mid)
        theirs = {}
        for mid_, key, data_hex in real[topic]["messages"]:
            lid, eid, _ = (int(x) for x in mid_.split(":"))
            if Position(lid, eid) <= h and key is not None:
                theirs[key] = (mid_, data_hex)
        assert _table(to, out) == theirs, topic
        # written: exactly the keys whose latest message came after the mark
        assert second.rows == sum(1 for i, _ in theirs.values() if tuple(map(int, i.split(":")[:2])) > tuple(mid))


@pytest.mark.parametrize("version", PULSAR_VERSIONS)
@pytest.mark.parametrize("to", ["parquet", "delta", "iceberg"])
def test_a_topic_trimmed_after_its_compaction_equals_the_real_read_compacted_view(tmp_path, to, version, monkeypatch):
    """Retention trimmed every ledger the broker's compaction consumed (simulated on the real directory: the
    topic's ledgers up to the horizon's left out of its managed ledger, as the broker's trim removes them from the
    metadata; the bookie still holds Pulsar's own compacted ledger): every row is read from that compacted ledger
    (rebatched LZ4 batches with compacted-out placeholders), with the original message ids, and the table equals
    what the real readCompacted Reader received; a rerun with nothing new writes nothing and keeps it (3.0.x's
    compacted ledger also keeps the keyless messages, which are no keys of the table)."""
    pytest.importorskip({"parquet": "pyarrow", "delta": "deltalake", "iceberg": "pyiceberg"}[to])
    recorded = _oracle(version)
    real = _read_compacted(recorded, "clean")
    data = recorded / "clean" / "data"
    horizons: dict[str, Position] = {}
    with open_data_dir(data) as dd:
        for topic in COMPACTED_TOPICS:
            horizons[dd.resolve(topic)] = compacted_topic(dd, topic).horizon
    ml_ledgers = DataDir.ml_ledgers

    def trimmed(self, ml):
        h = horizons.get(ml)
        return [lid for lid in ml_ledgers(self, ml) if h is None or lid > h.ledger_id]

    monkeypatch.setattr(DataDir, "ml_ledgers", trimmed)
    for topic in COMPACTED_TOPICS:
        out = tmp_path / to / topic.rsplit("/", 1)[1]
        kw = {"topics": [topic], "mode": "upsert", "log": lambda m: None}
        first = export(str(data), to, str(out), **kw)
        h = next(h for ml, h in horizons.items() if topic.endswith(ml.rsplit("/", 1)[1]))
        assert first.topics[topic].until == tuple(h) and not [w for w in first.warnings if "not read" in w]
        theirs = {}
        for mid_, key, data_hex in real[topic]["messages"]:
            lid, eid, _ = (int(x) for x in mid_.split(":"))
            if Position(lid, eid) <= h and key is not None:
                theirs[key] = (mid_, data_hex)
        assert theirs and _table(to, out) == theirs, topic
        again = export(str(data), to, str(out), **kw)
        assert again.rows == 0 and again.warnings == [] and _table(to, out) == theirs
