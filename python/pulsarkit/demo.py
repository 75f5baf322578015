"""The main job on an embedded default.

It builds a Pulsar-standalone-like data directory (metadata store + one bookie) with several topics
published through the broker's publish path (PIP-6 dedup, PIP-70 broker timestamp and index), in
every codec, with subscriptions that consumed part of each backlog; applies TTL and retention; then
reads the bookie back *without a broker* — through Spark (local mode) by default, or Arrow alone
with ``--engine arrow`` — and reports what it found: per topic, what was produced, deleted by
retention, still stored, and read back; entries of deleted ledgers still awaiting bookie GC; the
dedup audit and the clock-skew report.

``python -m pulsarkit.demo [--data DIR [--overwrite]] [--engine spark|arrow] [--json]``

Without ``--data`` the directory is a private temporary one, removed at the end. ``--data DIR``
keeps it: DIR must be new, empty, or a directory an earlier demo made (marked by a
``.pulsarkit-demo`` file, which lists the files the run wrote), which only ``--overwrite`` replaces;
anything else is refused, never deleted, and so is an earlier demo's directory that holds a file the
demo did not write.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from . import bulk
from .analysis import audit
from .bookkeeper.entrylog import scan_entry_logs
from .broker.expiry import apply_ttl
from .broker.interceptors import INDEX_INTERCEPTOR, TIMESTAMP_INTERCEPTOR
from .broker.topic import PersistentTopic
from .codec.entry import Entry, encode_batch, encode_entry, message_metadata
from .export.paths import UnsafePath, check_below, remove_own_empty_dir, remove_own_file
from .lazy import deferred
from .managed_ledger import ManagedLedgerConfig, Store
from .managed_ledger.trim import apply_retention
from .spark import audit as saudit
from .spark import local_session, read_entries, read_messages

pc = deferred("pyarrow.compute")

MINUTE = 60_000
TOPICS = [  # (topic, codec, batch sizes, retention minutes, retention MB, ttl seconds)
    ("public/default/persistent/orders", "ZSTD", [10, 50], 30, -1, 0),
    ("public/default/persistent/payments", "LZ4", [5, 10], -1, -1, 0),
    ("public/default/persistent/clicks", "SNAPPY", [20, 100], 0, 0, 0),
    ("public/default/persistent/inventory", "ZLIB", [1, 5], -1, 1, 0),
    ("public/default/persistent/audit-log", "NONE", [1], 0, 0, 1800),
]


class _Clock:
    """The demo's broker clock: starts two hours ago and advances as messages are produced."""

    def __init__(self) -> None:
        self.t = int(time.time() * 1000) - 120 * MINUTE

    def __call__(self) -> int:
        return self.t


