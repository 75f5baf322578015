"""Message rows are written to Parquet without a dictionary for the payload and the per-message ids
(scan.schema.parquet_options), with one for the rest, by `messages --format parquet` and the export."""

import pyarrow as pa
import pyarrow.parquet as pq
from pulsarkit.export.staging import StagingWriter
from pulsarkit.scan.schema import NO_DICTIONARY, arrow_schema, message_fields


def test_staged_files_have_no_dictionary_for_payload_and_ids(tmp_path):
    rows = [
        {"topic": "persistent://public/default/t", "partition": -1, "ledger_id": 7, "entry_id": i, "batch_index": -1,
         "payload": bytes([i % 251]) * 20, "publish_time": 1_700_000_000_000, "sequence_id": i, "broker_index": i,
         "producer_name": "p", "null_value": False, "encrypted": False}
        for i in range(300)
    ]  # fmt: skip
    b = pa.RecordBatch.from_pylist(rows, schema=arrow_schema(message_fields()))
    w = StagingWriter(tmp_path)
    w.write(b)
    w.close()
    (f,) = tmp_path.rglob("*.parquet")
    rg = pq.ParquetFile(f).metadata.row_group(0)
    encodings = {rg.column(i).path_in_schema: rg.column(i).encodings for i in range(rg.num_columns)}
    for name in NO_DICTIONARY:
        assert not any("DICT" in e for e in encodings[name]), (name, encodings[name])
    assert any("DICT" in e for e in encodings["producer_name"])
    assert pq.read_table(f).column("payload").to_pylist() == [r["payload"] for r in rows]
