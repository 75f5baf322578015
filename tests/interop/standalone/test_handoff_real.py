"""The backfill's hand-off against a real Pulsar 4.0.7 standalone: ``docs/handoff.md``'s two blocks, run as
they are written. The data is the data-directory oracle's (``test_datadir_oracle.py``: written by the real Java
client, the standalone stopped): on a copy of it, block 1 exports up to a message id per topic and reads the
marks; then the real broker is started on that same copy, new messages are published, and block 2's Python
Reader (the C++ client) starts at each topic's ``next``, inclusive; the Java client's Reader from the same
positions gets the same messages. For a topic of batches cut inside a batch and at an entry's end, a topic of
single messages, and each partition of a partitioned topic (one backfilled to its end): the exported rows and
the live messages are the whole topic as the Java Reader received it before (by message id and payload)
followed by the new messages, with no gap and nothing twice. A Reader started exclusively at ``last`` instead
gets the same, except after a whole batch, which it reads again (why the hand-off is ``next``). The cached
oracle is never touched; about a minute once the oracle is built."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from conftest import require_module
from pulsarkit.export.handoff import last_exported
from pulsarkit.export.marks import MessageId
from pulsarkit.export.run import committed_marks
from test_datadir_oracle import NS, PULSAR_VERSION, Standalone, _copy, _lib, _oracle, _tool

pulsar = require_module("pulsar", "pip install pulsar-client")

pytestmark = [pytest.mark.interop, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "handoff.md"
JAVA_READER = Path(__file__).resolve().parent / "handoff_reader" / "HandoffRead.java"
_log = logging.getLogger("pulsarkit.tests.pulsar-client")
_log.setLevel(logging.WARNING)

#: topic -> which message the backfill stops at: (index of the entry, batch index or -1 for the whole entry);
#: a topic not here is backfilled to its end
CUTS = {
    NS + "codec-lz4": (1, 1),  # inside the second batch (batches of 5): the batch is cut
    NS + "codec-none": (1, -1),  # the second batch whole: the hand-off is at an entry boundary
    NS + "compact": (4, -1),  # single messages
    NS + "parts-partition-0": (0, -1),  # the partitions of a partitioned topic, each with its own hand-off
    NS + "parts-partition-2": (1, -1),
}
TOPICS = [*CUTS, NS + "parts-partition-1"]
NEW = 3  # messages published to each topic once the broker runs again


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def _whole(oracle: Path) -> dict[str, list[tuple[tuple[int, int, int], bytes]]]:
    """Every message of each topic as the real Java Reader got it from the oracle's broker: (id, payload)."""
    out: dict[str, list] = {t: [] for t in TOPICS}
    for line in (oracle / "clean" / "reader.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["topic"] in out:
            ledger, entry, _partition, *batch = (int(x) for x in r["id"].split(":"))
            out[r["topic"]].append(
                ((ledger, entry, batch[0] if batch else -1), _bytes(r["data"] and bytes.fromhex(r["data"])))
            )
    return out


def _bytes(payload: bytes | None) -> bytes:
    """A payload as every source can give it: the Python client reads a null value (a tombstone) as b''."""
    return payload or b""


def _partition(topic: str) -> int:
    return int(topic.rsplit("-partition-", 1)[1]) if "-partition-" in topic else -1


def _retried(step, attempts: int = 4):
    """``step`` again when the broker fails it for a while: a 4.0.7 broker restarted on a loaded machine can
    time out recovering a topic's transaction buffer (as ``datadir_oracle/Dump.java`` retries too)."""
    for attempt in range(1, attempts + 1):
        try:
            return step()
        except pulsar.PulsarException as e:
            if attempt == attempts:
                raise
            print(f"retry {attempt}: {e}")
            time.sleep(5)


def _py_id(m) -> tuple[int, int, int]:
    i = m.message_id()
    return (i.ledger_id(), i.entry_id(), i.batch_index())


def test_the_documented_handoff_to_the_real_client_loses_and_doubles_nothing(tmp_path):
    oracle = _oracle(PULSAR_VERSION)  # the data-directory oracle's cached directories, built once
    whole = _whole(oracle)
    assert all(whole.values()) and len(whole[NS + "codec-lz4"]) >= 10
    until = {}
    for t, (nth, batch) in CUTS.items():
        entries = sorted({i[:2] for i, _ in whole[t]})
        until[t] = str(MessageId(*entries[nth], batch))
        if batch >= 0:  # the cut is inside a real batch
            assert sum(1 for i, _ in whole[t] if i[:2] == entries[nth]) > batch + 1
    work = tmp_path / "work"
    work.mkdir()
    _copy(oracle / "clean" / "data", work / "data", drop_ephemeral=True)  # the cached oracle stays as it is
    out = tmp_path / "backfill"
    block1, block2 = _blocks()

    # 1. the broker is stopped: the documented backfill and its hand-off positions
    scope = {"DATA": str(work / "data"), "OUT": str(out), "TOPICS": TOPICS, "UNTIL": until}
    exec(block1, scope)  # noqa: S102 - the documented example itself
    handoff = scope["handoff"]
    assert set(handoff) == set(TOPICS)
    assert handoff[NS + "codec-lz4"].batch_index == CUTS[NS + "codec-lz4"][1] + 1
    assert all(n.batch_index == -1 for t, n in handoff.items() if t != NS + "codec-lz4")
    _, marks = committed_marks(str(out))
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    exported = {t: [] for t in TOPICS}
    for r in table.select(["topic", "ledger_id", "entry_id", "batch_index", "payload"]).to_pylist():
        exported[r["topic"]].append(((r["ledger_id"], r["entry_id"], r["batch_index"]), _bytes(r["payload"])))

    # 2. the real broker on the same directory; a live producer goes on; the documented readers take over
    lib = _lib(PULSAR_VERSION)
    s = Standalone(lib, work, PULSAR_VERSION)
    try:
        client = pulsar.Client(s.url, operation_timeout_seconds=60, logger=_log)
        new: dict[str, list] = {}
        for t in TOPICS:
            p = client.create_producer(t, batching_enabled=False)
            new[t] = []
            for i in range(NEW):
                payload = f"after-restart-{i}".encode()
                mid = p.send(payload)
                new[t].append(((mid.ledger_id(), mid.entry_id(), mid.batch_index()), payload))
            p.close()
        scope.update(SERVICE_URL=s.url)
        _retried(lambda: exec(block2, scope))  # noqa: S102
        live = {t: [(_py_id(m), m.data()) for m in ms] for t, ms in scope["live"].items()}

        # the Python Reader's default, exclusive, at the last message backfilled: the same messages
        def read_exclusive(t: str, last: MessageId) -> list:
            r = client.create_reader(t, pulsar.MessageId(_partition(t), *last))
            got = []
            while r.has_message_available():
                m = r.read_next(60_000)
                got.append((_py_id(m), m.data()))
            r.close()
            return got

        exclusive = {
            t: _retried(lambda: read_exclusive(t, last_exported(marks.marks[t], n))) for t, n in handoff.items()
        }
        client.close()

        # the Java client's Reader at the same positions, inclusive
        args = [x for t, n in handoff.items() for x in (t, *map(str, n), str(_partition(t)))]
        r = subprocess.run(
            [_tool("java"), "-cp", f"{lib}/*", str(JAVA_READER), s.url, *args],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        java = {t: [] for t in TOPICS}
        for line in r.stdout.splitlines():
            if line.startswith("REC "):
                _, t, mid, data = (line.split(" ") + [""])[:4]
                java[t].append((tuple(int(x) for x in mid.split(":")), bytes.fromhex(data)))
    finally:
        s.stop()

    for t in TOPICS:
        want = whole[t] + new[t]
        assert exported[t] and live[t], t
        # the backfill is exactly the topic up to the cut, the live reader exactly the rest: no gap, no duplicate
        assert sorted(exported[t]) == want[: len(exported[t])], t
        assert live[t] == want[len(exported[t]) :], t
        if handoff[t].batch_index < 0 and marks.marks[t] == exported[t][-1][0][:2] and exported[t][-1][0][2] >= 0:
            # ``last`` names a whole batch (entry level): the broker starts a Reader at its entry and the
            # client drops only the batch indexes up to -1, so an exclusive start there reads the batch again;
            # this is why the hand-off is ``next``, inclusive
            again = [m for m in exported[t] if m[0][:2] == marks.marks[t]]
            assert exclusive[t] == again + live[t], t
        else:
            assert exclusive[t] == live[t], t
        assert java[t] == live[t], t
    assert len(live[NS + "parts-partition-1"]) == NEW  # backfilled to its end: only what came since
