"""An Iceberg table in ``OUT`` with its own catalog, the marks in its snapshots' summary properties.

The table lives in ``OUT`` (``metadata/``, ``data/topic=.../date=...``, identity partitions on
``topic`` and ``date``) and so does its catalog, a SQLite file (:data:`ICEBERG_CATALOG`, pyiceberg's
``SqlCatalog``, warehouse ``OUT``): no server. A run is one append, one snapshot, whose summary
property ``pulsarkit.export`` carries the marks. The catalog's row pointing at the current metadata
JSON is the commit point; what an append writes before it (data files, manifests, a metadata JSON)
is invisible until then, and what a run that died left of it is removed by the next run. Rows decoded with their
topic's schema (``--decode schema``) make a table of their own schema, their types as :mod:`.tabletypes` stores
them; a new schema version's rows evolve it in the commit that adds them (``union_by_name``). Needs ``pyiceberg``
(with its ``sql-sqlite`` extra), imported only when an Iceberg export is opened."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from ..scan.records import DataDirError
from .marks import ExportMarks, RunRecord
from .protocol import ICEBERG_CATALOG, ExportRefused, refuse_foreign
from .staging import PARTITION_COLUMNS, TABLE_FIELDS, shortened_topics, staged_table
from .tabletypes import conform, to_table_types
from .target import Target, optional_package
from .upsert import STATE_COLUMNS, merge_key, states_by_topic

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression

ICEBERG_MARKS_KEY = "pulsarkit.export"
#: the table in the export's own catalog
ICEBERG_TABLE = ("pulsarkit", "messages")
#: pyiceberg deletes the metadata JSONs that fall out of the log itself (no file piles up in metadata/)
ICEBERG_TABLE_PROPERTIES = {"write.metadata.delete-after-commit.enabled": "true"}


def _iceberg_type(t: pa.DataType, ids: Iterator[int]) -> Any:
    """The Iceberg type of one of the export's Arrow column types (the only ones it has)."""
    from pyiceberg import types as it

    if pa.types.is_map(t):
        kid, vid = next(ids), next(ids)
        return it.MapType(kid, _iceberg_type(t.key_type, ids), vid, _iceberg_type(t.item_type, ids), False)
    simple = {
        pa.string(): it.StringType(),
        pa.binary(): it.BinaryType(),
        pa.int32(): it.IntegerType(),
        pa.int64(): it.LongType(),
        pa.bool_(): it.BooleanType(),
    }
    if t not in simple:
        raise DataDirError(f"no Iceberg type for the export column type {t}")
    return simple[t]


def iceberg_schema(decoded: pa.Schema | None = None) -> Any:
    """The Iceberg schema of an export: the columns of the other targets, ``date`` a string as theirs; or those of
    ``decoded`` rows (already in :mod:`.tabletypes`' types), with fresh field ids."""
    from pyiceberg.schema import Schema, assign_fresh_schema_ids
    from pyiceberg.types import NestedField

    if decoded is not None:
        from pyiceberg.io.pyarrow import _ConvertToIcebergWithoutIDs, visit_pyarrow

        return assign_fresh_schema_ids(visit_pyarrow(decoded, _ConvertToIcebergWithoutIDs()))

    ids = iter(range(len(TABLE_FIELDS) + 1, 10_000))  # nested ids (the map's key and value) after the columns
    return Schema(
        *(NestedField(i, n, _iceberg_type(t, ids), required=False) for i, (n, t) in enumerate(TABLE_FIELDS, start=1))
    )


# pyiceberg's expressions are pydantic models whose own __init__ takes (term, value(s)); mypy reads their fields as
# the constructor's signature instead (term: UnboundTerm, type, value/values as keywords).
def _in(term: str, values: Iterable[Any]) -> BooleanExpression:
    """``In(term, values)``: an ``EqualTo`` for one value, ``AlwaysFalse`` for none."""
    from pyiceberg.expressions import In

    return In(term, values)  # type: ignore[call-arg, arg-type]


def _equal_to(term: str, value: Any) -> BooleanExpression:
    from pyiceberg.expressions import EqualTo

    return EqualTo(term, value)  # type: ignore[call-arg, arg-type]


