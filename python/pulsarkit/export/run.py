"""One export run: open the target, lock it, recover, plan from the marks, stage, commit, summarise.

:func:`export` is the same for every target and every engine. The engine only stages the planned
partitions' rows; this process's engine (:class:`LocalEngine`) is the default, and
:mod:`pulsarkit.spark.export` passes Spark's. Which target writes is looked up by name in
:data:`TARGETS`."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from ..analysis.decoded import DECODE_MODES, decode_batch, decoded_schema, topic_schema
from ..analysis.schemas import schema_id
from ..broker.topic_name import ml_to_topic
from ..codec.schema import TopicSchema
from ..scan import DataDir, ScanPartition, ScanPlan, plan_data_dir, read_partition
from ..scan.datadir import DataDirSpec
from ..scan.messages import OnIssue
from ..scan.partition import ReadStats
from ..scan.records import DataDirError, Issue
from .delta import DeltaTarget
from .handoff import Cut, cut_rows, last_exported, next_ids, resolve_until, selected_topics
from .iceberg import IcebergTarget
from .marks import ExportMarks, Mark, MessageId
from .parquet import ParquetTarget
from .protocol import ExportRefused, check_output, export_format, gaps, locked, new_run_id
from .tabletypes import TABLE_FORMATS, Incompatible, evolved_schema, same_schema, table_schema
from .target import Target
from .upsert import (
    MODES,
    UPSERT_TARGETS,
    Positions,
    before_trimmed_horizon,
    continued,
    keep_retained,
    retained,
    retained_since,
    trimmed_marks,
    trimmed_rows,
    view_covers,
)

#: the table formats, by their ``--to`` name
TARGETS: dict[str, type[Target]] = {t.name: t for t in (ParquetTarget, DeltaTarget, IcebergTarget)}


class Reporter(Protocol):
    """Progress of the staging, in planned bytes (``pulsarkit.cli.command.Progress`` is one)."""

    def update(self, done: int, note: str = "") -> None: ...

    def close(self) -> None: ...


class _Silent:
    def update(self, done: int, note: str = "") -> None:
        pass

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class ExportJob:
    """A planned run, what an engine needs to stage it: the scan plan and the bounds per topic."""

    source: str
    plan: ScanPlan
    #: the committed marks (exclusive lower bounds) and the marks this run commits (inclusive upper bounds)
    after: dict[str, Mark]
    until: dict[str, Mark]
    #: what an unreadable entry does: ``fail`` the run, or ``skip`` it
    on_error: str
    max_partition_bytes: int
    #: the data's parts, as the engines open or name them (``source`` is its key)
    spec: DataDirSpec
    #: ``schema``: each topic's rows decoded with its schema (:mod:`pulsarkit.analysis.decoded`), by topic
    schemas: dict[str, TopicSchema] | None = None
    #: batches cut by ``--until LEDGER:ENTRY:PARTITION:BATCH`` (topic -> last message exported), and the cut a
    #: previous run left (topic -> first message still to export); applied by :meth:`rows`
    stop: dict[str, Cut] = dataclasses.field(default_factory=dict)
    resume: dict[str, Cut] = dataclasses.field(default_factory=dict)
    #: ``--mode upsert``: per topic, the positions of its latest message per key (the rows kept)
    latest: dict[str, Positions] | None = None

    @property
    def planned_bytes(self) -> int:
        return sum(p.bytes for p in self.plan.partitions)

    def rows(self) -> RowRules:
        """What makes the planned partitions' batches this run's rows, in any engine."""
        return RowRules(self.on_error, self.stop, self.resume, self.latest, self.schemas)


@dataclass(frozen=True)
class RowRules:
    """A planned partition's batches made the export's rows, the same in every engine (a Spark task gets a copy,
    :meth:`only`): read with ``on_error``, cut at a batch (``stop``: up to the last message exported; ``resume``:
    from the first one still to export), kept at upsert's retained positions (``latest``), decoded with the topic's
    schema (``schemas``)."""

    on_error: str
    stop: dict[str, Cut]
    resume: dict[str, Cut]
    latest: dict[str, Positions] | None
    schemas: dict[str, TopicSchema] | None
    #: batches read ahead by a thread (None: the read's default; a Spark task, whose cores are busy: 0)
    prefetch: int | None = None
    #: threads a batch is decompressed on (None: the read's default; a Spark task: 1)
    threads: int | None = None

    def only(self, topics: set[str]) -> RowRules:
        """These rules for ``topics`` alone (what one task reads)."""
        return RowRules(
            self.on_error,
            {t: c for t, c in self.stop.items() if t in topics},
            {t: c for t, c in self.resume.items() if t in topics},
            {t: k for t, k in self.latest.items() if t in topics} if self.latest is not None else None,
            {t: s for t, s in self.schemas.items() if t in topics} if self.schemas is not None else None,
            self.prefetch,
            self.threads,
        )

    def batches(self, part: ScanPartition, found: ReadIssues) -> Iterator[pa.RecordBatch]:
        """``part``'s rows, in batches (none empty); its read's issues added to ``found``."""
        topic = part.topic or ""
        stop, resume = self.stop.get(topic), self.resume.get(topic)
        latest = self.latest.get(topic, frozenset()) if self.latest is not None else None
        for b in read_part(part, self.on_error, found, self.prefetch, self.threads):
            b = cut_rows(b, stop, resume) if stop or resume else b
            b = keep_retained(b, latest) if latest is not None else b
            if not b.num_rows:
                continue
            yield decode_batch(b, self.schemas[topic]) if self.schemas is not None else b


@dataclass
class ReadIssues:
    """What the staging's reads could not give rows for: each issue (a run of missing entries is one)
    as the line ``pulsarkit messages`` warns with, and the entries left out."""

    issues: list[str]
    unreadable_entries: int = 0

    def add(self, other: ReadIssues) -> None:
        self.issues += other.issues
        self.unreadable_entries += other.unreadable_entries


def read_part(
    part: ScanPartition, on_error: str, found: ReadIssues, prefetch: int | None = None, threads: int | None = None
) -> Iterator[Any]:
    """One partition's batches, as every engine reads them, its issues (and the entries with no rows)
    added to ``found``: a skipped entry is never silently missing from an export. ``prefetch`` and ``threads``:
    as :func:`~pulsarkit.scan.read.read_partition`'s."""
    stats = ReadStats()
    on_issue = _collector(found.issues, part)
    yield from read_partition(
        part, on_error=on_error, stats=stats, on_issue=on_issue, prefetch=prefetch, threads=threads
    )
    found.unreadable_entries += stats.unreadable_entries


