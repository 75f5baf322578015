"""A Parquet dataset (Hive partitions ``topic=.../date=...``) and its marks file.

The marks file (``OUT/_pulsarkit_export.json``) holds each topic's mark, the data files committed and
the runs. A run renames its staged files into place, then writes the marks file by an atomic rename:
that rename is the commit point. A run that dies in between leaves data files the marks file does not
list; the next run deletes them (:meth:`ParquetTarget.recover`) before it starts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

from .marks import FORMAT, VERSION, ExportMarks, RunRecord
from .protocol import ICEBERG_CATALOG, MARKS_FILE, ExportRefused, refuse_foreign, write_json_atomically
from .staging import partition_dir
from .target import Target


def data_files(out: Path) -> list[str]:
    """Relative paths of the data files under an export's partition directories, committed or not."""
    found = []
    for t in out.glob("topic=*"):
        for f in t.glob("date=*/part-*.parquet"):
            found.append(str(f.relative_to(out)))
    return sorted(found)


class ParquetTarget(Target):
    name: ClassVar[str] = "parquet"

    def __init__(self, out: Path, source: str, *, force: bool = False, other_source: bool = False) -> None:
        self.files: list[str] = []  # committed, relative to out
        self.runs: list[RunRecord] = []
        super().__init__(out, source, force=force, other_source=other_source)

    def _open(self, force: bool) -> ExportMarks | None:
        path = self.out / MARKS_FILE
        if path.exists():
            doc = json.loads(path.read_text())
            if doc.get("format") != FORMAT:
                raise ExportRefused(f"{path} is not a pulsarkit export marks file")
            if doc.get("to") != self.name:
                raise ExportRefused(f"{self.out} is a pulsarkit export to {doc.get('to')}, not parquet")
            self.files = list(doc["files"])
            self.runs = [RunRecord.from_json(r) for r in doc["runs"]]
            return ExportMarks.from_json(doc)
        if (self.out / ICEBERG_CATALOG).exists():
            raise ExportRefused(f"{self.out} is a pulsarkit export to iceberg, not parquet")
        refuse_foreign(self.out, force)
        return None

    def _remove_uncommitted(self) -> list[str]:
        committed = set(self.files)
        removed = []
        for rel in data_files(self.out):
            if rel not in committed:
                (self.out / rel).unlink()
                removed.append(rel)
        return removed

    def _commit(self, staged: list[Path], marks: ExportMarks, run: RunRecord) -> list[str]:
        files = []
        for i, f in enumerate(staged):
            dest = self.out / partition_dir(f) / f"part-{run.run}-{i:05d}.parquet"
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(f, dest)
            files.append(str(dest.relative_to(self.out)))
        committed, runs = sorted(set(self.files) | set(files)), [*self.runs, run]
        self.write_marks_file(
            {
                "format": FORMAT,
                "version": VERSION,
                "to": self.name,
                "source": marks.source,
                "marks": marks.marks_json(),
                "files": committed,
                "runs": [r.to_json() for r in runs],
            }
        )
        self.files, self.runs = committed, runs
        return files

    def write_marks_file(self, doc: dict[str, Any]) -> None:
        """The commit point: the marks file, renamed into place."""
        write_json_atomically(self.out / MARKS_FILE, doc)
