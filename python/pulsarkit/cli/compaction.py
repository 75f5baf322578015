"""Compacted topics of a data directory, read-only::

    pulsarkit compacted DATA_DIR TOPIC         [--json | --parquet FILE | --format table|json|parquet -o FILE]
    pulsarkit last-message-id DATA_DIR TOPIC   [--json]

``compacted`` lists what a ``readCompacted`` reader gets (the compacted ledger below the horizon, the
topic after it); ``last-message-id`` is the broker's ``GetLastMessageId`` answer for such a reader.
"""

from __future__ import annotations

import argparse
import base64
import json

import pyarrow.parquet as pq

from ..analysis.compaction import compacted_messages, compacted_table, compacted_topic
from ..broker.topic_name import partition_of
from ..managed_ledger.position import message_id_text
from .command import Runner, command, overwrite_arg
from .datadir import _FORMATS_TABLE, _dir_args, _finish, _open, _out_file, _table, _with_parquet_alias


def _preview(b64: str | None, width: int = 40) -> str:
    if b64 is None:
        return "(null)"
    raw = base64.b64decode(b64)
    text = raw.decode("utf-8", "replace")
    return (text if text.isprintable() else raw.hex())[:width]


@command("compacted", help="the compacted view of a topic: what a readCompacted reader gets, broker-less")
def _compacted(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--format", choices=_FORMATS_TABLE, default="table")
    p.add_argument("--json", action="store_const", dest="format", const="json", help="same as --format json")
    p.add_argument("--parquet", metavar="FILE", help="same as --format parquet -o FILE")
    p.add_argument("-o", "--output", help="output file (parquet)")
    overwrite_arg(p)

    def run(args: argparse.Namespace) -> int:
        dd = _open(args)
        view = compacted_topic(dd, args.topic)
        if args.format == "parquet":
            pq.write_table(compacted_table(dd, args.topic), _out_file(args))
        elif args.format == "json":
            for r in compacted_messages(dd, args.topic):
                print(json.dumps(r))
        else:
            rows = []
            partition = partition_of(args.topic)[1]  # as the messages table gives it
            for r in compacted_messages(dd, args.topic):
                r["message_id"] = message_id_text(r["ledger_id"], r["entry_id"], r["batch_index"], partition)
                r["value"] = _preview(r["payload_b64"])
                r["from"] = "compacted ledger" if r["from_compacted_ledger"] else "topic"
                rows.append(r)
            _table(rows, ["message_id", "key", "value", "from"])
            ledger = view.compacted_ledger_id
            print(
                f"{len(rows)} message(s); horizon {view.horizon or '(never compacted)'}"
                + (f", compacted ledger {ledger}" if ledger is not None else "")
            )
        return _finish(dd, args)

    return _with_parquet_alias(run)


@command("last-message-id", help="the last message id a readCompacted reader of a topic gets (PIP-429), broker-less")
def _last_message_id(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--json", action="store_true", help="one JSON object")

    def run(args: argparse.Namespace) -> int:
        dd = _open(args)
        view = compacted_topic(dd, args.topic)
        last = view.last_message_id()
        row = {
            "topic": args.topic,
            "ledger_id": last.ledger_id,
            "entry_id": last.entry_id,
            "batch_index": last.batch_index,
            "publish_time": last.publish_time,
            "earliest": last.ledger_id < 0,
            "horizon": str(view.horizon) if view.horizon else None,
            "compacted_ledger": view.compacted_ledger_id,
        }
        if args.json:
            print(json.dumps(row))
        elif last.ledger_id < 0:
            print("earliest (nothing to read with readCompacted)")
        else:
            mid = message_id_text(last.ledger_id, last.entry_id, last.batch_index, partition_of(args.topic)[1])
            print(f"{mid}  published {last.publish_time}")
        return _finish(dd, args)

    return run
