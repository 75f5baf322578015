"""A data directory's schema registry: every version of every topic's schema, read from the ``/schemas``
nodes of the metadata and the schema ledgers on the bookies (:mod:`pulsarkit.broker.schema_registry`).

A version that cannot be read (a damaged locator, an entry no bookie holds, bytes that do not decode) is an
issue of the directory (``dd.issues``, strict raises), never left out silently; the versions that can be
read are still given.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from ..broker.schema_registry import StoredSchema, parse_locator, parse_schema_entry
from ..broker.topic_name import TopicName, partition_of
from ..errors import InvalidTopicNameError, PulsarkitError
from ..scan.datadir import DataDir
from ..scan.records import Issue

SCHEMAS_SCHEMA = pa.schema(
    [
        ("schema_id", pa.string()),
        ("version", pa.int64()),
        ("type", pa.string()),
        ("definition", pa.binary()),
        ("timestamp", pa.int64()),
        ("user", pa.string()),
        ("deleted", pa.bool_()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("ledger_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("hash_matches", pa.bool_()),
    ]
)


def schema_id(topic: str) -> str:
    """The registry's id of a topic's schema: ``tenant/namespace/topic``, shared by a partitioned topic's
    partitions (``persistent://public/default/t-partition-0`` -> ``public/default/t``; a v1 topic's
    cluster left out, as ``TopicName.getSchemaName``). A managed-ledger name works too, as everywhere a
    data directory takes a topic (``DataDir.resolve``)."""
    try:
        tn = TopicName.parse(topic)
    except InvalidTopicNameError:
        tn = TopicName.from_ml(topic)  # short names have 1 or 3 parts, managed-ledger names 4 or 5
    base, _ = partition_of(tn.local)
    return f"{tn.tenant}/{tn.namespace}/{base if base is not None else tn.local}"


def schema_history(dd: DataDir, topics: Iterable[str] | None = None) -> list[StoredSchema]:
    """Every stored version of the schemas of ``topics`` (all when None), by schema id then version."""
    wanted = None if topics is None else {schema_id(t) for t in topics}
    out: list[StoredSchema] = []
    for sid, locator in sorted(dd.schemas.items()):
        if wanted is not None and sid not in wanted:
            continue
        where = f"/schemas/{sid}"
        try:
            places = parse_locator(locator, sid)
        except PulsarkitError as e:
            dd.report(Issue("bad_schema", str(dd.metadata_dir), None, f"{where}: {e}"))
            continue
        for place in places:
            try:
                raw = dd.read_entry(place.ledger_id, place.entry_id)
                out.append(parse_schema_entry(raw, place, sid))
            except PulsarkitError as e:
                dd.report(
                    Issue("bad_schema", where, None, f"version {place.version}: {e}", place.ledger_id, place.entry_id)
                )
    return out


def schemas_table(dd: DataDir, topics: Iterable[str] | None = None) -> pa.Table:
    """:func:`schema_history` as an Arrow table (:data:`SCHEMAS_SCHEMA`)."""
    rows = [
        {**s.__dict__, "properties": list(s.properties)}  # a map column takes (key, value) pairs
        for s in schema_history(dd, topics)
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMAS_SCHEMA)


__all__ = ["SCHEMAS_SCHEMA", "schema_history", "schema_id", "schemas_table"]
