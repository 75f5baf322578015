"""``export --mode upsert`` to Delta and Iceberg when a run's mark moves but no key changes (only keyless messages
came): delta-rs's MERGE and pyiceberg's upsert then commit nothing, so the marks ride on an empty append; without
it the marks stayed behind and every later run upserted the same snapshot again."""

from __future__ import annotations

import pulsarkit as pk
import pytest
from pulsarkit import export as px
from pulsarkit.export.run import committed_marks

ORDERS = "public/default/persistent/orders"
TOPIC = "persistent://public/default/orders"


def _add(root, *messages: tuple[str | None, bytes]) -> None:
    with pk.Store.open(root, sync=False) as store:
        ml = store.managed_ledger(ORDERS, pk.ManagedLedgerConfig())
        for key, payload in messages:
            md = pk.message_metadata("prod", 0, 1_700_000_000_000, **({"partition_key": key} if key else {}))
            ml.add_entry(pk.encode_entry(md, payload))


@pytest.mark.parametrize("to", ["delta", "iceberg"])
def test_a_rerun_with_only_keyless_messages_commits_its_marks(tmp_path, to):
    pytest.importorskip({"delta": "deltalake", "iceberg": "pyiceberg"}[to])
    root, out = tmp_path / "data", tmp_path / "out"
    _add(root, ("k0", b"a"), ("k1", b"b"))
    assert px.export(str(root), to, str(out), mode="upsert", log=lambda m: None).rows == 2
    _add(root, (None, b"no key"))
    second = px.export(str(root), to, str(out), mode="upsert", log=lambda m: None)
    # continued from its mark: no key changed since, so no row is written (a full re-read staged both again)
    assert second.rows == 0 and second.topics[TOPIC].after != second.topics[TOPIC].until
    assert committed_marks(str(out))[1].marks[TOPIC] == second.topics[TOPIC].until  # the marks moved on
    third = px.export(str(root), to, str(out), mode="upsert", log=lambda m: None)
    assert third.rows == 0 and third.topics == {}
