"""What an export keeps with its output: each topic's high-water mark and the run that committed it.

The JSON shapes are those of every earlier pulsarkit export, so an export made before is continued."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

#: ``format`` of the marks document, whatever the target
FORMAT = "pulsarkit-export"
VERSION = 1


class Mark(NamedTuple):
    """A topic's high-water mark: the last position (ledger, entry) an export considered. A run reads
    only positions after it (and the earlier chunks of a message that ends after it)."""

    ledger_id: int
    entry_id: int


@dataclass(frozen=True)
class RunRecord:
    """One committed run, as the output records it."""

    run: str
    time: int
    engine: str
    rows: int
    files: int

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "time": self.time, "engine": self.engine, "rows": self.rows, "files": self.files}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RunRecord:
        return cls(str(doc["run"]), int(doc["time"]), str(doc["engine"]), int(doc["rows"]), int(doc["files"]))


@dataclass(frozen=True)
class ExportMarks:
    """The committed marks of an export and the data directory (its real path) they are positions of."""

    source: str
    marks: dict[str, Mark] = field(default_factory=dict)

    def advanced(self, marks: dict[str, Mark]) -> ExportMarks:
        """These marks with ``marks`` over them (a topic not in ``marks`` keeps its mark)."""
        return ExportMarks(self.source, {**self.marks, **marks})

    def marks_json(self) -> dict[str, list[int]]:
        return {t: list(m) for t, m in self.marks.items()}

    def to_json(self, run: RunRecord) -> dict[str, Any]:
        """The document a Delta commit or an Iceberg snapshot carries: the marks and the run that made them."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "source": self.source,
            "marks": self.marks_json(),
            "run": run.to_json(),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ExportMarks:
        return cls(str(doc.get("source")), {t: Mark(int(p[0]), int(p[1])) for t, p in doc.get("marks", {}).items()})