def _collector(issues: list[str], part: ScanPartition) -> OnIssue:
    def issue(found: Issue, /) -> None:
        issues.append(str(dataclasses.replace(found, path=found.path or part.topic or "?")))

    return issue


class Engine(Protocol):
    """What stages a planned run's rows into the target: :meth:`Target.write` in this process, or data
    files written into :attr:`Target.staging` by other processes. Returns the reads' issues (None: the
    engine cannot collect them, and says so in a warning). ``rules``: whether its rows are
    :meth:`ExportJob.rows`' (decoded, cut, upsert's): an engine without them runs none of those."""

    name: str
    rules: bool

    def stage(self, job: ExportJob, target: Target, progress: Reporter) -> ReadIssues | None: ...


class LocalEngine:
    """Decodes the planned partitions in this process with the native kernels."""

    name = "local"
    rules = True

    def stage(self, job: ExportJob, target: Target, progress: Reporter) -> ReadIssues:
        done = 0
        found = ReadIssues([])
        rows = job.rows()
        for task in job.plan.tasks():
            for part in task:
                for b in rows.batches(part, found):
                    target.write(b)
                done += part.bytes
                progress.update(done, part.topic or "")
        return found


def local_engine(job: ExportJob) -> Engine:
    return LocalEngine()


@dataclass(frozen=True)
class TopicSummary:
    rows: int
    #: the mark the run started after (``None``: the topic's first run) and the one it committed
    after: Mark | None
    until: Mark
    #: the hand-off: the first message id after the last one exported (what a live consumer starts from)
    next: MessageId | None = None