def build(data: str, seed: int = 7, entries_per_topic: int = 300, log: Any = None) -> dict[str, Any]:
    """Writes the embedded data directory and returns what was produced and what the lifecycle did."""
    rng = random.Random(seed)
    clock = _Clock()
    produced: dict[str, dict[str, Any]] = {}
    with Store.open(data, clock=clock, sync=False, log_size_limit=1 << 20) as store:
        for name, codec, sizes, ret_min, ret_mb, ttl in TOPICS:
            clock.t = int(time.time() * 1000) - 120 * MINUTE
            cfg = ManagedLedgerConfig(max_entries_per_ledger=40, minimum_rollover_time_ms=0, clock=clock)
            topic = PersistentTopic(
                store.managed_ledger(name, cfg),
                interceptors=[TIMESTAMP_INTERCEPTOR, INDEX_INTERCEPTOR],
                deduplication=True,
                clock=clock,
            )
            sub = topic.ml.open_cursor("analytics", initial_position="earliest")
            stats: Counter[str] = Counter()
            seq = {f"{name.rsplit('/', 1)[1]}-producer-{p}": 0 for p in range(2)}
            skewed = f"{name.rsplit('/', 1)[1]}-producer-1"
            for i in range(entries_per_topic):
                clock.t += rng.randrange(5_000, 30_000)
                producer = rng.choice(sorted(seq))
                n = rng.choice(sizes)
                s0 = seq[producer]
                # producer-1's clock runs 3 minutes fast: the broker timestamp keeps seeks honest.
                publish = clock.t + (180_000 if producer == skewed else 0)
                msgs: list[dict[str, Any]] = [
                    {
                        "payload": json.dumps({"topic": name, "n": s0 + k, "v": rng.random()}).encode(),
                        "key": f"key-{rng.randrange(20)}",
                        "sequence_id": s0 + k,
                        "event_time": publish - 5,
                    }
                    for k in range(n)
                ]
                md = message_metadata(producer, s0, publish)
                if n == 1:
                    md.partition_key, md.event_time = msgs[0]["key"], msgs[0]["event_time"]
                    raw = encode_entry(md, msgs[0]["payload"], compression=None if codec == "NONE" else codec)
                else:
                    raw = encode_batch(md, msgs, compression=codec)
                r = topic.publish(raw, producer, s0, s0 + n - 1, num_messages=n)
                stats[r.status] += 1
                stats["messages"] += n if r.status == "OK" else 0
                if r.status == "OK" and rng.random() < 0.03:  # a lost receipt: the producer resends
                    stats["resend_" + topic.publish(raw, producer, s0, s0 + n - 1, num_messages=n).status] += 1
                seq[producer] += n
                # The broker's periodic dedup snapshot (every 120 s): it also moves the
                # pulsar.dedup cursor, which otherwise holds back retention.
                topic.deduplication.take_snapshot_if_due()
            # The subscription consumed about two thirds of the backlog.
            first = topic.ml.first_position
            assert first is not None  # the topic has just been written
            entries = topic.ml.read(first, 10**9)
            sub.mark_delete(entries[int(len(entries) * 2 / 3)][0])
            before = topic.ml.ledgers()
            ttl_result = apply_ttl(topic.ml, ttl, now_ms=clock.t) if ttl else []
            trim = apply_retention(topic.ml, ret_min, ret_mb, now_ms=clock.t)
            produced[name] = {
                "codec": codec,
                "entries": len(entries),
                "messages": stats["messages"],
                "publish": dict(stats),
                "ledgers_before": len(before),
                "ledgers_deleted": trim.deleted_ids,
                "retention": {"minutes": ret_min, "mb": ret_mb},
                "ttl_seconds": ttl,
                "ttl_expired_entries": sum(r.expired_entries for r in ttl_result),
                "entries_after_retention": sum(li.entries for li in topic.ml.ledgers()),
                "messages_after_retention": _messages_in(topic.ml),
                "last_index": topic.index,
                "last_sequence_ids": {p: topic.last_sequence_id(p) for p in seq},
            }
            if log:
                print(
                    f"  built {name}: {len(entries)} entries, {len(before)} ledgers, "
                    f"{len(trim.deleted_ids)} deleted by retention",
                    file=log,
                )
            topic.close()
        owners = {
            lid: store.ledger_owner(lid)
            for name in produced
            for lid in [li.ledger_id for li in store.managed_ledger(name).ledgers()]
        }
        for name in produced:
            store.managed_ledger(name).close()
        store.flush()
    return {"produced": produced, "owners": owners}


def _messages_in(ml: Any) -> int:
    first = ml.first_position
    if first is None:
        return 0
    return sum(Entry.parse(d, verify_checksum=False).num_messages for _, d in ml.read(first, 10**9))


def read_back_spark(current: str) -> tuple[list[dict[str, Any]], dict[str, Any], Any]:
    from pyspark.sql import functions as F

    spark = local_session(2, "pulsarkit-demo")
    try:
        msgs = read_messages(spark, current)
        per_ledger = [r.asDict() for r in msgs.groupBy("ledger_id").count().collect()]
        entries = read_entries(spark, current).where("issue IS NULL")
        _, summary = saudit.dedup_audit(entries.select("ledger_id", "entry_id", F.col("payload").alias("entry")))
        audit_rows = [r.asDict() for r in summary.collect()]
        logs = entries.select("log_id").distinct().count()
        issues = read_entries(spark, current).where("issue IS NOT NULL").count()
        return per_ledger, {"audit": audit_rows, "entry_logs": logs, "issues": issues}, None
    finally:
        spark.stop()


def summarise(built: dict[str, Any], per_ledger_counts: dict[int, int], extra: dict[str, Any]) -> dict[str, Any]:
    produced, owners = built["produced"], built["owners"]
    read_by_topic: Counter[str] = Counter()
    orphan_messages = 0
    for lid, n in per_ledger_counts.items():
        owner = owners.get(lid)
        if owner is None:
            orphan_messages += n
        else:
            read_by_topic[owner] += n
    topics = {}
    for name, p in produced.items():
        topics[name] = {
            **p,
            "messages_read_back": read_by_topic[name],
            "read_back_matches_metadata": read_by_topic[name] == p["messages_after_retention"],
        }
    return {
        "topics": topics,
        "messages_of_deleted_ledgers_awaiting_gc": orphan_messages,
        "all_match": all(t["read_back_matches_metadata"] for t in topics.values()),
        **extra,
    }


