"""A Delta table (partitioned by ``topic`` and ``date``) with the marks in its commits' metadata.

A run appends its staged rows in one Delta transaction whose custom metadata (``pulsarkit.export``)
carries the marks: data and marks commit together. Rows decoded with their topic's schema (``--decode schema``)
make a table of their own schema, their types as :mod:`.tabletypes` stores them; a new schema version's rows evolve
it in the commit that adds them (``schema_mode="merge"``, :func:`.tabletypes.evolved_schema`). Needs the ``deltalake``
package, imported only when a Delta export is opened, so that every other command starts without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from .marks import ExportMarks, RunRecord
from .protocol import DELTA_LOG, ExportRefused, refuse_foreign
from .staging import PARTITION_COLUMNS, shortened_topics, staged_table
from .tabletypes import conform, to_table_types
from .target import Target, optional_package
from .upsert import STATE_COLUMNS, changed_predicate, delete_predicate, merge_key, states_by_topic

#: the key of a pulsarkit commit's custom metadata: the marks document
DELTA_MARKS_KEY = "pulsarkit.export"


class DeltaTarget(Target):
    name: ClassVar[str] = "delta"

    def __init__(self, out: Path, source: str, *, force: bool = False, other_source: bool = False) -> None:
        self.deltalake: Any = optional_package("deltalake", self.name)
        super().__init__(out, source, force=force, other_source=other_source)

    def _open(self, force: bool) -> ExportMarks | None:
        out = self.out
        if (out / DELTA_LOG).is_dir():
            if self.journal is not None and DELTA_LOG in self.own_names() and not any((out / DELTA_LOG).glob("*.json")):
                return None  # the first run died before its first commit: recovery removes its files
            table = self.deltalake.DeltaTable(str(out))
            found = None
            for h in table.history():  # newest first: the last pulsarkit commit's marks
                if DELTA_MARKS_KEY in h:
                    found = json.loads(h[DELTA_MARKS_KEY])
                    break
            if found is None and not force:
                raise ExportRefused(f"{out} is a Delta table pulsarkit did not write; pass --force to append to it")
            self.last_run = found.get("run", {}).get("run") if found is not None else None
            return ExportMarks.from_json(found) if found is not None else None
        refuse_foreign(out, force, self.own_names())
        return None

    def _unwritable(self, staged: list[Path]) -> set[str]:
        return shortened_topics(staged)  # the writer names partition directories in full

    def stored_schema(self) -> pa.Schema | None:
        if not any((self.out / DELTA_LOG).glob("*.json")):
            return None
        return pa.schema(self.deltalake.DeltaTable(str(self.out)).schema().to_arrow())

    def _commit(self, staged: list[Path], marks: ExportMarks, run: RunRecord) -> None:
        self.note_created([], [], writer_names_files=True)  # delta-rs names its files itself
        props = self.deltalake.CommitProperties(custom_metadata={DELTA_MARKS_KEY: json.dumps(marks.to_json(run))})
        data = staged_table(staged, self.row_schema)
        if marks.decode == "schema":  # decoded rows: their types as Delta stores them (microseconds, ...)
            data = to_table_types(data, self.name)
        if self.evolve_to is not None:  # the table's schema, evolved (in this commit) to take them
            data = conform(data, self.evolve_to)
        self._write(data, props)
        return None

    def upsert_state(self, topics: list[str]) -> dict[str, pa.Table] | None:
        if not (self.out / DELTA_LOG).is_dir():
            return None
        table = self.deltalake.DeltaTable(str(self.out))
        key = merge_key([f.name for f in table.schema().fields])
        columns = ["topic", key, *STATE_COLUMNS[2:]]
        rows = table.to_pyarrow_table(columns=columns, filters=[("topic", "in", topics)])
        return states_by_topic(rows.select(columns).rename_columns(list(STATE_COLUMNS)), topics)

    def _write(self, data: Any, props: Any) -> None:
        if (self.replace or self.deleted) and (self.out / DELTA_LOG).is_dir():
            # --mode upsert: MERGEd by key in one commit: a key whose message is the same is left alone, a
            # changed one updated, a new one inserted; deleted: a replaced topic's keys no longer in its snapshot,
            # a continued topic's keys a tombstone deleted (its rows are only what changed since its mark)
            key = merge_key(data.column_names)
            table = self.deltalake.DeltaTable(str(self.out))
            version = table.version()
            merge = (
                table.merge(
                    data,
                    f"t.topic = s.topic AND t.{key} = s.{key}",
                    source_alias="s",
                    target_alias="t",
                    merge_schema=self.evolve_to is not None,
                    commit_properties=props,
                )
                .when_matched_update_all(predicate=changed_predicate())
                .when_not_matched_insert_all()
            )
            gone = delete_predicate(self.replace, self.deleted, key)
            (merge.when_not_matched_by_source_delete(predicate=gone) if gone else merge).execute()
            if self.deltalake.DeltaTable(str(self.out)).version() != version:
                return
            # a MERGE that changes no row commits nothing (delta-rs), not even its marks: they go in an empty
            # append, else the marks would stay behind and every later run would MERGE the same snapshot again
            data = data.schema.empty_table()
        self.deltalake.write_deltalake(
            str(self.out),
            data,
            partition_by=list(PARTITION_COLUMNS),
            mode="append",
            schema_mode="merge" if self.evolve_to is not None else None,
            commit_properties=props,
        )
