"""The one interface every table format of an export implements.

A run of :func:`pulsarkit.export.export` drives a :class:`Target` through the same steps whatever the
format: open it (refuse an output that is not its own), :meth:`~Target.recover` what an interrupted
run left, read its committed :meth:`~Target.marks`, :meth:`~Target.begin` a run, :meth:`~Target.write`
batches (or let Spark tasks write into :attr:`~Target.staging`), then :meth:`~Target.commit` the
staged data files and the new marks together. A format supplies three things: :meth:`Target._open`
(its ownership checks and its committed marks), :meth:`Target._commit` (its atomic commit point) and,
when a run can leave visible files behind, :meth:`Target._remove_uncommitted`.
"""

from __future__ import annotations

import importlib
import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from .marks import ExportMarks, Mark, RunRecord
from .protocol import STAGING, ExportRefused, now_ms
from .staging import StagingWriter, rows_by_topic, staged_files


@dataclass(frozen=True)
class Commit:
    """What a run committed: its record, rows per topic, and (Parquet) the data files it added."""

    run: RunRecord
    rows: dict[str, int]
    #: relative paths of the data files the commit added, for a target that names them itself (Parquet)
    files: list[str] | None
    staged: int


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
    another data directory are refused unless ``other_source``."""

    #: the ``--to`` name
    name: ClassVar[str]

    def __init__(self, out: Path, source: str, *, force: bool = False, other_source: bool = False) -> None:
        self.out = out
        self.source = source
        self.committed = ExportMarks(source)
        self.removed_leftovers: list[str] = []
        self._run: str | None = None
        self._engine = ""
        self._writer: StagingWriter | None = None
        try:
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

    def _remove_uncommitted(self) -> list[str]:
        """Deletes what a run that died before its commit left visible in ``out`` (besides staging);
        returns the paths relative to ``out``. Nothing by default: the format's commit leaves nothing."""
        return []

    def close(self) -> None:
        """Releases what the target holds open (a half-written run's files, a catalog connection)."""
        self._close_writer()

    def _close_writer(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()

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
        """Removes what a run that did not commit left: the staging directory, and whatever the format
        lets it leave in place (:meth:`_remove_uncommitted`). Call under the output's lock."""
        shutil.rmtree(self.out / STAGING, ignore_errors=True)
        self.removed_leftovers = self._remove_uncommitted()
        return self.removed_leftovers

    def begin(self, run: str, engine: str) -> Path:
        """Starts run ``run`` (made by ``engine``); returns its staging directory."""
        self._run, self._engine = run, engine
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

    def commit(self, marks: dict[str, Mark]) -> Commit:
        """Commits what the run staged with ``marks`` over the committed ones, then drops the staging."""
        if self._run is None:
            raise RuntimeError("no run begun")
        self._close_writer()  # the data files complete before they are committed
        staged = staged_files(self.staging)
        rows = rows_by_topic(staged)
        run = RunRecord(self._run, now_ms(), self._engine, sum(rows.values()), len(staged))
        new = self.committed.advanced(marks)
        files = self._commit(staged, new, run)
        self.committed = new
        shutil.rmtree(self.out / STAGING, ignore_errors=True)
        return Commit(run, rows, files, len(staged))