@dataclass(frozen=True)
class ExportSummary:
    """What a run did. :meth:`to_json` is ``pulsarkit export --json``'s document."""

    data_dir: str
    output: str
    to: str
    engine: str
    run: str
    rows: int
    #: the data files the run added (Parquet: their paths relative to ``output``; Delta, Iceberg: how many)
    files: list[str] | int
    #: topics with new marks or rows
    topics: dict[str, TopicSummary]
    removed_leftovers: list[str]
    warnings: list[str]
    #: what the plan and the reads could not read (each a line; a run of missing entries is one)
    issues: list[str]
    #: entries that gave no rows (``skip_unreadable``; a run no bookie holds counts all its entries)
    unreadable_entries: int
    #: Iceberg: the current metadata JSON (what any Iceberg reader opens)
    metadata: str | None
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "data_dir": self.data_dir,
            "output": self.output,
            "to": self.to,
            "engine": self.engine,
            "run": self.run,
            "rows": self.rows,
            "files": self.files,
            "topics": {
                t: {
                    "rows": s.rows,
                    "after": list(s.after) if s.after is not None else None,
                    "until": list(s.until),
                    **(
                        {"next": str(s.next), "last": str(last_exported(s.until, s.next))} if s.next is not None else {}
                    ),
                }
                for t, s in self.topics.items()
            },
            "removed_leftovers": self.removed_leftovers,
            "warnings": self.warnings,
            "issues": self.issues,
            "unreadable_entries": self.unreadable_entries,
            **({"metadata": self.metadata} if self.metadata is not None else {}),
            "seconds": self.seconds,
        }


def _resolve(dd: DataDir, topics: list[str]) -> list[str]:
    """Full topic names (``orders`` -> ``persistent://public/default/orders``, a partitioned topic -> its
    partitions); an unknown topic is an error before anything is written."""
    return sorted({ml_to_topic(ml) for t in topics for ml in dd.expand(t)})


def log_to_stderr(msg: str) -> None:
    """The default ``log``: one line on stderr."""
    print(f"pulsarkit export: {msg}", file=sys.stderr)


def export(
    data_dir: str | DataDirSpec,
    to: str,
    out: str,
    *,
    topics: list[str] | None = None,
    force: bool = False,
    other_source: bool = False,
    skip_unreadable: bool = False,
    max_partition_bytes: int = 64 << 20,
    ledger_dirs: list[str] | None = None,
    engine: Callable[[ExportJob], Engine] = local_engine,
    progress: Callable[[int], Reporter] | None = None,
    log: Callable[[str], None] | None = None,
    until: dict[str, MessageId] | None = None,
    until_time: int | None = None,
    mode: str = "append",
    decode: str = "bytes",
) -> ExportSummary:
    """Exports the messages of ``data_dir`` added since the last run into ``out``, a ``to`` export
    (``parquet``, ``delta``, ``iceberg``: see :mod:`pulsarkit.export`); returns the run's summary.
    ``data_dir`` is a standalone's directory or a :class:`~pulsarkit.scan.DataDirSpec` (a cluster: its
    ZooKeeper or RocksDB metadata and bookie directories); the export's marks are kept under its key.

    ``topics``: only these (short names and partitioned topics expand), each keeping its own mark.
    ``force``: write into an existing directory that is not an export; ``other_source``: continue an
    export made from another path of the same data. ``skip_unreadable``: skip an unreadable entry
    instead of failing the run. ``ledger_dirs``: the bookie directories of a cluster whose metadata
    store is ``data_dir``'s (each entry read once, from the first copy of its write set that
    verifies). ``engine`` picks, once the run is planned, what stages its rows (default: this
    process). ``progress`` makes a reporter given the planned bytes; ``log`` takes the notes and
    warnings (default: stderr). ``decode="schema"`` writes each topic's rows decoded with its schema
    (typed ``key``/``value``, ``schema_version``, ``decode_error``: :mod:`pulsarkit.analysis.decoded`), its
    files with that topic's table schema (the local and ``spark`` engines). A Delta or Iceberg export is one table: its
    topics must decode to one table schema (:func:`one_table_schema`), stored with :mod:`.tabletypes`' rules, which
    evolves with their new schema versions (:func:`evolution`).
    The export is private: the process umask is 077 while the run writes
    (it is the process's, so other threads writing meanwhile create private files too)."""
    t0 = time.perf_counter()
    target_class = TARGETS.get(to)
    if target_class is None:
        raise DataDirError(f"--to must be one of {', '.join(TARGETS)}, not {to!r}")
    if mode not in MODES or (mode == "upsert" and to not in UPSERT_TARGETS):
        raise DataDirError(f"--mode must be one of {', '.join(MODES)} (upsert: --to {' or '.join(UPSERT_TARGETS)})")
    if decode not in DECODE_MODES:
        raise DataDirError(f"--decode must be one of {', '.join(DECODE_MODES)}, not {decode!r}")
    log = log or log_to_stderr
    if isinstance(data_dir, DataDirSpec):
        if ledger_dirs:
            raise DataDirError("ledger_dirs go into the DataDirSpec")
        spec = data_dir
    else:
        spec = DataDirSpec.of(data_dir, ledger_dirs=ledger_dirs)
    root = Path(out).absolute()
    check_output(spec.inputs(), out, root)
    # an export is private as the other outputs are: 0700 directories, 0600 files, whoever writes them
    # in this process (pyarrow, delta-rs, pyiceberg); the umask is the process's, restored at the end
    umask = os.umask(0o077)
    try:
        with _writable(out):
            return _export(
                spec, to, root, target_class, topics, force, other_source, skip_unreadable,
                max_partition_bytes, engine, progress, log, t0, until, until_time, mode, decode,
            )  # fmt: skip
    finally:
        os.umask(umask)


