"""The export's hand-off with a real client (pulsar-client, the C++ client underneath): messages a real
producer published (batched) through the fake broker, exported broker-less up to a message id inside a
batch (or at an entry's end), then a real Reader on a broker restarted on a copy of the same directory,
started at the summary's ``next``, inclusive (the documented hand-off), and, for a cut batch, exclusively
at ``last``: the union is every message published, none twice. (After a whole batch, an exclusive start at
the entry-level ``last`` would read the batch again, on a real broker as on this one:
``standalone/test_handoff_real.py`` runs the documented example against a real standalone.)

The fake broker indexes the entries it stores for dispatch; on a restart the test indexes the entries the
directory already holds, as the C++ placeholder test of the standalone oracle does."""

from __future__ import annotations

import json
import logging
import shutil

import pyarrow.dataset as ds
import pytest
from conftest import require_module
from pulsarkit.cli import main
from pulsarkit.export.marks import MessageId
from pulsarkit.managed_ledger.position import Position
from pulsarkit.testing.fake_broker import FakeBroker

pulsar = require_module("pulsar", "pip install pulsar-client")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]
TOPIC = "persistent://public/default/handoff"
_log = logging.getLogger("pulsarkit.tests.pulsar-client")
_log.setLevel(logging.WARNING)


def _client(b: FakeBroker):
    return pulsar.Client(b.service_url, operation_timeout_seconds=10, connection_timeout_ms=5000, logger=_log)


@pytest.mark.parametrize("inside_batch", [True, False])
def test_a_real_reader_started_at_next_gets_exactly_what_the_export_left(tmp_path, capsys, inside_batch):
    data = tmp_path / "data"
    b = FakeBroker(data_dir=str(data)).start()
    try:
        c = _client(b)
        p = c.create_producer(TOPIC, batching_enabled=True, batching_max_messages=4, batching_max_publish_delay_ms=50)
        sent = [b"m%02d" % i for i in range(12)]
        for v in sent:
            p.send_async(v, None)
        p.flush()
        p.close()
        c.close()
    finally:
        b.stop()
    assert b.errors == [], b.errors

    # broker-less: the messages, and an --until in the middle of the second batch (or at its end)
    assert main(["messages", str(data), "--topic", TOPIC, "--format", "jsonl"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    ids = [(r["message_id"]["ledger_id"], r["message_id"]["entry_id"], r["message_id"]["batch_index"]) for r in rows]
    entries = sorted({i[:2] for i in ids})
    assert len(entries) >= 2 and all(i[2] >= 0 for i in ids), ids  # batched
    second = [i for i in ids if i[:2] == entries[1]]
    until = MessageId(*second[1]) if inside_batch else MessageId(*entries[1])
    out = tmp_path / "out"
    assert main(["export", str(data), "--to", "parquet", str(out), "--until", f"{TOPIC}={until}", "--json"]) == 0
    handoff = json.loads(capsys.readouterr().out)["topics"][TOPIC]
    nxt, last = MessageId.parse(handoff["next"]), MessageId.parse(handoff["last"])
    assert last == until
    exported = ds.dataset(out, format="parquet", partitioning="hive").to_table().column("payload").to_pylist()

    starts = [(nxt, True)] + ([(last, False)] if inside_batch else [])
    for n, (mid, inclusive) in enumerate(starts):
        copy = tmp_path / f"copy-{n}"
        shutil.copytree(data, copy)
        b = FakeBroker(data_dir=str(copy)).start()
        try:
            t = b._topic(TOPIC)
            for pos, _ in t.persistent.ml.read(Position(0, 0), 1000):
                b._stored(t, pos)
            c = _client(b)
            start = pulsar.MessageId(-1, mid.ledger_id, mid.entry_id, mid.batch_index)
            r = c.create_reader(TOPIC, start, start_message_id_inclusive=inclusive)
            rest = []
            while r.has_message_available():
                rest.append(r.read_next(5000).data())
            r.close()
            c.close()
        finally:
            b.stop()
        assert b.errors == [], b.errors
        assert exported and rest
        assert sorted(exported + rest) == sent, (mid, inclusive)  # no gap, no duplicate
