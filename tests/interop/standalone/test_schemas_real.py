"""The schema registry of real Pulsar standalones (4.0.7 and 3.0.7, the data of test_datadir_oracle.py): every
version of every topic's schema read from the ``/schemas`` nodes and the schema ledgers, with nothing left over:
the workload's ``Schema.STRING`` topic, the brokers' own Avro schemas of their system topics, each version's
SHA-256 as the locator keeps it, and the messages naming the version they were written with."""

from __future__ import annotations

import json

import pulsarkit as pk
import pytest
from pulsarkit.analysis.schemas import schema_history
from pulsarkit.broker.schema_registry import schema_version_number
from pulsarkit.cli import main
from test_datadir_oracle import pulsar_version, recorded  # noqa: F401 - the fixtures

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def test_every_stored_schema_version(recorded, capsys):  # noqa: F811 - the imported fixture
    data = recorded / "clean" / "data"
    with pk.open_data_dir(data) as dd:
        history = schema_history(dd)
        assert dd.issues == []
        by_id = {s.schema_id: s for s in history}
        # the workload's producer with Schema.STRING: one version, an empty definition
        s = by_id["public/default/schema-string"]
        assert (s.version, s.type, s.definition, s.deleted, s.hash_matches) == (0, "STRING", b"", False, True)
        assert s.timestamp > 1_700_000_000_000
        # the brokers' own system topics carry Avro schemas of their records
        names = {json.loads(x.definition)["name"] for x in history if x.type == "AVRO"}
        assert {"PulsarEvent", "TransactionBufferSnapshot"} <= names
        assert all(x.hash_matches and not x.deleted for x in history)
        # each version's entry is in a schema ledger of that schema id; every schema the metadata lists is read
        for x in history:
            led = dd.ledgers[x.ledger_id]
            assert led.kind == "schema" and led.custom_metadata["pulsar/schemaId"].decode() == x.schema_id
        assert sorted(by_id) == sorted(dd.schemas)
        # the messages name the version they were written with
        ml = dd.resolve("persistent://public/default/schema-string")
        versions = {schema_version_number(pk.Entry.parse(d).metadata.schema_version) for _, d in dd.ml_entries(ml)}
        assert versions == {0}
    assert main(["schemas", str(data), "--topic", "schema-string", "--format", "json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    row = json.loads(line)
    assert (row["schema_id"], row["type"], row["definition"], row["hash_matches"]) == (
        "public/default/schema-string",
        "STRING",
        "",
        True,
    )
    assert main(["schemas", str(data)]) == 0
    out = capsys.readouterr().out
    assert "public/default/__change_events" in out and "AVRO" in out and "MISMATCH" not in out