@contextlib.contextmanager
def _writable(out: str) -> Iterator[None]:
    """A target the user may not read or write (or on a read-only file system) is one line naming it."""
    try:
        yield
    except OSError as e:
        where = os.path.abspath(e.filename) if isinstance(e.filename, str) else os.path.abspath(out)
        # the output, what is in it, or a directory on the way to it; not, say, the data directory
        inside = os.path.commonpath([where, os.path.abspath(out)]) in (where, os.path.abspath(out))
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS) or not (inside or e.filename is None):
            raise
        why = "read-only file system" if e.errno == errno.EROFS else "permission denied"
        raise ExportRefused(f"{out}: cannot export there: {where}: {why}", str(where)) from None


def _export(
    spec: DataDirSpec,
    to: str,
    root: Path,
    target_class: type[Target],
    topics: list[str] | None,
    force: bool,
    other_source: bool,
    skip_unreadable: bool,
    max_partition_bytes: int,
    engine: Callable[[ExportJob], Engine],
    progress: Callable[[int], Reporter] | None,
    log: Callable[[str], None],
    t0: float,
    until_ids: dict[str, MessageId] | None = None,
    until_time: int | None = None,
    mode: str = "append",
    decode: str = "bytes",
) -> ExportSummary:
    source = spec.key
    target = target_class(root, source, force=force, other_source=other_source)
    with contextlib.closing(target):
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with locked(root):
            removed = target.recover()
            if removed:
                log(f"removed {len(removed)} file(s) of a run that did not commit")
            before = target.marks()
            if before and target.committed.mode != mode:
                raise ExportRefused(f"{root} is an export in mode {target.committed.mode}, not {mode}")
            if before and target.committed.decode != decode:
                raise ExportRefused(f"{root} is an export with --decode {target.committed.decode}, not {decode}")
            target.committed = dataclasses.replace(target.committed, mode=mode, decode=decode)
            # the topics resolved and the read planned on one open of the directory (each open reads the
            # metadata store and every bookie's location index again)
            with spec.open() as dd:
                filters = [("topic", "in", frozenset(_resolve(dd, topics)))] if topics else []
                bounds: dict[str, Mark] = {}
                stop: dict[str, Cut] = {}
                if until_ids or until_time is not None:
                    bounds, stop = resolve_until(dd, selected_topics(dd, topics), before, until_ids, until_time)
                # upsert: a topic continued from its mark reads what came since; another is read whole, its
                # snapshot made again (only the topics whose mark moved)
                going_on: dict[str, pa.Table] = {}
                upsert_notes: list[str] = []
                ours = {t: m for t, m in before.items() if not filters or t in filters[0][2]}  # this run's topics
                if mode == "upsert" and ours:
                    states = target.upsert_state(sorted(ours))
                    if states is not None:
                        going_on, upsert_notes = continued(dd, ours, states)
                p = plan_data_dir(
                    dd,
                    source,
                    after=dict(before) if mode == "append" else {t: before[t] for t in going_on},
                    until=bounds or None,
                    filters=filters,
                    max_partition_bytes=max_partition_bytes,
                )
                until = {t: Mark(*m) for t, m in p.marks.get(source, {}).items()}
                # upsert reads from the start: an --until before the committed mark leaves the snapshot as it is
                until = {t: max(m, before[t]) if t in before else m for t, m in until.items()}
                if mode == "upsert":  # a compacted topic trimmed up to ledgers with no entry: its view still moves
                    until.update(trimmed_marks(dd, selected_topics(dd, topics), until, bounds))
                # a batch cut only where the plan reaches the cut entry (an open transaction may stop it before)
                stop = {t: c for t, c in stop.items() if until.get(t) == (c.ledger_id, c.entry_id)}
                # a cut entry's mark stays on the entry before: the next run reads it again, from the cut on
                until.update({t: Mark(c.ledger_id, c.entry_id - 1) for t, c in stop.items()})
                resume = {
                    t: n
                    for t, n in target.committed.next.items()
                    if n.batch_index >= 0 and before.get(t) == (n.ledger_id, n.entry_id - 1)
                }
                moved = {t: m for t, m in until.items() if before.get(t) != m or t in stop}
                handoff = next_ids(dd, moved, stop)
                latest = None
                #: upsert: per topic, the rows of its retained messages whose ledger retention trimmed, read from
                #: its compacted ledger here (the engines read the topic's ledgers); staged by the run itself
                from_compacted: dict[str, pa.Table] = {}
                if mode == "upsert":
                    if stop or resume:
                        raise DataDirError("--mode upsert takes --until LEDGER:ENTRY without a batch index")
                    latest = {}
                    for t, m in moved.items():
                        if t in going_on:
                            latest[t], target.deleted[t] = retained_since(dd, t, before[t], m, going_on[t])
                        else:
                            latest[t] = retained(dd, t, m)
                            short = before_trimmed_horizon(dd, t, m)
                            if short is not None:
                                upsert_notes.append(short)
                            rows = trimmed_rows(dd, t, latest[t])
                            if rows is not None:
                                from_compacted[t] = rows
                    p = dataclasses.replace(p, partitions=[x for x in p.partitions if x.topic in latest])
                    target.replace = set(latest) - set(going_on)
                # a mark whose ledger retention trimmed is a gap, unless the upsert table is the compacted view
                # that holds what was trimmed
                unseen = {t: m for t, m in before.items() if mode != "upsert" or not view_covers(dd, t, m)}
                schemas = None
                if decode == "schema":  # each topic's history read once, here (the directory is open)
                    # the topics read and those whose mark moves (a run of markers only has no rows, yet
                    # a first commit makes the table: its schema is the decoded one even then)
                    read = {part.topic or "" for part in p.partitions} | set(moved)
                    schemas = {t: topic_schema(dd, t) for t in read}
                    if to in TABLE_FORMATS:
                        target.row_schema = one_table_schema(schemas, to)
                        target.evolve_to = evolution(target, schemas, to)
                    versions = {t: s.newest.version for t, s in schemas.items() if s.newest.version is not None}
                    target.committed = dataclasses.replace(
                        target.committed, schema_versions={**target.committed.schema_versions, **versions}
                    )
            for issue in p.issues:
                log(f"warning: {issue}")
            warnings = [*upsert_notes, *gaps(unseen, p.topic_ledgers.get(source, {}))]
            for w in warnings:
                log(f"warning: {w}")
            advanced = {t for t, m in until.items() if before.get(t) != m}
            on_error = "skip" if skip_unreadable else "fail"
            job = ExportJob(
                source, p, before, until, on_error, max_partition_bytes, spec, schemas,
                stop=stop, resume=resume, latest=latest,
            )  # fmt: skip
            chosen = engine(job)
            if (schemas is not None or stop or resume or latest is not None) and not chosen.rules:
                # the engine reads through the Spark data source, which has none of these (spark-sql)
                raise DataDirError(
                    "--decode schema, --mode upsert and a batch cut (--until with a batch index) need --engine local "
                    f"or spark, not {chosen.name}"
                )
            log(
                f"{len(p.partitions)} partition(s), about {job.planned_bytes} bytes, {len(advanced)} topic(s) with "
                f"new entries; engine {chosen.name}"
            )
            run_id = new_run_id()
            target.begin(run_id, chosen.name)
            reporter = progress(job.planned_bytes) if progress is not None else _Silent()
            try:
                found = chosen.stage(job, target, reporter)
                for t, rows in sorted(from_compacted.items()):
                    for b in rows.to_batches():
                        target.write(decode_batch(b, schemas[t]) if schemas is not None else b)
            finally:
                reporter.close()
            if found is None:
                found = ReadIssues([])
                w = f"engine {chosen.name} does not report unreadable entries; the executors' logs name them"
                log(f"warning: {w}")
                warnings.append(w)
            for issue in found.issues:
                log(f"warning: {issue}")
            commit = target.commit(until, handoff)
            for t in commit.skipped:
                w = (
                    f"topic {t!r} not exported: its partition directory name is longer than a file name may be, "
                    f"and the {to} writer cannot shorten it; its mark is kept (--to parquet shortens such names)"
                )
                log(f"warning: {w}")
                warnings.append(w)
            for t, kept in (latest or {}).items():
                if t not in commit.skipped and commit.rows.get(t, 0) < len(kept):
                    # a key's latest message that gave no row (an entry skipped as unreadable, a transaction's
                    # message read-committed left out): never silently
                    w = f"{t}: {len(kept) - commit.rows.get(t, 0)} key(s) whose latest message was not read are missing"
                    log(f"warning: {w}")
                    warnings.append(w)
    return ExportSummary(
        data_dir=source,
        output=str(root),
        to=to,
        engine=chosen.name,
        run=run_id,
        rows=commit.run.rows,
        files=commit.files if commit.files is not None else commit.staged,
        topics={
            t: TopicSummary(commit.rows.get(t, 0), before.get(t), m, handoff.get(t))
            for t, m in sorted(until.items())
            if (t in advanced or commit.rows.get(t)) and t not in commit.skipped
        },
        removed_leftovers=target.removed_leftovers,
        warnings=warnings,
        issues=[*p.issues, *found.issues],
        unreadable_entries=found.unreadable_entries,
        metadata=target.metadata_location,
        seconds=round(time.perf_counter() - t0, 3),
    )


