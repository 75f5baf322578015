"""A Parquet dataset (Hive partitions ``topic=.../date=...``) and its marks file.

The marks file (``OUT/_pulsarkit_export.json``) holds each topic's mark, the data files committed and
the runs. A run renames its staged files into place (each fsynced first, then every directory whose
entries changed), then writes the marks file by an atomic rename: that rename is the commit point, and
every file it lists is durable before it; an upsert's replaced files are deleted only after it. A run
that dies before it leaves data files the marks file does not list; its journal lists them, and the
next run deletes them (:meth:`ParquetTarget.recover`), and only them, before it starts. A partition
directory whose name would be longer than a file name may be (a very long topic name) is shortened
with a hash (:func:`.paths.short_name`); ``topic_dirs`` in the marks file maps such a directory to its
topic, and its files carry the topic in their metadata."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

from ..durable import fsync_dir, fsync_file
from .marks import FORMAT, VERSION, ExportMarks, RunRecord
from .paths import PRIVATE_FILE, check_below, make_dirs
from .protocol import MARKS_FILE, ExportRefused, refuse_foreign, write_json_atomically
from .staging import escape_path_name, partition_dir, partition_values
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
    lists_files: ClassVar[bool] = True

    def __init__(self, out: Path, source: str, *, force: bool = False, other_source: bool = False) -> None:
        self.files: list[str] = []  # committed, relative to out
        self.runs: list[RunRecord] = []
        self.topic_dirs: dict[str, str] = {}  # shortened partition directory -> topic
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
            self.topic_dirs = {str(k): str(v) for k, v in doc.get("topic_dirs", {}).items()}
            self.last_run = self.runs[-1].run if self.runs else None
            return ExportMarks.from_json(doc)
        refuse_foreign(self.out, force, self.own_names())
        return None

    def _commit(self, staged: list[Path], marks: ExportMarks, run: RunRecord) -> list[str]:
        moves = [(f, partition_dir(f) / f"part-{run.run}-{i:05d}.parquet") for i, f in enumerate(staged)]
        files = [str(rel) for _, rel in moves]
        new_dirs: list[str] = []
        for d in sorted({str(rel.parent) for _, rel in moves}):
            for n in range(1, len(Path(d).parts) + 1):
                sub = str(Path(*Path(d).parts[:n]))
                if not os.path.lexists(check_below(self.out, sub)) and sub not in new_dirs:
                    new_dirs.append(sub)
        for _, rel in moves:  # before the journal lists it: the next run would delete what it lists
            if os.path.lexists(dest := check_below(self.out, rel)):
                raise ExportRefused(f"{dest} exists; pulsarkit never replaces a file it did not write", str(dest))
        self.note_created(files, new_dirs)  # before anything is created: what the next run undoes if this dies
        topic_dirs = dict(self.topic_dirs)
        #: the directories whose entries changed: each renamed into, and the parent of each one made
        changed: set[Path] = set()
        for f, rel in moves:
            changed |= {Path(d).parent for d in make_dirs(self.out, rel.parent)}
            changed.add(rel.parent)
            dest = check_below(self.out, rel)
            os.chmod(f, PRIVATE_FILE)  # a Spark task's file too
            fsync_file(f)  # its data durable before its name is: the marks file must never list an empty file
            os.replace(f, dest)
            topic = partition_values(dest)[0]
            if rel.parts[0] != "topic=" + escape_path_name(topic):
                topic_dirs[rel.parts[0]] = topic
        for c in sorted(changed, key=lambda c: -len(c.parts)):  # the new names durable before the marks list them
            fsync_dir(check_below(self.out, c) if c.parts else self.out)
        # --mode upsert: the topics' earlier snapshot files leave the list at the commit point, then the disk
        replaced = {f for f in self.files if self.replace and partition_values(self.out / f)[0] in self.replace}
        committed, runs = sorted((set(self.files) - replaced) | set(files)), [*self.runs, run]
        self.write_marks_file(
            {
                "format": FORMAT,
                "version": VERSION,
                "to": self.name,
                "source": marks.source,
                "marks": marks.marks_json(),
                **marks.extra_json(),
                "files": committed,
                "runs": [r.to_json() for r in runs],
                **({"topic_dirs": topic_dirs} if topic_dirs else {}),
            }
        )
        self.files, self.runs, self.topic_dirs = committed, runs, topic_dirs
        self._drop_replaced()
        return files

    def _drop_replaced(self) -> None:
        """Deletes the data files of earlier runs that the marks file no longer lists (snapshots an upsert
        run replaced; left by a run that died after its commit point), and only those: ``part-<run>-<n>``
        of a committed run."""
        runs = {r.run for r in self.runs}
        listed = set(self.files)
        for rel in data_files(self.out):
            name = Path(rel).name
            if rel in listed or name[len("part-") :].rsplit("-", 1)[0] not in runs:
                continue
            os.unlink(check_below(self.out, rel))
            for d in (Path(rel).parent, Path(rel).parent.parent):
                try:
                    os.rmdir(check_below(self.out, d))
                except OSError:
                    break

    def _recover_committed(self) -> None:
        if self.committed.mode == "upsert":
            self._drop_replaced()

    def write_marks_file(self, doc: dict[str, Any]) -> None:
        """The commit point: the marks file, renamed into place."""
        write_json_atomically(self.out / MARKS_FILE, doc)