def _local_path(location: str) -> str:
    """The local path of an Iceberg location (``/x`` as pulsarkit writes them, or ``file:///x``). Iceberg
    locations are not percent-decoded: a ``%3A`` in one is in the file's name (partition directories)."""
    if location.startswith("file:"):
        return "/" + location[len("file:") :].lstrip("/")
    if "://" in location:
        raise ExportRefused(f"{location}: an Iceberg export lives on the local file system")
    return location


class IcebergTarget(Target):
    name: ClassVar[str] = "iceberg"

    def __init__(self, out: Path, source: str, *, force: bool = False, other_source: bool = False) -> None:
        optional_package("pyiceberg.catalog.sql", self.name)  # needs sqlalchemy: the extra sql-sqlite
        self._metadata_location: str | None = None
        self._catalog: Any = None
        super().__init__(out, source, force=force, other_source=other_source)

    @property
    def metadata_location(self) -> str | None:
        """The current metadata JSON after a commit: what any Iceberg reader opens."""
        return self._metadata_location

    def _open(self, force: bool) -> ExportMarks | None:
        out = self.out
        if (out / ICEBERG_CATALOG).is_file():
            try:
                table = self._table()
            except FileNotFoundError as e:
                raise ExportRefused(
                    f"{out}: the metadata its Iceberg catalog points at is not there ({e}); an export moved from "
                    "elsewhere? Iceberg metadata names its files by absolute path, so a moved export cannot be "
                    "continued: export anew"
                ) from None
            if table is None:  # the first run died before its commit: the export is empty
                return None
            if os.path.realpath(_local_path(table.location())) != os.path.realpath(out):
                raise ExportRefused(
                    f"{out} holds an Iceberg export made at {table.location()}; Iceberg metadata names its "
                    "files by absolute path, so a moved export cannot be continued: export anew"
                )
            found, self.last_run = self._last_marks(table)
            self._metadata_location = table.metadata_location  # what a run with nothing new reports
            if found is None and table.current_snapshot() is not None and not force:
                raise ExportRefused(
                    f"{out} is an Iceberg table whose snapshots pulsarkit did not write; pass --force to append"
                )
            return found
        # a run deletes what no snapshot lists under data/ and metadata/: never in folders of others
        if (out / "metadata").exists() or (out / "data").exists():
            raise ExportRefused(
                f"{out} is not a pulsarkit export and has a data/ or metadata/ folder (an Iceberg table?); "
                "pulsarkit writes Iceberg exports only into its own: export elsewhere"
            )
        refuse_foreign(out, force, self.own_names())
        return None

    def catalog(self) -> Any:
        """The export's own catalog (creates its SQLite file: call only under the lock, or on one that exists)."""
        if self._catalog is None:
            from pyiceberg.catalog.sql import SqlCatalog

            # locations are plain absolute paths: pyiceberg takes them as they are (a file URI would
            # have to be percent-encoded, and pyiceberg does not decode one)
            self._catalog = SqlCatalog(
                "pulsarkit", uri=f"sqlite:///{self.out / ICEBERG_CATALOG}", warehouse=str(self.out)
            )
        return self._catalog

    def _table(self) -> Any:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.catalog().load_table(ICEBERG_TABLE)
        except NoSuchTableError:  # the first run died before its commit: the export is empty
            return None

    def upsert_state(self, topics: list[str]) -> dict[str, pa.Table] | None:
        table = self._table()
        if table is None:
            return None
        key = merge_key([f.name for f in table.schema().fields])
        columns = ("topic", key, *STATE_COLUMNS[2:])
        rows = table.scan(row_filter=_in("topic", topics), selected_fields=columns).to_arrow()
        return states_by_topic(rows.select(list(columns)).rename_columns(list(STATE_COLUMNS)), topics)

    @staticmethod
    def _last_marks(table: Any) -> tuple[ExportMarks | None, str | None]:
        """The marks of the last pulsarkit snapshot and the run that made it."""
        from pyiceberg.table.snapshots import ancestors_of

        for snap in ancestors_of(table.current_snapshot(), table.metadata):
            if snap.summary is not None and ICEBERG_MARKS_KEY in snap.summary:
                doc = json.loads(str(snap.summary[ICEBERG_MARKS_KEY]))
                return ExportMarks.from_json(doc), doc.get("run", {}).get("run")
        return None, None

    def close(self) -> None:
        super().close()
        if self._catalog is not None:
            self._catalog.engine.dispose()  # closes the SQLite file

    def stored_schema(self) -> pa.Schema | None:
        table = self._table() if (self.out / ICEBERG_CATALOG).is_file() else None
        return None if table is None else table.schema().as_arrow()

    def _evolve(self, tx: Any) -> None:
        """The table's schema evolved, in the transaction ``tx``, to :attr:`evolve_to` (new fields added, widened
        types promoted: what :func:`.tabletypes.evolved_schema` allowed); no change when it is the table's."""
        if self.evolve_to is not None:
            with tx.update_schema() as update:
                update.union_by_name(iceberg_schema(self.evolve_to))

    def _unwritable(self, staged: list[Path]) -> set[str]:
        return shortened_topics(staged)  # the writer names partition directories in full

    def _commit(self, staged: list[Path], marks: ExportMarks, run: RunRecord) -> None:
        """One append, one snapshot: the data files and the marks (its summary properties) commit together."""
        self.note_created([], [], writer_names_files=True)  # pyiceberg names its files itself
        data = staged_table(staged, self.row_schema)
        decoded = marks.decode == "schema"
        if decoded:  # decoded rows: their types as Iceberg stores them (microseconds, no unsigned, ...)
            data = to_table_types(data, self.name)
        if self.evolve_to is not None:  # the table's schema, evolved (in this commit) to take them
            data = conform(data, self.evolve_to)
        props = {ICEBERG_MARKS_KEY: json.dumps(marks.to_json(run), sort_keys=True)}
        table = self._table()
        if table is None:
            from pyiceberg.partitioning import PartitionField, PartitionSpec
            from pyiceberg.transforms import IdentityTransform

            schema = iceberg_schema(data.schema if decoded else None)
            spec = PartitionSpec(
                *(
                    PartitionField(schema.find_field(n).field_id, 1000 + i, IdentityTransform(), n)
                    for i, n in enumerate(PARTITION_COLUMNS)
                )
            )
            catalog = self.catalog()
            catalog.create_namespace_if_not_exists(ICEBERG_TABLE[0])
            # the table and its first snapshot in one catalog commit
            tx = catalog.create_table_transaction(
                ICEBERG_TABLE,
                schema,
                location=str(self.out),
                partition_spec=spec,
                properties=ICEBERG_TABLE_PROPERTIES,
            )
            tx.append(data, snapshot_properties=props)
            table = tx.commit_transaction()
        elif self.replace or self.deleted:
            # --mode upsert, one catalog commit: the keys no longer in a replaced topic's snapshot and those a
            # tombstone deleted in a topic continued from its mark deleted, then an upsert by (topic, key)
            # that rewrites only the rows whose message changed (copy-on-write)
            from pyiceberg.expressions import And, Not, Or

            key = merge_key(data.column_names)
            gone: BooleanExpression | None = None
            if self.replace:
                gone = _in("topic", sorted(self.replace))
                kept = {
                    k
                    for t, k in zip(data.column("topic").to_pylist(), data.column(key).to_pylist())
                    if t in self.replace
                }
                if kept:
                    gone = And(gone, Not(_in(key, sorted(kept))))
            for t, keys in sorted(self.deleted.items()):
                if keys:
                    tomb = And(_equal_to("topic", t), _in(key, sorted(keys)))
                    gone = tomb if gone is None else Or(gone, tomb)
            before = table.metadata.current_snapshot_id
            with table.transaction() as tx:
                self._evolve(tx)
                if gone is not None:
                    tx.delete(gone, snapshot_properties=props)
                if data.num_rows:
                    tx.upsert(data, join_cols=["topic", key], snapshot_properties=props)
                if tx.table_metadata.current_snapshot_id == before:
                    # no row changed: no snapshot, not even for the marks; an empty append carries them,
                    # else they would stay behind and every later run would upsert the same snapshot again
                    tx.append(data.schema.empty_table(), snapshot_properties=props)
            table = self._table()
        else:
            with table.transaction() as tx:  # the schema's evolution and the append: one catalog commit
                self._evolve(tx)
                tx.append(data, snapshot_properties=props)
            table = self._table()
        self._metadata_location = table.metadata_location
        return None
