"""Message rows are written to Parquet without a dictionary for the payload and the per-message ids
(scan.schema.parquet_options), with one for the rest, by `messages --format parquet` and the export."""

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pulsarkit.export.staging import StagingWriter
from pulsarkit.scan.schema import (
    DELTA_ENCODED,
    NO_DICTIONARY,
    RowGroups,
    _leaf_columns,
    arrow_schema,
    message_fields,
    parquet_options,
)


def _staged(tmp_path, payload, n: int) -> tuple[list[dict], pa.RecordBatch, object]:
    """``n`` message rows (``payload(i)``) staged as the export stages them: the rows, their batch, the file."""
    rows = [
        {"topic": "persistent://public/default/t", "partition": -1, "ledger_id": 7, "entry_id": i, "batch_index": -1,
         "payload": payload(i), "publish_time": 1_700_000_000_000, "sequence_id": i, "broker_index": i,
         "producer_name": "p", "null_value": False, "encrypted": False}
        for i in range(n)
    ]  # fmt: skip
    b = pa.RecordBatch.from_pylist(rows, schema=arrow_schema(message_fields()))
    w = StagingWriter(tmp_path)
    w.write(b)
    w.close()
    (f,) = tmp_path.rglob("*.parquet")
    return rows, b, f


def test_staged_files_have_no_dictionary_for_payload_and_ids(tmp_path):
    rows, _, f = _staged(tmp_path, lambda i: bytes([i % 251]) * 20, 300)
    rg = pq.ParquetFile(f).metadata.row_group(0)
    encodings = {rg.column(i).path_in_schema: rg.column(i).encodings for i in range(rg.num_columns)}
    for name in NO_DICTIONARY:
        assert not any("DICT" in e for e in encodings[name]), (name, encodings[name])
    assert any("DICT" in e for e in encodings["producer_name"])
    for name in DELTA_ENCODED:
        assert "DELTA_BINARY_PACKED" in encodings[name], (name, encodings[name])
    stats = {rg.column(i).path_in_schema: rg.column(i).is_stats_set for i in range(rg.num_columns)}
    assert not stats["payload"] and stats["entry_id"] and stats["publish_time"]
    assert rg.column(list(encodings).index("payload")).compression == "SNAPPY"  # it compresses: Snappy kept
    assert pq.read_table(f).column("payload").to_pylist() == [r["payload"] for r in rows]


def _codecs(f) -> dict[str, str]:
    rg = pq.ParquetFile(f).metadata.row_group(0)
    return {rg.column(i).path_in_schema: rg.column(i).compression for i in range(rg.num_columns)}


@pytest.mark.parametrize("random_payloads", [True, False])
def test_the_payload_is_written_uncompressed_only_when_snappy_cannot_shrink_it(tmp_path, random_payloads):
    rng = random.Random(7)
    payload = (
        (lambda i: rng.randbytes(700))
        if random_payloads
        else (lambda i: b'{"order": %d, "customer": "alice", "items": ["book", "pen"]}' % i)
    )
    rows, b, f = _staged(tmp_path, payload, 2000)
    codecs = _codecs(f)
    assert codecs.pop("payload") == ("UNCOMPRESSED" if random_payloads else "SNAPPY")
    assert set(codecs.values()) == {"SNAPPY"}
    assert pq.read_table(f).column("payload").to_pylist() == [r["payload"] for r in rows]
    # the same decision from a slice of the rows (an offset into the payload buffer), or none: Snappy
    opts = parquet_options(b.schema, b.slice(1500))
    assert ("compression" in opts) == random_payloads
    assert "compression" not in parquet_options(b.schema)


def _batch(topic: str, first: int, n: int, day: int = 0) -> pa.RecordBatch:
    rows = [
        {"topic": topic, "partition": -1, "ledger_id": 7, "entry_id": i, "batch_index": -1,
         "payload": bytes([i % 251]) * 1000, "publish_time": 1_700_000_000_000 + day * 86_400_000,
         "sequence_id": i, "broker_index": i, "producer_name": "p", "null_value": False, "encrypted": False}
        for i in range(first, first + n)
    ]  # fmt: skip
    return pa.RecordBatch.from_pylist(rows, schema=arrow_schema(message_fields()))


def test_rows_are_gathered_into_row_groups_of_about_row_group_bytes(tmp_path):
    # an open writer keeps metadata per row group until it closes: a row group per read batch grew a
    # 10 GB export by hundreds of MiB (bench/RESULTS.md, issue 24, `memory`)
    batches = [_batch("persistent://public/default/t", i * 100, 100) for i in range(30)]  # ~100 kB each
    limit = 1 << 20
    with pq.ParquetWriter(tmp_path / "m.parquet", batches[0].schema) as w:
        groups = RowGroups(w, limit=limit)
        for b in batches:
            groups.add(b)
        groups.flush()
    md = pq.read_metadata(tmp_path / "m.parquet")
    total = sum(b.nbytes for b in batches)
    assert md.num_rows == 3000
    assert total // limit <= md.num_row_groups <= total // limit + 1 < len(batches)
    assert pq.read_table(tmp_path / "m.parquet").column("entry_id").to_pylist() == list(range(3000))


