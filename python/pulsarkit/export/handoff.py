"""Backfill and hand-off: an export that stops at an exact position (``--until``, ``--until-time``), and
the position a live consumer continues from (the marks' ``next``).

``--until LEDGER:ENTRY:PARTITION[:BATCH]`` (a message id as Pulsar prints it; ``LEDGER:ENTRY``, an entry) is
inclusive: that message is the last one exported from its topic. Naming a batch index cuts the batch: its
messages up to that index are exported, the rest are not, and the topic's mark stays on the entry before, so
the next run reads the entry again and exports only the messages from the next index on (:func:`cut_rows`).
``--until-time T`` (publish time, inclusive) stops each topic before its first message published after T.

After a run, each topic whose mark moved has ``next`` in the marks (and in the summary): the first
message id after the last exported message, the position a Pulsar reader or consumer (``seek``, or a
reader's start message id, inclusive) starts from so that nothing is lost or read twice. It is the next
batch index inside a cut batch, else the next message the directory holds (entry level, batch index
-1), else the entry after the mark when the topic holds nothing more yet. A real broker starts a Reader at
its start id's entry and the client drops what comes before it (before or up to it, when exclusive); the
Python (C++) and Java clients' Readers started at ``next`` inclusive take over exactly
(``docs/handoff.md``, tested against a real standalone). ``last`` (:func:`last_exported`) is the last
exported message id: after a whole batch it is entry-level, and an exclusive start there reads that batch
again, so it is shown, not the hand-off."""

from __future__ import annotations

import datetime as _dt

import pyarrow as pa

from ..analysis.messages import message_batches, message_topics
from ..broker.topic_name import ml_to_topic
from ..codec.entry import Entry
from ..lazy import deferred
from ..managed_ledger.position import Position
from ..scan import DataDir
from ..scan.records import DataDirError
from .marks import Mark, MessageId

pc = deferred("pyarrow.compute")

#: one topic's batch cut: (ledger, entry, batch index)
Cut = MessageId


def parse_time(text: str) -> int:
    """``--until-time``: epoch milliseconds, or ISO-8601 (a time without a zone is UTC)."""
    t = text.strip()
    if t.isdigit():
        return int(t)
    try:
        d = _dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--until-time is epoch milliseconds or ISO-8601, not {text!r}") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return int(d.timestamp() * 1000)


def _num_messages(dd: DataDir, topic: str, mid: MessageId) -> int:
    """The messages of the entry ``mid`` names; an id that is not an entry of ``topic`` is one line."""
    ml = dd.resolve(topic)
    led = dd.ledgers.get(mid.ledger_id)
    if mid.ledger_id not in dd.ml_ledgers(ml) or led is None or not 0 <= mid.entry_id <= led.last_entry_id:
        raise DataDirError(f"--until {mid}: no such entry in {topic}")
    n = Entry.parse(dd.read_entry(mid.ledger_id, mid.entry_id), verify_checksum=False).num_messages
    if mid.batch_index >= n:
        raise DataDirError(f"--until {mid}: entry {mid.ledger_id}:{mid.entry_id} of {topic} has {n} message(s)")
    return n


def selected_topics(dd: DataDir, topics: list[str] | None) -> list[str]:
    names = [ml for t in topics for ml in dd.expand(t)] if topics else message_topics(dd)
    return sorted({ml_to_topic(dd.resolve(ml)) for ml in names})


def resolve_until(
    dd: DataDir,
    topics: list[str],
    before: dict[str, Mark],
    until: dict[str, MessageId] | None,
    until_time: int | None,
) -> tuple[dict[str, Mark], dict[str, Cut]]:
    """The plan's inclusive bound per topic (``topics``: the run's, full names) and the batches cut
    (topic -> the last exported message of the cut entry)."""
    bounds: dict[str, Mark] = {}
    cuts: dict[str, Cut] = {}
    for name, mid in (until or {}).items():
        if name == "":
            if len(topics) != 1:
                raise DataDirError(f"--until {mid} names no topic: give it as TOPIC={mid} or select one --topic")
            name = topics[0]
        else:
            full = selected_topics(dd, [name])
            if len(full) != 1:
                raise DataDirError(f"--until {name}={mid}: a partitioned topic; name one partition")
            name = full[0]
            if name not in topics:
                raise DataDirError(f"--until {name}={mid}: the topic is not exported by this run")
        n = _num_messages(dd, name, mid)
        bounds[name] = Mark(mid.ledger_id, mid.entry_id)
        if 0 <= mid.batch_index < n - 1:
            cuts[name] = mid
    if until_time is not None:
        for name in topics:
            if name in bounds:
                continue
            after = {name: Position(*before[name])} if name in before else None
            for b in message_batches(dd, [name], after=after):
                late = pc.greater(b.column("publish_time"), pa.scalar(until_time, pa.int64()))
                i = pc.index(late, True).as_py()
                if i >= 0:
                    first = (b.column("ledger_id")[i].as_py(), b.column("entry_id")[i].as_py())
                    bounds[name] = Mark(first[0], first[1] - 1)  # up to the entry before it
                    break
    return bounds, cuts


def cut_rows(batch: pa.RecordBatch, stop: Cut | None, resume: Cut | None) -> pa.RecordBatch:
    """``batch`` (one topic's rows) without the messages of a cut entry beyond ``stop``'s batch index,
    and without those of ``resume``'s entry before its batch index (exported by the run that cut it)."""
    keep = None
    for c, beyond in ((stop, True), (resume, False)):
        if c is None:
            continue
        at = pc.and_(pc.equal(batch.column("ledger_id"), c.ledger_id), pc.equal(batch.column("entry_id"), c.entry_id))
        bi = batch.column("batch_index")
        out = pc.greater(bi, c.batch_index) if beyond else pc.less(bi, c.batch_index)
        drop = pc.and_(at, out)
        keep = pc.invert(drop) if keep is None else pc.and_(keep, pc.invert(drop))
    return batch if keep is None else batch.filter(keep)


def last_exported(mark: Mark, nxt: MessageId) -> MessageId:
    """The last message id a run exported (entry level unless it cut a batch). A Reader started there
    exclusively reads from ``nxt`` on only when that entry is not a batch (a real broker gives a whole batch
    again to an exclusive entry-level start): the hand-off is ``nxt``, inclusive."""
    if nxt.batch_index >= 0:
        return MessageId(nxt.ledger_id, nxt.entry_id, nxt.batch_index - 1)
    return MessageId(mark.ledger_id, mark.entry_id)


def next_ids(dd: DataDir, marks: dict[str, Mark], cuts: dict[str, Cut]) -> dict[str, MessageId]:
    """The hand-off position of each topic of ``marks`` (the marks the run commits)."""
    out: dict[str, MessageId] = {}
    for name, m in marks.items():
        cut = cuts.get(name)
        if cut is not None:
            out[name] = MessageId(cut.ledger_id, cut.entry_id, cut.batch_index + 1)
            continue
        out[name] = MessageId(m.ledger_id, m.entry_id + 1)
        if dd.ml_last_position(dd.resolve(name)) <= Position(*m):
            continue  # the mark is the topic's end (a plain run's usual case): nothing to plan and read
        for b in message_batches(dd, [name], after={name: Position(*m)}):
            if b.num_rows:
                out[name] = MessageId(b.column("ledger_id")[0].as_py(), b.column("entry_id")[0].as_py())
                break
    return out