def one_table_schema(schemas: dict[str, TopicSchema], to: str) -> pa.Schema | None:
    """A Delta or Iceberg export is one table, of one schema: the topics of a ``--decode schema`` run must decode
    to one table schema (a partitioned topic's partitions do), each stored as the format can
    (:mod:`.tabletypes`); else refused before anything is written, naming two topics of different schemas.
    Returns the decoded rows' columns as the table has them (``topic`` first, ``date`` last; None: no topic)."""
    found: dict[pa.Schema, str] = {}
    for t in sorted(schemas):
        found.setdefault(table_schema(decoded_schema(schemas[t]), to), t)
    if len(found) > 1:
        a, b = sorted(found.values())[:2]
        raise ExportRefused(
            f"--decode schema --to {to} writes one table of one schema, and {a} and {b} decode to different ones: "
            "export each topic (--topic) into its own OUT"
        )
    if not found:
        return None
    rows = decoded_schema(schemas[next(iter(found.values()))])
    return pa.schema([rows.field("topic"), *(f for f in rows if f.name != "topic"), pa.field("date", pa.string())])


def evolution(target: Target, schemas: dict[str, TopicSchema], to: str) -> pa.Schema | None:
    """The schema the table in ``target`` takes this run's decoded rows in (None: no table yet): its own, or evolved
    by :func:`.tabletypes.evolved_schema` when a topic's newest schema version changed since the table was written.
    Only a schema the table's topics already have evolves it (another topic's rows of another schema are refused:
    one table, one schema), and a change it cannot make is refused naming both schema versions and the column."""
    stored = target.stored_schema()
    if stored is None or target.row_schema is None:
        return None
    new = table_schema(target.row_schema, to)
    if same_schema(stored, new):
        return evolved_schema(stored, new, to)  # the table's own (its column order, as its reader gives it)
    table_ids = {schema_id(t) for t in target.committed.marks}
    others = sorted(t for t in schemas if schema_id(t) not in table_ids)
    if others:
        raise ExportRefused(
            f"{target.out}: the rows of {others[0]} do not fit the {to} table's schema, which is of other topics' "
            "schema (one table, one schema; only a topic's own new schema versions evolve it): export them into "
            "another OUT"
        )
    was = target.committed.schema_versions
    # the topic whose version moved (any of the run's when the table's record of versions is older than it)
    topic = next((t for t in sorted(schemas) if was.get(t) != schemas[t].newest.version), min(schemas))
    before = f"schema version {was[topic]}" if topic in was else "an earlier schema version"
    try:
        return evolved_schema(stored, new, to)
    except Incompatible as e:
        raise ExportRefused(
            f"{target.out}: {topic}'s schema version {schemas[topic].newest.version} does not evolve the {to} "
            f"table written with its {before}: {e}; export it into another OUT"
        ) from None


def committed_marks(out: str) -> tuple[str, ExportMarks]:
    """The format and the committed marks of the export in ``out`` (``pulsarkit export-marks``): each
    topic's mark and hand-off position (``next``), read as the next run would, writing nothing."""
    root = Path(out).absolute()
    found = export_format(root)
    if found is None:
        raise ExportRefused(f"{out} is not a pulsarkit export")
    to = found[0]
    target = TARGETS[to](root, "", other_source=True)
    with contextlib.closing(target):
        return to, target.committed