def test_staging_holds_back_only_the_topic_and_day_being_written(tmp_path, monkeypatch):
    monkeypatch.setattr(RowGroups.__init__, "__defaults__", (1 << 30,))  # nothing flushed by size
    t1, t2 = "persistent://public/default/a", "persistent://public/default/b"
    w = StagingWriter(tmp_path)
    w.write(_batch(t1, 0, 50))
    w.write(_batch(t1, 50, 50))
    w.write(_batch(t1, 100, 50, day=1))  # a new day: the first day's rows are written as one row group
    w.write(_batch(t2, 0, 50))
    w.write(_batch(t1, 150, 50, day=1))  # back to t1's second day: another row group there
    w.close()
    files = {(f.parent.parent.name, f.parent.name): pq.ParquetFile(f).metadata for f in tmp_path.rglob("*.parquet")}
    groups = {k[0][-1] + k[1][-2:]: (m.num_rows, m.num_row_groups) for k, m in files.items()}
    assert groups == {"a14": (100, 1), "a15": (100, 2), "b14": (50, 1)}


class _Writer:
    """A ParquetWriter stand-in that records its row groups, which thread wrote them and whether one write
    overlapped another or the close; ``fail_at``: the write that raises."""

    def __init__(self, fail_at: int = -1, delay: float = 0.0) -> None:
        self.groups: list[int] = []
        self.threads: set[str] = set()
        self.fail_at, self.delay = fail_at, delay
        self.busy = self.overlapped = self.closed_while_busy = False

    def write_table(self, t, row_group_size=None):
        import threading
        import time

        self.overlapped |= self.busy
        self.busy = True
        self.threads.add(threading.current_thread().name)
        time.sleep(self.delay)
        self.busy = False
        if len(self.groups) == self.fail_at:
            raise OSError("disk full")
        assert row_group_size == t.num_rows
        self.groups.append(t.num_rows)

    def close(self):
        self.closed_while_busy |= self.busy


def test_row_groups_are_written_by_a_thread_one_at_a_time_and_flush_waits():
    w = _Writer(delay=0.02)
    groups = RowGroups(w, limit=1)  # every batch its own group
    for i in range(5):
        groups.add(_batch("persistent://public/default/t", i * 10, 10))
    groups.flush()
    assert w.groups == [10] * 5 and not w.overlapped
    assert w.threads == {"pulsarkit-row-group"}


def test_a_failed_row_group_write_is_raised_by_the_next_call_and_nothing_after_it_is_written():
    w = _Writer(fail_at=1)
    groups = RowGroups(w, limit=1)
    groups.add(_batch("persistent://public/default/t", 0, 10))
    groups.add(_batch("persistent://public/default/t", 10, 10))  # this group's write fails
    with pytest.raises(OSError, match="disk full"):
        groups.add(_batch("persistent://public/default/t", 20, 10))
        groups.flush()
    assert w.groups == [10]


def test_leaving_row_groups_on_an_error_waits_for_the_write_before_the_writer_closes():
    w = _Writer(delay=0.1)
    first = _batch("persistent://public/default/t", 0, 10)
    with pytest.raises(InterruptedError):
        with RowGroups(w, limit=first.nbytes) as groups:
            groups.add(first)  # written by the thread
            groups.add(_batch("persistent://public/default/t", 10, 5))  # gathered, never written: the run stopped
            raise InterruptedError
    w.close()
    assert w.groups == [10] and not w.closed_while_busy


def test_staging_closes_every_file_when_one_write_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(RowGroups.__init__, "__defaults__", (1 << 30,))
    w = StagingWriter(tmp_path)
    w.write(_batch("persistent://public/default/a", 0, 20))
    w.write(_batch("persistent://public/default/b", 0, 20))
    broken = list(w._writers.values())[-1]  # b: gathered, written by close
    monkeypatch.setattr(broken, "write_table", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        w.close()
    files = sorted(tmp_path.rglob("*.parquet"))
    assert len(files) == 2
    assert [pq.ParquetFile(f).metadata.num_rows for f in files] == [20, 0]  # both closed: valid files


def test_the_codecs_name_every_leaf_column_as_parquet_does():
    # a codec dict leaves a column it does not name uncompressed: its paths are the file's
    nested = pa.schema([
        ("payload", pa.binary()), ("m", pa.map_(pa.string(), pa.list_(pa.int32()))),
        ("s", pa.struct([("a", pa.int64()), ("b", pa.struct([("c", pa.string())]))])),
        ("l", pa.large_list(pa.struct([("x", pa.float64())]))), ("d", pa.dictionary(pa.int32(), pa.string())),
    ])  # fmt: skip
    for schema in (arrow_schema(message_fields()), arrow_schema(message_fields(True)), nested):
        sink = pa.BufferOutputStream()
        pq.write_table(schema.empty_table(), sink)
        pschema = pq.ParquetFile(pa.BufferReader(sink.getvalue())).schema
        assert _leaf_columns(schema) == [pschema.column(i).path for i in range(len(pschema))]
