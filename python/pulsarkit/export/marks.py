"""What an export keeps with its output: each topic's high-water mark and the run that committed it.

The JSON shapes are those of every earlier pulsarkit export, so an export made before is continued."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..managed_ledger.position import message_id_text, parse_message_id

#: ``format`` of the marks document, whatever the target
FORMAT = "pulsarkit-export"
VERSION = 1


class Mark(NamedTuple):
    """A topic's high-water mark: the last position (ledger, entry) an export considered. A run reads
    only positions after it (and the earlier chunks of a message that ends after it)."""

    ledger_id: int
    entry_id: int


class MessageId(NamedTuple):
    """A message id of a topic (``batch_index`` -1: a whole entry), printed as Pulsar prints it
    (``ledger:entry:-1[:batch]``, :func:`~pulsarkit.managed_ledger.position.message_id_text`: the id a reader of
    the topic itself gets). In the marks, a topic's ``next`` is the first message a live consumer continuing the
    export reads (the position after the last exported message: the hand-off)."""

    ledger_id: int
    entry_id: int
    batch_index: int = -1

    def __str__(self) -> str:
        return message_id_text(self.ledger_id, self.entry_id, self.batch_index)

    @classmethod
    def parse(cls, text: str) -> MessageId:
        """Pulsar's printed forms, ``ledger:entry:partition[:batch]``, or ``ledger:entry``
        (:func:`~pulsarkit.managed_ledger.position.parse_message_id`; its partition is the caller's to check);
        anything else is a ValueError."""
        ledger, entry, _, batch = parse_message_id(text)
        return cls(ledger, entry, batch)


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
    #: per topic, the hand-off: the first message id after the last exported one (absent in older exports)
    next: dict[str, MessageId] = field(default_factory=dict)
    #: ``append`` (every message) or ``upsert`` (the latest message per key; :mod:`.upsert`)
    mode: str = "append"
    #: ``bytes`` (the payloads) or ``schema`` (rows decoded with their topic's schema): one kind of row per export
    decode: str = "bytes"
    #: ``decode="schema"``: per topic, the schema version its rows were last decoded to (the newest then): what a
    #: table's schema evolved from (absent in older exports)
    schema_versions: dict[str, int] = field(default_factory=dict)

    def advanced(self, marks: dict[str, Mark], next: dict[str, MessageId] | None = None) -> ExportMarks:
        """These marks with ``marks`` (and hand-off positions ``next``) over them (a topic not in them
        keeps its own)."""
        return ExportMarks(
            self.source,
            {**self.marks, **marks},
            {**self.next, **(next or {})},
            self.mode,
            self.decode,
            self.schema_versions,
        )

    def marks_json(self) -> dict[str, list[int]]:
        return {t: list(m) for t, m in self.marks.items()}

    def extra_json(self) -> dict[str, Any]:
        """The optional fields of the marks document (``next``: topic -> [ledger, entry, batch]; ``mode``;
        ``decode``; ``schema_versions``)."""
        return {
            **({"next": {t: list(n) for t, n in self.next.items()}} if self.next else {}),
            **({"mode": self.mode} if self.mode != "append" else {}),
            **({"decode": self.decode} if self.decode != "bytes" else {}),
            **({"schema_versions": dict(sorted(self.schema_versions.items()))} if self.schema_versions else {}),
        }

    def to_json(self, run: RunRecord) -> dict[str, Any]:
        """The document a Delta commit or an Iceberg snapshot carries: the marks and the run that made them."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "source": self.source,
            "marks": self.marks_json(),
            **self.extra_json(),
            "run": run.to_json(),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ExportMarks:
        return cls(
            str(doc.get("source")),
            {t: Mark(int(p[0]), int(p[1])) for t, p in doc.get("marks", {}).items()},
            {t: MessageId(int(p[0]), int(p[1]), int(p[2])) for t, p in doc.get("next", {}).items()},
            str(doc.get("mode", "append")),
            str(doc.get("decode", "bytes")),
            {str(t): int(v) for t, v in doc.get("schema_versions", {}).items()},
        )
