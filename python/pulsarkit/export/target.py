"""The one interface every table format of an export implements.

A run of :func:`pulsarkit.export.export` drives a :class:`Target` through the same steps whatever the
format: open it (refuse an output that is not its own), :meth:`~Target.recover` what an interrupted
run left, read its committed :meth:`~Target.marks`, :meth:`~Target.begin` a run, :meth:`~Target.write`
batches (or let Spark tasks write into :attr:`~Target.staging`), then :meth:`~Target.commit` the
staged data files and the new marks together. A format supplies three things: :meth:`Target._open`
(its ownership checks and its committed marks) and :meth:`Target._commit` (its atomic commit point,
recording in the run's journal what it is about to create: :meth:`Target.note_created`).

A run writes nothing outside OUT and nothing through a link (:mod:`.paths`: :meth:`Target.recover`
audits OUT first), and keeps a journal of what its commit creates, so the next run deletes exactly what
an interrupted run left, and a run with nothing new commits nothing.
"""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from .marks import ExportMarks, Mark, MessageId, RunRecord
from .paths import (
    JOURNAL_FILE,
    Journal,
    audit,
    drop_journal,
    drop_staging,
    make_dirs,
    read_journal,
    staging_dirs,
    tree,
    undo,
    write_journal,
)
from .protocol import STAGING, ExportRefused, now_ms, refuse_other_format
from .staging import StagingWriter, partition_values, rows_by_topic, staged_files


@dataclass(frozen=True)
class Commit:
    """What a run committed: its record, rows per topic, and (Parquet) the data files it added."""

    run: RunRecord
    rows: dict[str, int]
    #: relative paths of the data files the commit added, for a target that names them itself (Parquet)
    files: list[str] | None
    staged: int
    #: topics the format cannot write (their partition directory name too long): not committed, marks kept
    skipped: tuple[str, ...] = ()


