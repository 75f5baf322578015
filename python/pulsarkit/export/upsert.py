"""Keyed topics as upsert tables (``export --mode upsert``): each topic's latest message per key, with
Pulsar topic compaction's rules, at the run's position.

The rules are not restated here: the retained messages are those of compaction's phase one, the native
``LatestForKey`` up to the run's mark (:func:`pulsarkit.analysis.compaction.phase_one`, what ``pulsarkit compacted``
and the compactor use), over the topic's compacted view when the mark is at or past the broker's compaction
horizon (so keys whose messages retention trimmed since keep their compacted message), else over the topic's
own entries (the view is the state at the horizon): a message with a null value, or an empty payload, deletes
its key; a message without a key is not retained (compaction's default, ``topicCompactionRetainNullKey=false``).
The rows are the export's own read of the topic, kept only at the retained positions (:func:`keep_retained`),
and, for the retained messages whose ledger retention trimmed after the compaction, the compacted ledger's
copies with their original message ids (:func:`trimmed_rows`, staged by the run itself beside the engine's
rows): the table is what a ``readCompacted`` reader gets. A compacted ledger that cannot give them (gone, an
entry unreadable, a message missing) fails the run naming the topic. A topic trimmed up to ledgers with no
entry has no entry to move its mark: its mark moves to the compaction horizon (:func:`trimmed_marks`). A run up
to a position before the horizon takes the state from the topic's own entries, and says which trimmed ledgers
it misses (:func:`before_trimmed_horizon`).

A first run (and every Parquet run) computes the state of every topic whose mark moved, reading the topic
from its start, and replaces that topic's rows: Parquet writes the new snapshot's files and lists them in the
marks file at the commit point, then deletes the files it replaced (a run that dies in between leaves them,
and the next run deletes them); Delta MERGEs the snapshot by (``topic``, ``key``) in one commit carrying the
marks: a key whose message did not change is not rewritten, a new key is inserted, a deleted key is
deleted; Iceberg, in one catalog commit, deletes the keys no longer in the snapshot and upserts by
(``topic``, ``key``), which rewrites only the rows whose message changed (copy-on-write).

A later Delta or Iceberg run continues each topic from its committed mark (:func:`continued`): phase one
starts from the table's own rows (each key's retained position, :meth:`.target.Target.upsert_state`) and
reads only the topic's entries after the mark, which gives the state a read from the start gives as long as
every entry after the mark is still in the topic (a compaction since changes nothing then: the topic's own
entries are read, not the compacted ledger, which has dropped tombstones). Only the rows after the mark are
read and staged; the MERGE (Delta) or the upsert (Iceberg) writes them and deletes the keys a tombstone
deleted since (:func:`delete_predicate`), leaving the other rows alone. When the mark cannot be trusted (its
ledger trimmed since, unless the mark is at or past the compaction horizon: retention trims only what the
``__compaction`` cursor consumed; past the topic's end, table rows after it, the rows unreadable), the topic is
read from its start and replaced, with a warning saying why. Where the compacted view holds what retention
trimmed after a mark, that is no gap (:func:`view_covers`). A rerun after new messages or a tombstone therefore
changes exactly those keys. Rows decoded with their topic's schema (``--decode schema``) are kept by the same
message key (:func:`merge_key`)."""

from __future__ import annotations

import pyarrow as pa

from ..analysis.compaction import compacted_rows, compacted_topic, phase_one
from ..lazy import deferred
from ..managed_ledger.position import Position
from ..scan import DataDir
from ..scan.records import DataDirError
from .marks import Mark

pc = deferred("pyarrow.compute")

MODES = ("append", "upsert")
#: the targets that take ``--mode upsert``
UPSERT_TARGETS = ("parquet", "delta", "iceberg")

Positions = frozenset[tuple[int, int, int]]


def retained(dd: DataDir, topic: str, until: Mark) -> Positions:
    """The positions (ledger, entry, batch index; -1: an entry taken whole) of ``topic``'s latest message
    per key up to ``until`` (inclusive), tombstoned keys left out: compaction's phase one."""
    if until.entry_id < 0 and until.ledger_id < 0:
        return frozenset()
    # the compacted view is the state at the compaction's horizon (what it superseded up to there is gone):
    # the state at an earlier position is the topic's own entries'
    horizon = dd.topic(topic).compaction_horizon
    view = horizon is None or Position(*until) >= horizon
    r = phase_one(dd, topic, up_to=Position(*until), view=view).retained()
    return frozenset(
        zip(r.column("ledger_id").to_pylist(), r.column("entry_id").to_pylist(), r.column("batch_index").to_pylist())
    )


