"""``pulsarkit export``: the messages of a data directory into a Parquet dataset, a Delta table or an
Iceberg table, incrementally::

    pulsarkit export DATA_DIR --to parquet OUT [--engine auto|local|spark|spark-sql] [--master URL] [--topic T]...
                              [--json] [--force] [--skip-unreadable] [--progress | --no-progress]
    pulsarkit export --zookeeper-dir ZK --ledger-dir BK1 --ledger-dir BK2 ... --to parquet OUT   (a cluster)
    pulsarkit export DATA_DIR --to delta OUT ...          (needs the deltalake package: pip install pulsarkit[delta])
    pulsarkit export DATA_DIR --to iceberg OUT ...        (needs pyiceberg: pip install pulsarkit[iceberg])
    pulsarkit export DATA_DIR --to parquet OUT --until [TOPIC=]LEDGER:ENTRY[:PARTITION[:BATCH]] | --until-time T
                                                          (backfill)
    pulsarkit export DATA_DIR --to delta OUT --mode upsert    (keyed topics: the latest message per key)
    pulsarkit export-marks OUT [--json]                   (per topic: the committed mark and the next message id)

What a run writes, its marks and its commit are :mod:`pulsarkit.export`'s (``pulsarkit.export.export``
from Python); the engines and ``--engine auto`` are :mod:`pulsarkit.spark.export`'s. This module
parses the arguments, shows the progress and prints the summary (``--json``: the whole document).
An unreadable entry stops the export (exit 1) unless ``--skip-unreadable``; what a run could not read
(skipped entries, a run of entries no bookie holds, a copy passed over) is a warning line each and a
count at the end, and ``--strict`` makes it exit 3.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..broker.topic_name import partition_of
from ..export.handoff import last_exported, parse_time
from ..export.marks import MessageId
from ..export.run import committed_marks
from ..managed_ledger.position import parse_message_id
from ..scan.records import DataDirError
from ..spark.export import ENGINES, SPARK_THRESHOLD, export
from .command import EXIT_DATA_PROBLEMS, EXIT_OK, Progress, Runner, command, progress_arg
from .datadir import _dir_args, data_dir_spec


@command(
    "export",
    help="export the messages of a data directory to a Parquet dataset, a Delta table or an Iceberg table, "
    "partitioned by topic and date, incrementally (a rerun exports only what was added since)",
)
def _export(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)  # --strict: exit 3 when part of the data could not be read
    p.add_argument(
        "--to",
        nargs=2,
        metavar=("FORMAT", "PATH"),
        required=True,
        help="parquet PATH, delta PATH (deltalake) or iceberg PATH (pyiceberg)",
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="decode here (local); on Spark tasks writing Parquet themselves (spark); through the pulsarkit data "
        "source and Spark's writer (spark-sql); auto (default): spark with --master or above --spark-threshold",
    )
    p.add_argument("--master", help="Spark master URL for the Spark engines (default local[2])")
    p.add_argument(
        "--spark-threshold",
        type=int,
        default=SPARK_THRESHOLD,
        metavar="BYTES",
        help=f"--engine auto runs on Spark above this many planned bytes, on 4+ cores (default {SPARK_THRESHOLD})",
    )
    p.add_argument("--topic", action="append", help="only this topic (repeatable; its own marks are kept)")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.add_argument(
        "--force",
        action="store_true",
        help="write into an existing directory that is not an export (its files are never changed or deleted; an "
        "export or Delta table of another format is refused even so)",
    )
    p.add_argument("--other-source", action="store_true", help="continue an export made from another path")
    p.add_argument("--skip-unreadable", action="store_true", help="skip unreadable entries instead of stopping")
    p.add_argument("--max-partition-bytes", type=int, default=64 << 20, help="size of a read task (bytes)")
    p.add_argument(
        "--until",
        action="append",
        type=_until_arg,
        metavar="[TOPIC=]LEDGER:ENTRY[:PARTITION[:BATCH]]",
        help="export up to this message id, inclusive, as Pulsar prints it (partition -1 or the topic's; a batch "
        "index cuts the batch there; LEDGER:ENTRY: the whole entry) (repeatable, one per topic; without TOPIC=, the "
        "one --topic); the marks then give the next message id a live consumer starts from (--json: each topic's "
        "'next')",
    )
    p.add_argument(
        "--until-time",
        type=_time_arg,
        metavar="T",
        help="export only up to each topic's first message published after T (ISO-8601, UTC by default, or epoch ms)",
    )
    p.add_argument(
        "--mode",
        choices=("append", "upsert"),
        default="append",
        help="append (default): every message; upsert: each topic's latest message per key, with topic "
        "compaction's rules (a null or empty value deletes the key, keyless messages left out), replaced per run "
        "(parquet: a snapshot; delta: MERGE by key; iceberg: delete and upsert by key)",
    )
    p.add_argument(
        "--decode",
        choices=("bytes", "schema"),
        default="bytes",
        help="'schema' writes each topic's payloads decoded with its schema: typed key/value columns "
        "(engines local and spark; a Delta or Iceberg export is one table: its topics must share one table schema, "
        "which evolves with their new compatible schema versions)",
    )
    progress_arg(p)

    def run(args: argparse.Namespace) -> int:
        fmt, path = args.to
        summary = export(
            data_dir_spec(args),
            fmt,
            path,
            engine=args.engine,
            master=args.master,
            topics=args.topic,
            force=args.force,
            other_source=args.other_source,
            skip_unreadable=args.skip_unreadable,
            progress=lambda total: Progress(total, "exporting", enabled=args.progress),
            max_partition_bytes=args.max_partition_bytes,
            spark_threshold=args.spark_threshold,
            until=_until(args) if args.until else None,
            **({"until_time": args.until_time} if args.until_time is not None else {}),
            **({"mode": args.mode} if args.mode != "append" else {}),
            decode=args.decode,
        )
        if args.json:
            print(json.dumps(summary.to_json()))
        else:
            print(
                f"exported {summary.rows} message(s) of {len(summary.topics)} topic(s) to {summary.output} "
                f"({fmt}, run {summary.run}, {summary.seconds} s)"
            )
            if args.until or args.until_time is not None:  # the hand-off: where a live consumer starts
                for t, s in summary.topics.items():
                    if s.next is not None:
                        print(f"{t}: next message id {s.next} (last exported {last_exported(s.until, s.next)})")
        if summary.issues:
            print(
                f"pulsarkit export: {len(summary.issues)} issue(s) reading the data, "
                f"{summary.unreadable_entries} unreadable entr{'y' if summary.unreadable_entries == 1 else 'ies'} "
                "not exported",
                file=sys.stderr,
            )
            if args.strict:
                return EXIT_DATA_PROBLEMS
        return EXIT_OK

    return run


@command(
    "export-marks",
    help="the committed marks of an export: per topic, the last position exported and the next message id, "
    "where a live consumer continuing the export starts",
)
def _export_marks(p: argparse.ArgumentParser) -> Runner:
    p.add_argument("out", metavar="OUT", help="the export (parquet, delta or iceberg)")
    p.add_argument("--json", action="store_true", help="one JSON object")

    def run(args: argparse.Namespace) -> int:
        to, marks = committed_marks(args.out)
        topics = {
            t: {
                "mark": list(m),
                **(
                    {"next": str(marks.next[t]), "last": str(last_exported(m, marks.next[t]))}
                    if t in marks.next
                    else {}
                ),
            }
            for t, m in sorted(marks.marks.items())
        }
        if args.json:
            print(json.dumps({"to": to, "source": marks.source, "mode": marks.mode, "topics": topics}))
        else:
            for t, v in topics.items():
                print(f"{t}: mark {v['mark'][0]}:{v['mark'][1]}, next {v.get('next', '?')}, last {v.get('last', '?')}")
        return EXIT_OK

    return run


def _until_arg(text: str) -> tuple[str, MessageId, int, str]:
    """``[TOPIC=]ID``: the topic (empty: the one --topic), the message id, the partition the id names, the text."""
    topic, _, mid = text.rpartition("=")
    try:
        ledger, entry, partition, batch = parse_message_id(mid)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return topic, MessageId(ledger, entry, batch), partition, text


def _until(args: argparse.Namespace) -> dict[str, MessageId]:
    """The --until ids by topic. An id's partition is -1 (a reader of the topic itself) or the topic's own
    index (a consumer of the partitioned topic): another one names a message of another topic."""
    out: dict[str, MessageId] = {}
    for topic, mid, partition, text in args.until:
        name = topic or (args.topic[0] if args.topic and len(args.topic) == 1 else "")
        own = partition_of(name)[1]
        if partition >= 0 and not name:
            raise DataDirError(f"--until {text} names partition {partition}: give it as TOPIC={text}")
        if partition >= 0 and partition != own:
            where = f"{name} is partition {own}" if own >= 0 else f"{name} is not a partition"
            raise DataDirError(
                f"--until {text}: the id names partition {partition} and {where} "
                "(LEDGER:ENTRY:PARTITION[:BATCH], partition -1 or the topic's)"
            )
        out[topic] = mid
    return out


def _time_arg(text: str) -> int:
    try:
        return parse_time(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