def render(s: dict[str, Any], out: Any = sys.stdout) -> None:
    print(
        f"\npulsarkit demo: {len(s['topics'])} topics written through the broker publish path, lifecycle applied, "
        f"bookie read back with {s['engine']}",
        file=out,
    )
    print(
        f"  data directory: {s['data']}  ({s.get('entry_logs', '?')} entry logs, {s.get('issues', 0)} scan issues)",
        file=out,
    )
    hdr = (
        f"  {'topic':<22}{'codec':<8}{'entries':>8}{'msgs':>7}{'dups':>6}{'ledgers':>8}{'deleted':>8}{'ttl exp':>8}"
        f"{'left':>7}{'read':>7}  ok"
    )
    print(hdr, file=out)
    for name, t in s["topics"].items():
        print(
            f"  {name.rsplit('/', 1)[1]:<22}{t['codec']:<8}{t['entries']:>8}{t['messages']:>7}"
            f"{t['publish'].get('resend_DUPLICATE', 0):>6}{t['ledgers_before']:>8}{len(t['ledgers_deleted']):>8}"
            f"{t['ttl_expired_entries']:>8}{t['messages_after_retention']:>7}{t['messages_read_back']:>7}  "
            f"{'yes' if t['read_back_matches_metadata'] else 'NO'}",
            file=out,
        )
    print(
        "  messages in deleted ledgers, still in entry logs until bookie GC: "
        f"{s['messages_of_deleted_ledgers_awaiting_gc']}",
        file=out,
    )
    if s.get("audit"):
        dups = sum(r["duplicate_messages"] for r in s["audit"])
        gaps = sum(r["gaps"] for r in s["audit"])
        print(
            f"  dedup audit over the bookie: {len(s['audit'])} producers, {dups} persisted duplicates, {gaps} gaps",
            file=out,
        )
    print(f"  read back in {s['read_seconds']} s; every topic matches its metadata: {s['all_match']}", file=out)


DEMO_MARKER = ".pulsarkit-demo"


class _Refused(Exception):
    pass


def _demo_files(data: str) -> list[str]:
    """Every file and link under ``data`` (relative paths), without following links."""
    found = []
    for root, dirs, files in os.walk(data):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            found.append(os.path.relpath(os.path.join(root, name), data))
    return sorted(found)


def _read_manifest(data: str) -> set[str]:
    """The files a finished demo run wrote, as its marker lists them (one relative path a line after
    the first). A marker without a list is a run that did not finish: what it wrote is unknown."""
    with open(os.path.join(data, DEMO_MARKER)) as f:
        lines = f.read().splitlines()
    if "files:" not in lines:
        raise _Refused(
            f"{data} holds a demo run that did not finish (its {DEMO_MARKER} lists no files); "
            "remove the directory yourself or give another"
        )
    return set(lines[lines.index("files:") + 1 :])


def prepare_data_dir(data: str, overwrite: bool) -> None:
    """Makes ``data`` an empty demo directory, or refuses (:class:`_Refused`) to touch a path the
    demo did not make. ``--overwrite`` removes only the files an earlier finished run listed in its
    marker, and refuses (removing nothing) when the directory holds anything else."""
    if os.path.islink(data):
        raise _Refused(f"{data} is a symbolic link; give the directory itself")
    if os.path.lexists(data):
        if not os.path.isdir(data):
            raise _Refused(f"{data} exists and is not a directory")
        if os.listdir(data):
            if not os.path.isfile(os.path.join(data, DEMO_MARKER)) or os.path.islink(os.path.join(data, DEMO_MARKER)):
                raise _Refused(
                    f"{data} is not empty and was not made by the demo (no {DEMO_MARKER}); "
                    "give a new or empty directory"
                )
            if not overwrite:
                raise _Refused(f"{data} holds an earlier demo run; pass --overwrite to replace it")
            ours = _read_manifest(data) | {DEMO_MARKER}
            foreign = [f for f in _demo_files(data) if f not in ours]
            if foreign:
                raise _Refused(
                    f"{data} holds {len(foreign)} file(s) the demo did not write (first: {foreign[0]}); "
                    "nothing removed: move them away or give another directory"
                )
            _remove_demo_files(data, ours)
    os.makedirs(data, mode=0o700, exist_ok=True)
    # a new file, never through a link planted meanwhile
    with _open_marker(data, os.O_CREAT | os.O_EXCL) as f:
        f.write("made by python -m pulsarkit.demo; --overwrite may replace this directory\n")