def trimmed_marks(dd: DataDir, topics: list[str], until: dict[str, Mark], bounds: dict[str, Mark]) -> dict[str, Mark]:
    """The marks of the topics whose compaction horizon is in a ledger retention trimmed since and past the run's
    mark (``until``): the ledgers left hold no entry to move the mark, yet the compacted view holds the state up to
    the horizon, which becomes the mark (not past the topic's ``bounds``, ``--until``)."""
    out: dict[str, Mark] = {}
    for t in topics:
        info = dd.topic(t)
        horizon = info.compaction_horizon
        ids = dd.ml_ledgers(info.managed_ledger)
        if horizon is None or info.compacted_ledger is None or horizon.ledger_id in ids:
            continue
        m = Mark(horizon.ledger_id, horizon.entry_id)
        if m > until.get(t, Mark(-1, -1)) and (t not in bounds or bounds[t] >= m):
            out[t] = m
    return out


def _horizon(dd: DataDir, topic: str) -> Position | None:
    """The topic's compaction horizon when its compacted ledger is in the data (the view holds up to there)."""
    info = dd.topic(topic)
    lid, horizon = info.compacted_ledger, info.compaction_horizon
    return horizon if horizon is not None and lid is not None and int(lid) in dd.ledgers else None


def _past_horizon(dd: DataDir, topic: str, mark: Mark) -> bool:
    horizon = _horizon(dd, topic)
    return horizon is not None and Position(*mark) >= horizon


def view_covers(dd: DataDir, topic: str, mark: Mark) -> bool:
    """Whether the topic's compacted view holds what retention trimmed after ``mark`` (no gap in an upsert table,
    which is that view): the topic compacted at or past ``mark``, its compacted ledger in the data. Retention
    trims only the ledgers every cursor consumed, the ``__compaction`` cursor among them, so whatever it
    trimmed is at or before the horizon."""
    try:
        horizon = _horizon(dd, topic)
    except (DataDirError, KeyError):
        return False  # gone: the gap warnings name it
    return horizon is not None and horizon >= Position(*mark)


def before_trimmed_horizon(dd: DataDir, topic: str, until: Mark) -> str | None:
    """Why the state at ``until`` misses keys, or None: ``until`` is before the compaction horizon, where the state
    is the topic's own entries, and retention trimmed some of them (the compacted ledger holds messages of ledgers
    the topic no longer has): only a run to the horizon or later has them (from the compacted view)."""
    horizon = _horizon(dd, topic)
    if horizon is None or Position(*until) >= horizon:
        return None
    have = set(dd.ml_ledgers(dd.resolve(topic)))
    try:
        gone = sorted(
            {p.ledger_id for p, _ in compacted_topic(dd, topic).compacted_entries() if p.ledger_id not in have}
        )
    except DataDirError as e:
        return f"{topic}: its compacted ledger does not read ({e}): the state at {until[0]}:{until[1]} may miss keys"
    if not gone:
        return None
    return (
        f"{topic}: the state at {until[0]}:{until[1]}, before the compaction horizon {horizon}, misses the keys whose "
        f"latest message was in ledger(s) retention trimmed ({', '.join(map(str, gone))}); a run up to the horizon or "
        "later has them"
    )


def trimmed_rows(dd: DataDir, topic: str, positions: Positions) -> pa.Table | None:
    """The rows of the retained ``positions`` whose ledger retention trimmed (the topic's read has none of them),
    read from the topic's compacted ledger (:func:`pulsarkit.analysis.compaction.compacted_rows`, which fails
    rather than leaves one out); None: every retained position is in the topic's ledgers."""
    have = set(dd.ml_ledgers(dd.resolve(topic)))
    gone = frozenset(p for p in positions if p[0] not in have)
    return compacted_rows(dd, topic, gone) if gone else None


def continued(
    dd: DataDir, before: dict[str, Mark], states: dict[str, pa.Table]
) -> tuple[dict[str, pa.Table], list[str]]:
    """The topics of ``before`` (the committed marks) that this run continues from their mark, with their
    table rows at it (``states``: per topic ``key``, ``ledger_id``, ``entry_id``, ``batch_index``), and why
    the others are read from the start (one warning each; a topic gone from the data is no warning here)."""
    out: dict[str, pa.Table] = {}
    why: list[str] = []
    for topic, mark in sorted(before.items()):
        try:
            ml = dd.resolve(topic)
        except DataDirError:
            continue  # gone: the run's gap warnings name it
        reason = _untrusted(dd, topic, ml, mark, states.get(topic))
        if reason is None:
            out[topic] = states[topic]
        else:
            why.append(
                f"{topic}: upsert read from the start, not continued from its mark {mark[0]}:{mark[1]}: {reason}"
            )
    return out, why