def optional_package(module: str, to: str) -> Any:
    """``module``, the optional package the ``to`` format needs, imported only when such a target is
    opened (the other commands start without it); refused, naming the extra to install, when missing."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        package = module.split(".")[0]
        raise ExportRefused(f"--to {to} needs the {package} package (pip install 'pulsarkit[{to}]')") from e


class Target(ABC):
    """One export output in one table format (see the module doc for the protocol).

    ``out`` is the output directory (absolute), ``source`` the real path of the data directory the
    marks are positions of. Opening writes nothing and refuses (:class:`ExportRefused`) an output that
    is not an export to this format, unless ``force`` allows writing into a foreign directory; marks of
    another data directory are refused unless ``other_source``. An export of another format is refused before
    :meth:`_open`, ``force`` or not (:func:`.protocol.refuse_other_format`)."""

    #: the ``--to`` name
    name: ClassVar[str]
    #: whether :meth:`_commit` returns the data files it added (Parquet)
    lists_files: ClassVar[bool] = False

    def __init__(self, out: Path, source: str, *, force: bool = False, other_source: bool = False) -> None:
        self.out = out
        self.source = source
        self.committed = ExportMarks(source)
        self.removed_leftovers: list[str] = []
        self._run: str | None = None
        self._engine = ""
        self._writer: StagingWriter | None = None
        #: the id of the last committed run (set by :meth:`_open`): a journal of it is of a run that committed
        self.last_run: str | None = None
        #: ``--mode upsert``: the topics whose committed rows the next commit replaces by its own (a snapshot)
        self.replace: set[str] = set()
        #: ``--mode upsert``: the topics the next commit continues from their marks (its rows: only what changed),
        #: each with the keys a tombstone deleted since
        self.deleted: dict[str, frozenset[str]] = {}
        #: ``--decode schema`` to a table: the decoded rows' columns (:func:`.run.one_table_schema`), what a commit
        #: of no rows still makes the table with
        self.row_schema: pa.Schema | None = None
        #: ``--decode schema`` into a table that exists: the schema its commit writes (the table's own, or evolved to
        #: take a new schema version's rows: :func:`.tabletypes.evolved_schema`); the rows are conformed to it
        self.evolve_to: pa.Schema | None = None
        try:
            #: what a run that did not finish left (its journal), read before the ownership checks: its files are ours
            audit(out)  # before anything is opened in OUT (the Iceberg catalog writes when opened)
            self.journal = read_journal(out)
            refuse_other_format(out, self.name)
            found = self._open(force)
            if found is not None:
                if found.source != source and not other_source:
                    raise ExportRefused(
                        f"{out} holds an export of {found.source}, not {source}; "
                        "pass --other-source if this is the same data moved (ledger ids must be the same)"
                    )
                self.committed = found
        except BaseException:
            self.close()
            raise

    # --------------------------------------------------------------- what a format implements

    @abstractmethod
    def _open(self, force: bool) -> ExportMarks | None:
        """Checks that ``out`` is an export to this format (or absent, or foreign with ``force``) and
        returns its committed marks (``None``: nothing committed yet). Writes nothing."""

    @abstractmethod
    def _commit(self, staged: list[Path], marks: ExportMarks, run: RunRecord) -> list[str] | None:
        """Makes the staged data files and ``marks`` visible in one atomic step (the commit point);
        returns the added data files' paths relative to ``out`` if the format names them (Parquet)."""

    def _unwritable(self, staged: list[Path]) -> set[str]:
        """Topics of the staged files the format cannot write. None by default (Parquet shortens names)."""
        return set()

    def upsert_state(self, topics: list[str]) -> dict[str, pa.Table] | None:
        """``--mode upsert``: the committed rows of ``topics`` as phase one's seed (``key``: the merge key,
        ``ledger_id``, ``entry_id``, ``batch_index``), so that a run continues them from their marks. None: the
        format rewrites a topic's snapshot whole (Parquet), so it reads the topic whole."""
        return None

    def _recover_committed(self) -> None:
        """What a run that committed may have left to finish (Parquet: a replaced upsert snapshot). Nothing here."""

    def own_names(self) -> set[str]:
        """The names directly in OUT that runs of pulsarkit's left (for :func:`.protocol.refuse_foreign`): the
        journal and what it says its run created (``_staging`` only then: one of someone else's makes OUT foreign)."""
        own = {JOURNAL_FILE}
        if self.journal is not None:
            own |= self.journal.owned_top(self.out)
        return own

    def note_created(self, files: list[str], dirs: list[str], *, writer_names_files: bool = False) -> None:
        """Records in the run's journal, before a commit creates them, the files and directories it will
        create (relative to OUT); for a writer that names its files itself, what is there before (:func:`tree`)."""
        if self._run is None or self.journal is None:
            raise RuntimeError("no run begun")
        before = tree(self.out) if writer_names_files else None
        # the staging directories the run made stay listed: recovery removes them by this journal alone
        staging = [d for d in self.journal.dirs if Path(d).parts[0] == STAGING]
        self.journal = Journal(self._run, os.getpid(), files, [*staging, *dirs], before)
        write_journal(self.out, self.journal)

    def close(self) -> None:
        """Releases what the target holds open (a half-written run's files, a catalog connection)."""
        self._close_writer()

    def _close_writer(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()

    def stored_schema(self) -> pa.Schema | None:
        """The committed table's columns as its reader gives them (Delta, Iceberg); None: no table yet, or a format
        without one schema (Parquet: each run's files have their own)."""
        return None

    @property
    def metadata_location(self) -> str | None:
        """What a reader opens for the committed table, if the format has one such file (Iceberg's
        current metadata JSON); ``None`` otherwise."""
        return None

    # --------------------------------------------------------------- the protocol

    def marks(self) -> dict[str, Mark]:
        """The committed high-water mark of each topic."""
        return dict(self.committed.marks)

    def recover(self) -> list[str]:
        """Removes what a run that did not commit left: what its journal lists (or, for a writer that names
        its files, what appeared since the journal), its staging directories among them, nothing else (a
        ``_staging`` no journal names stays). Refuses an OUT with a link where a run writes. Call under the
        output's lock."""
        audit(self.out)
        removed: list[str] = []
        journal = read_journal(self.out)
        if journal is not None:
            if journal.run != self.last_run:  # killed before its commit point: undo what it created
                removed = undo(self.out, journal)
            drop_staging(self.out, journal)  # committed or not, its staging is done with
            drop_journal(self.out)
            self.journal = None
        self._recover_committed()
        self.removed_leftovers = removed
        return self.removed_leftovers

    def begin(self, run: str, engine: str) -> Path:
        """Starts run ``run`` (made by ``engine``); returns its staging directory."""
        self._run, self._engine = run, engine
        # journaled before they exist: from here on, what is in OUT is accounted for
        self.journal = Journal(run, os.getpid(), dirs=staging_dirs(self.out, run))
        write_journal(self.out, self.journal)
        make_dirs(self.out, self.staging.relative_to(self.out))
        return self.staging

    @property
    def staging(self) -> Path:
        """Where the current run's data files go before the commit (Spark tasks write in ``task-<n>/``)."""
        if self._run is None:
            raise RuntimeError("no run begun")
        return self.out / STAGING / self._run

    def write(self, batch: pa.RecordBatch) -> None:
        """Stages a batch of messages (the scan's columns) for the current run."""
        if self._writer is None:
            self._writer = StagingWriter(self.staging)
        self._writer.write(batch)

    def commit(self, marks: dict[str, Mark], next: dict[str, MessageId] | None = None) -> Commit:
        """Commits what the run staged with ``marks`` (and the hand-off positions ``next``) over the
        committed ones, then drops the staging."""
        if self._run is None:
            raise RuntimeError("no run begun")
        self._close_writer()  # the data files complete before they are committed
        staged = staged_files(self.staging)
        skipped = self._unwritable(staged)
        if skipped:  # left out whole, their marks kept: the next run tries them again (and warns again)
            staged = [f for f in staged if partition_values(f)[0] not in skipped]
            marks = {t: m for t, m in marks.items() if t not in skipped}
            next = {t: n for t, n in (next or {}).items() if t not in skipped}
        rows = rows_by_topic(staged)
        run = RunRecord(self._run, now_ms(), self._engine, sum(rows.values()), len(staged))
        new = self.committed.advanced(marks, next)
        if not staged and new == self.committed:  # nothing new since the marks: no empty commit or snapshot
            files: list[str] | None = [] if self.lists_files else None
        else:
            files = self._commit(staged, new, run)
            self.committed = new
            self.last_run = run.run
        if self.journal is not None:  # the staging before the journal: a journal left names what is left
            drop_staging(self.out, self.journal)
        drop_journal(self.out)
        self.journal = None
        return Commit(run, rows, files, len(staged), tuple(sorted(skipped)))