def _open_marker(data: str, flags: int) -> Any:
    try:
        fd = os.open(os.path.join(data, DEMO_MARKER), os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | flags, 0o600)
    except OSError as e:
        raise _Refused(f"{os.path.join(data, DEMO_MARKER)}: cannot write the demo's marker: {e.strerror}") from None
    return os.fdopen(fd, "a")


def _remove_demo_files(data: str, ours: set[str]) -> None:
    """Removes the listed files (each a regular file reached through real directories below ``data``:
    a listed path that leaves it, or a link on the way, is refused), then the directories left empty
    (deepest first); the marker last, so an interruption leaves a directory that is still recognisably
    the demo's."""
    root = Path(data)
    try:
        for rel in ours:  # every listed path checked before anything is removed
            check_below(root, rel)
        for rel in sorted(ours - {DEMO_MARKER}):
            remove_own_file(root, rel)
        for top, dirs, _files in os.walk(data, topdown=False):
            for d in dirs:
                remove_own_empty_dir(root, os.path.relpath(os.path.join(top, d), data))
        remove_own_file(root, DEMO_MARKER)
    except UnsafePath as e:
        raise _Refused(str(e)) from None


def finish_manifest(data: str) -> None:
    """Lists in the marker every file this run wrote, so a later ``--overwrite`` removes those only."""
    files = [f for f in _demo_files(data) if f != DEMO_MARKER]
    with _open_marker(data, 0) as f:
        f.write("files:\n" + "".join(x + "\n" for x in files))


def _has_pyspark() -> bool:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pulsarkit.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--data",
        help="keep the data directory here: a new or empty directory, or an earlier demo's "
        "(default: a private temporary one, removed at the end)",
    )
    ap.add_argument("--overwrite", action="store_true", help="replace the data an earlier demo left in --data")
    ap.add_argument("--engine", choices=["spark", "arrow"], default="spark", help="how to read the bookie back")
    ap.add_argument("--entries", type=int, default=300, help="entries per topic")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)
    if args.engine == "spark" and not _has_pyspark():
        print(
            "pulsarkit demo: error: the Spark engine needs pyspark (pip install 'pulsarkit[spark]'), "
            "or run with --engine arrow",
            file=sys.stderr,
        )
        return 2
    if args.data is None:
        with tempfile.TemporaryDirectory(prefix="pulsarkit-demo-") as tmp:
            return _run(args, os.path.join(tmp, "data"))
    try:
        prepare_data_dir(args.data, args.overwrite)
    except _Refused as e:
        print(f"pulsarkit demo: error: {e}", file=sys.stderr)
        return 2
    return _run(args, args.data)


def _run(args: argparse.Namespace, data: str) -> int:
    progress = None if args.json else sys.stderr
    if progress:
        print(f"building the embedded data directory in {data}", file=progress)
    umask = os.umask(0o077)  # the demo's data is private, as every output of pulsarkit's is
    try:
        built = build(data, entries_per_topic=args.entries, log=progress)
    finally:
        os.umask(umask)
    if os.path.isfile(os.path.join(data, DEMO_MARKER)):
        finish_manifest(data)
    current = os.path.join(data, "bookie", "current")
    t0 = time.perf_counter()
    if args.engine == "spark":
        if progress:
            print("reading the bookie back through Spark (local[2])", file=progress)
        rows, extra, _ = read_back_spark(current)
        counts = {r["ledger_id"]: r["count"] for r in rows}
    else:
        entries = _entries_table(current)
        msgs = bulk.explode_table(entries, keep=["ledger_id"])
        msgs = msgs.filter(pc.is_null(msgs.column("error")))
        counts = dict(Counter(msgs.column("ledger_id").to_pylist()))
        _, summary = audit.dedup_audit(entries)
        extra = {"audit": summary.to_pylist(), "entry_logs": len(set(entries.column("log_id").to_pylist()))}
    s = summarise(built, counts, extra)
    s.update(engine=args.engine, data=data, read_seconds=round(time.perf_counter() - t0, 2))
    if args.json:
        print(json.dumps(s, indent=2, default=str))
    else:
        render(s)
    return 0 if s["all_match"] else 1


def _entries_table(current: str) -> pa.Table:
    batches = [b for b in scan_entry_logs([current]) if b.num_rows]
    t = pa.Table.from_batches(batches)
    t = t.filter(pc.is_null(t.column("issue")))
    return t.select(["log_id", "ledger_id", "entry_id", "payload"]).rename_columns(
        ["log_id", "ledger_id", "entry_id", "entry"]
    )


if __name__ == "__main__":
    raise SystemExit(main())