def _untrusted(dd: DataDir, topic: str, ml: str, mark: Mark, state: pa.Table | None) -> str | None:
    if state is None:
        return "its rows in the table could not be read"
    # retention trims only what the ``__compaction`` cursor consumed: after a mark at or past the horizon
    # (the mark a trimmed topic's run commits, :func:`trimmed_marks`) it trimmed nothing
    if mark.ledger_id >= 0 and mark.ledger_id not in dd.ml_ledgers(ml) and not _past_horizon(dd, topic, mark):
        return "its ledger is gone from the topic (trimmed since), so what came after it may be too"
    end = dd.ml_last_position(ml)
    horizon = _horizon(dd, topic)  # the compacted view ends there at least, whatever retention trimmed
    if Position(*mark) > (max(end, horizon) if horizon is not None else end):
        return "it is past the topic's end (not this data's mark?)"
    rows = zip(state.column("ledger_id").to_pylist(), state.column("entry_id").to_pylist())
    if any(p > tuple(mark) for p in rows):
        return "the table holds rows after it"
    return None


def retained_since(
    dd: DataDir, topic: str, after: Mark, until: Mark, state: pa.Table
) -> tuple[Positions, frozenset[str]]:
    """A topic continued from its mark ``after`` up to ``until``: the positions of its latest messages per key
    that come after ``after`` (the rows to read and write), and the keys of ``state`` (the table's rows at
    ``after``) that a tombstone deleted since."""
    r = phase_one(dd, topic, up_to=Position(*until), after=Position(*after), seed=state).retained()
    positions = zip(
        r.column("ledger_id").to_pylist(), r.column("entry_id").to_pylist(), r.column("batch_index").to_pylist()
    )
    new = frozenset(p for p in positions if p[:2] > tuple(after))
    gone = frozenset(set(state.column("key").to_pylist()) - set(r.column("key").to_pylist()))
    return new, gone


#: the columns of an upsert table's rows phase one continues from (:meth:`.target.Target.upsert_state`)
STATE_COLUMNS = ("topic", "key", "ledger_id", "entry_id", "batch_index")


def states_by_topic(rows: pa.Table, topics: list[str]) -> dict[str, pa.Table]:
    """An upsert table's rows (``STATE_COLUMNS``, the merge key named ``key``) per topic of ``topics``."""
    rows = rows.select(list(STATE_COLUMNS))
    return {t: rows.filter(pc.equal(rows.column("topic"), t)).drop_columns(["topic"]) for t in topics}


def keep_retained(batch: pa.RecordBatch, positions: Positions) -> pa.RecordBatch:
    """The rows of ``batch`` at ``positions``."""
    ids = zip(
        batch.column("ledger_id").to_pylist(),
        batch.column("entry_id").to_pylist(),
        batch.column("batch_index").to_pylist(),
    )
    return batch.filter(pa.array([p in positions for p in ids], pa.bool_()))


def merge_key(columns: list[str]) -> str:
    """The column holding the message key a row is kept by: ``key``, or for a ``KEY_VALUE`` topic's decoded rows
    (``--decode schema``, ``key`` the typed key) ``partition_key``, the message's own key, which compaction keys by."""
    return "partition_key" if "partition_key" in columns else "key"


def merge_predicate(topics: set[str]) -> str:
    """The SQL condition naming the topics whose rows a Delta MERGE may delete (the snapshot's topics)."""
    quoted = ", ".join(_quote(t) for t in sorted(topics))
    return f"t.topic IN ({quoted})"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def delete_predicate(replace: set[str], deleted: dict[str, frozenset[str]], key: str) -> str | None:
    """The SQL condition on the rows a Delta MERGE deletes where its source has no row of their key: every
    row of a replaced topic (its snapshot is the source) and the keys a tombstone deleted in a topic
    continued from its mark (the source holds only what changed). None: nothing to delete."""
    parts = [merge_predicate(replace)] if replace else []
    for t, keys in sorted(deleted.items()):
        if keys:
            parts.append(f"(t.topic = {_quote(t)} AND t.{key} IN ({', '.join(_quote(k) for k in sorted(keys))}))")
    return " OR ".join(parts) or None


def changed_predicate() -> str:
    """A matched key is rewritten only when its latest message is another one."""
    return " OR ".join(f"t.{c} <> s.{c}" for c in ("ledger_id", "entry_id", "batch_index"))


__all__ = [
    "before_trimmed_horizon",
    "MODES",
    "UPSERT_TARGETS",
    "changed_predicate",
    "STATE_COLUMNS",
    "continued",
    "delete_predicate",
    "keep_retained",
    "merge_key",
    "merge_predicate",
    "retained",
    "retained_since",
    "states_by_topic",
    "trimmed_marks",
    "view_covers",
    "trimmed_rows",
]
