"""Commands over a whole data directory, read-only::

    pulsarkit ledgers DATA_DIR       [--format table|json|parquet] [--kind KIND] [--ledger ID]
    pulsarkit topics DATA_DIR        [--format table|json] [--no-system]
    pulsarkit schemas DATA_DIR       [--topic T]... [--format table|json|parquet]
    pulsarkit messages DATA_DIR      [--topic T]... [--format table|jsonl|parquet] [--txn committed|all]
                                     [--decode bytes|schema]
                                     [--markers]
    pulsarkit backlog DATA_DIR TOPIC SUBSCRIPTION [--format table|jsonl|parquet]
    pulsarkit transactions DATA_DIR  [--view transactions|pending-acks|logs] [--json | --parquet FILE]
                                     [--timed-out] [--now MS]
    pulsarkit readjournal PATH...    [--json] [-l LEDGER] [--msg]

DATA_DIR is a Pulsar standalone's data directory (``metadata/`` + ``bookkeeper/``); a bookie with
separate directories takes ``--metadata-dir``, ``--ledger-dir``, ``--journal-dir``, ``--index-dir``. A
cluster whose metadata is in ZooKeeper takes ``--zookeeper-dir`` (the ZooKeeper server's dataDir, read
offline: newest valid snapshot + transaction logs) instead of DATA_DIR/--metadata-dir, with
``--zookeeper-log-dir``, ``--configuration-zookeeper-dir``, ``--zxid`` and the bookies' ``--ledger-dir``; or
``--metadata-store zk:host:port[,host:port][/chroot]`` (Pulsar's URL: the live ZooKeeper, read once,
consistently and read-only; ``rocksdb:PATH`` too), with ``--configuration-metadata-store URL``.
Nothing is ever written into it. Unreadable parts are reported on stderr (file and offset) after
everything readable was printed; ``--strict`` turns them into exit code 3.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .. import bulk
from ..analysis.backlog import backlog_batches
from ..analysis.decoded import DECODE_MODES, decode_batches, decoded_schema, json_value, topic_schema
from ..analysis.messages import ledger_entries, message_batches, message_entries, message_topics
from ..analysis.schemas import schemas_table
from ..analysis.transactions import pending_ack_table, transaction_log_table, transactions_table
from ..bookkeeper.journal import META_ENTRY_KINDS, scan_journal
from ..broker.topic_name import KINDS as LEDGER_KINDS
from ..broker.topic_name import ml_to_topic
from ..lazy import deferred
from ..managed_ledger.position import message_id_text
from ..scan.bookie_dir import bookie_parts
from ..scan.datadir import DataDirSpec
from ..scan.prefetch import WriteBehind
from ..scan.records import DataDirError, topic_dict
from ..scan.schema import RowGroups, arrow_schema, json_record, message_fields, parquet_options
from .command import (
    EXIT_DATA_PROBLEMS,
    EXIT_OK,
    Progress,
    Runner,
    command,
    output_file,
    overwrite_arg,
    progress_arg,
)

pc = deferred("pyarrow.compute")

_FORMATS_TABLE = ("table", "json", "parquet")
_FORMATS_MSG = ("table", "jsonl", "parquet")


def _dir_args(p: argparse.ArgumentParser, positional: bool = True, strict: bool = True) -> None:
    p.add_argument(
        "data_dir",
        metavar="DATA_DIR",
        nargs="?" if positional else None,
        help="a standalone's data directory (metadata/ + bookkeeper/)",
    )
    p.add_argument("--metadata-dir", help="the RocksDB metadata store, when not under DATA_DIR")
    p.add_argument("--ledger-dir", action="append", help="a bookie ledger directory (repeatable)")
    p.add_argument("--journal-dir", action="append", help="a bookie journal directory (repeatable)")
    p.add_argument("--index-dir", action="append", help="a bookie index directory (repeatable)")
    p.add_argument(
        "--bookie",
        action="append",
        metavar="DIR",
        help="a bookie whose directories sit under DIR (journal/, ledgers/...; repeatable): its ledger and journal "
        "directories, each told by what it holds",
    )
    _zookeeper_args(p, "DATA_DIR/--metadata-dir; the bookies come with --ledger-dir")
    if strict:
        p.add_argument("--strict", action="store_true", help="exit 3 when part of the data could not be read")


def _zookeeper_args(p: argparse.ArgumentParser, instead_of: str) -> None:
    p.add_argument(
        "--zookeeper-dir",
        metavar="DIR",
        help="metadata from a ZooKeeper server's data directory (its dataDir, or version-2/), read offline "
        f"instead of {instead_of}",
    )
    p.add_argument(
        "--zookeeper-log-dir", metavar="DIR", help="the ZooKeeper transaction logs, when kept apart (dataLogDir)"
    )
    p.add_argument(
        "--configuration-zookeeper-dir",
        metavar="DIR",
        help="the configuration store's ZooKeeper data directory, when it is a separate ZooKeeper",
    )
    p.add_argument(
        "--configuration-zookeeper-log-dir",
        metavar="DIR",
        help="the configuration store's ZooKeeper transaction logs, when kept apart (dataLogDir)",
    )
    p.add_argument(
        "--metadata-store",
        metavar="URL",
        help="metadata from Pulsar's metadata-store URL: zk:host:port[,host:port][/chroot] (a live ZooKeeper, read "
        f"once, consistently and read-only) or rocksdb:PATH, instead of {instead_of}",
    )
    p.add_argument(
        "--configuration-metadata-store",
        metavar="URL",
        help="the configuration store's URL (zk:... or rocksdb:PATH), when it is a separate store",
    )
    p.add_argument(
        "--zookeeper-chroot",
        metavar="PATH",
        help="where the cluster's tree sits in that ZooKeeper, when its metadataStoreUrl ends in one (/pulsar)",
    )
    p.add_argument(
        "--zxid",
        type=_zxid,
        metavar="N",
        help="the metadata as of this ZooKeeper transaction (decimal or 0x hex), when the snapshots and logs allow",
    )


def _zxid(value: str) -> int:
    try:
        n = int(value, 0)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"a zxid is a non-negative number, decimal or 0x hex, not {value!r}")
    return n


def _zookeeper(args: argparse.Namespace) -> dict[str, Any]:
    """The ZooKeeper arguments as :func:`open_data_dir` takes them (none for a command without them)."""
    kw = {
        "zookeeper_dir": getattr(args, "zookeeper_dir", None),
        "zookeeper_log_dir": getattr(args, "zookeeper_log_dir", None),
        "configuration_zookeeper_dir": getattr(args, "configuration_zookeeper_dir", None),
        "configuration_zookeeper_log_dir": getattr(args, "configuration_zookeeper_log_dir", None),
        "zxid": getattr(args, "zxid", None),
        "zookeeper_chroot": getattr(args, "zookeeper_chroot", None),
    }
    if kw["zookeeper_dir"] is None and any(v is not None for v in kw.values()):
        raise DataDirError(
            "--zookeeper-log-dir, --configuration-zookeeper-*-dir, --zookeeper-chroot and --zxid "
            "go with --zookeeper-dir"
        )
    store = getattr(args, "metadata_store", None)
    conf = getattr(args, "configuration_metadata_store", None)
    if conf is not None and store is None:
        raise DataDirError("--configuration-metadata-store goes with --metadata-store")
    if store is not None and kw["zookeeper_dir"] is not None:
        raise DataDirError("give the metadata once: --metadata-store or --zookeeper-dir")
    kw.update(metadata_store=store, configuration_metadata_store=conf)
    return kw


def _said_zxid(dd: Any, args: argparse.Namespace) -> Any:
    if dd.metadata_zxid is not None:  # which state was read matters to whoever restores from it
        print(f"pulsarkit {args.command}: metadata: {dd.metadata_source}", file=sys.stderr)
    return dd


def data_dir_spec(args: argparse.Namespace) -> DataDirSpec:
    """The parts of the data the directory arguments (:func:`_dir_args`) name, checked for sense."""
    bookies = getattr(args, "bookie", None) or []
    if bookies:
        if args.journal_dir and not args.ledger_dir:
            raise DataDirError("--journal-dir goes with --ledger-dir; --bookie finds a bookie's journal itself")
        args.ledger_dir = list(args.ledger_dir or [])
        journals = list(args.journal_dir or args.ledger_dir)  # --ledger-dir alone: its journal is within
        for b in bookies:
            led, jrn = bookie_parts(Path(b))
            args.ledger_dir += [str(d) for d in led]
            journals += [str(d) for d in jrn]
        args.journal_dir, args.bookie = journals, None
    zk_kw = _zookeeper(args)
    zk = zk_kw["zookeeper_dir"] or zk_kw["metadata_store"]
    flag = "--zookeeper-dir" if zk_kw["zookeeper_dir"] is not None else "--metadata-store"
    if zk is not None and (args.data_dir or args.metadata_dir):
        raise DataDirError(f"{flag} replaces DATA_DIR and --metadata-dir: give the bookies with --ledger-dir")
    if zk is not None and not args.ledger_dir:
        raise DataDirError(f"{flag} holds the metadata only: give the bookies with --ledger-dir (repeatable)")
    if zk is None and args.data_dir is None and not (args.metadata_dir and args.ledger_dir):
        raise DataDirError(
            "give DATA_DIR, or --metadata-dir (or --zookeeper-dir) and --ledger-dir (or --metadata-store URL with them)"
        )
    return DataDirSpec.of(
        args.data_dir,
        metadata_dir=args.metadata_dir,
        ledger_dirs=args.ledger_dir,
        journal_dirs=args.journal_dir,
        index_dirs=args.index_dir,
        **zk_kw,
    )


def _open(args: argparse.Namespace) -> Any:
    return _said_zxid(data_dir_spec(args).open(), args)


def _finish(dd: Any, args: argparse.Namespace) -> int:
    seen = set()
    for i in dd.issues:
        s = str(i)
        if s not in seen:
            seen.add(s)
            print(f"pulsarkit {args.command}: warning: {s}", file=sys.stderr)
    return EXIT_DATA_PROBLEMS if (dd.issues and args.strict) else EXIT_OK


def _table(rows: list[dict[str, Any]], cols: list[str], out: Any = None) -> None:
    out = out or sys.stdout
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(x[i]) for x in cells]) for i, c in enumerate(cols)]
    out.write("  ".join(c.upper().ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip() + "\n")
    for x in cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(x, widths, strict=True)).rstrip() + "\n")


def _inputs(args: argparse.Namespace) -> list[str]:
    return [
        x
        for x in [
            args.data_dir,
            args.metadata_dir,
            getattr(args, "zookeeper_dir", None),
            getattr(args, "zookeeper_log_dir", None),
            getattr(args, "configuration_zookeeper_dir", None),
            getattr(args, "configuration_zookeeper_log_dir", None),
            *(args.ledger_dir or []),
            *(args.journal_dir or []),
            *(args.index_dir or []),
        ]
        if x
    ]


def _with_output(run: Runner) -> Runner:
    """Runs a command whose ``-o FILE`` is checked before anything is read (an existing file needs
    ``--overwrite``; a link or a path among the inputs is refused) and written under a temporary
    name, renamed when the command succeeds."""

    def with_output(args: argparse.Namespace) -> int:
        if not args.output:
            args.dest = None
            return run(args)
        with output_file(args.output, overwrite=args.overwrite, inputs=_inputs(args)) as dest:
            args.dest = dest
            return run(args)

    return with_output


def _with_parquet_alias(run: Runner) -> Runner:
    """``--parquet FILE`` as ``--format parquet -o FILE``, then :func:`_with_output`."""

    def with_parquet(args: argparse.Namespace) -> int:
        if args.parquet:
            if args.output:
                raise DataDirError("give --parquet FILE or -o FILE, not both")
            args.format, args.output = "parquet", args.parquet
        return _with_output(run)(args)

    return with_parquet


def _out_file(args: argparse.Namespace) -> Any:
    """The Parquet destination: ``-o FILE``, else stdout when it is not a terminal (``| duckdb``)."""
    if args.dest:
        return args.dest
    if sys.stdout.isatty():
        raise DataDirError("--format parquet needs -o FILE (or a pipe)")
    sys.stdout.flush()
    return pa.PythonFile(sys.stdout.buffer, mode="w")


# ------------------------------------------------------------------------------------------------


@command("ledgers", help=f"every ledger of a data directory by its kind ({', '.join(LEDGER_KINDS)})")
def _ledgers(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    p.add_argument("--format", choices=_FORMATS_TABLE, default="table")
    p.add_argument("-o", "--output", help="output file (parquet)")
    overwrite_arg(p)
    p.add_argument("--kind", action="append", choices=LEDGER_KINDS, help="only ledgers of this kind (repeatable)")
    p.add_argument("--ledger", type=int, help="print this ledger's entries, each decoded by the ledger's format (JSON)")

    def run(args: argparse.Namespace) -> int:
        dd = _open(args)
        if args.ledger is not None:
            for row in ledger_entries(dd, args.ledger):
                print(json.dumps(row, default=str))
            return _finish(dd, args)
        leds = dd.ledger_list(args.kind)
        if args.format == "parquet":
            t = dd.ledgers_table()
            if args.kind:
                t = t.filter(pc.is_in(t["kind"], value_set=pa.array(args.kind)))
            pq.write_table(t, _out_file(args))
        elif args.format == "json":
            for led in leds:
                print(json.dumps(dd.ledger_row(led)))
        else:
            rows = [dd.ledger_row(led) for led in leds]
            for r in rows:
                r["where"] = r["topic"] or ""
                if r["cursor"]:
                    r["where"] += f" [{r['cursor']}]"
                if r["deleted_guess"]:
                    r["where"] += f"(was {r['deleted_guess']}?)"
            _table(
                rows,
                ["ledger_id", "kind", "state", "entries", "journal_only_entries", "bytes_on_bookie", "where"],
            )
        return _finish(dd, args)

    return _with_output(run)


@command("schemas", help="every version of every topic's schema, from the metadata and the schema ledgers")
def _schemas(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    p.add_argument(
        "--topic", action="append", help="only this topic's schema (repeatable; a partition names its topic's)"
    )
    p.add_argument("--format", choices=_FORMATS_TABLE, default="table")
    p.add_argument("-o", "--output", help="output file (parquet)")
    overwrite_arg(p)

    def run(args: argparse.Namespace) -> int:
        dd = _open(args)
        t = schemas_table(dd, args.topic)
        if args.format == "parquet":
            pq.write_table(t, _out_file(args))
        elif args.format == "json":
            for r in t.to_pylist():
                definition = r["definition"]
                try:  # Avro and JSON schemas are JSON text; a protobuf descriptor is binary
                    r["definition"] = definition.decode("utf-8")
                except UnicodeDecodeError:
                    r["definition_b64"], r["definition"] = base64.b64encode(definition).decode("ascii"), None
                r["properties"] = dict(r["properties"] or ())
                print(json.dumps(r))
        else:
            rows = t.to_pylist()
            for r in rows:
                r["definition"] = f"{len(r['definition'])} bytes" if r["definition"] else ""
                r["hash"] = "ok" if r["hash_matches"] else "MISMATCH"
                r["deleted"] = "deleted" if r["deleted"] else ""
            _table(rows, ["schema_id", "version", "type", "definition", "timestamp", "deleted", "hash", "ledger_id"])
        return _finish(dd, args)

    return _with_output(run)


@command("topics", help="topics of a data directory with their ledgers, size and subscriptions' cursors")
def _topics(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--no-system", action="store_true", help="leave out system topics")

    def run(args: argparse.Namespace) -> int:

        dd = _open(args)
        topics = dd.topics(include_system=not args.no_system)
        if args.format == "json":
            print(json.dumps([topic_dict(t) for t in topics], indent=2))
            return _finish(dd, args)
        for t in topics:
            flags = [t.kind] if t.kind != "topic" else []
            if t.system:
                flags.append("system")
            if t.partition >= 0:
                flags.append(f"partition {t.partition} of {t.partitioned_topic}")
            print(f"{t.name}{'  (' + ', '.join(flags) + ')' if flags else ''}")
            print(f"  ledgers {t.ledgers}  entries {t.entries}  bytes {t.bytes}")
            if t.compacted_ledger is not None:
                print(f"  compacted ledger {t.compacted_ledger}, horizon {t.compaction_horizon}")
            for c in t.cursors:
                extra = []
                if c.individually_deleted:
                    extra.append("deleted " + " ".join(f"({lo},{hi}]" for lo, hi in c.individually_deleted))
                if c.batch_ack_sets:
                    sets = " ".join(f"{pos}:{w}" for pos, w in sorted(c.batch_ack_sets.items()))
                    extra.append(f"ack sets {sets}")
                elif c.stored_batch_ack_sets:
                    sets = " ".join(f"{pos}:{w}" for pos, w in sorted(c.stored_batch_ack_sets.items()))
                    extra.append(f"ack sets {sets} (stored, not recovered by the broker)")
                sysflag = " (system)" if c.system else ""
                print(
                    f"  cursor {c.name}{sysflag}: mark-delete {c.mark_delete} from {c.source}"
                    f"{'; ' + '; '.join(extra) if extra else ''}"
                )
        return _finish(dd, args)

    return run


def _entries_read(batches: Iterable[pa.RecordBatch], prog: Progress) -> Iterator[pa.RecordBatch]:
    """``batches`` passed on, ``prog`` advanced by the entries their rows came from once each batch is
    written: its total counts entries (``message_entries``), so the updates count them too, not messages.
    An entry's rows are adjacent, one entry's may end one batch and begin the next."""
    done, last = 0, None
    for b in batches:
        k = b.num_rows
        if k:
            led, ent = b.column("ledger_id"), b.column("entry_id")
            done += last != (led[0].as_py(), ent[0].as_py())
            if k > 1:  # the rows whose entry is not the previous row's
                changed = pc.or_(
                    pc.not_equal(led.slice(1), led.slice(0, k - 1)), pc.not_equal(ent.slice(1), ent.slice(0, k - 1))
                )
                done += pc.sum(pc.cast(changed, pa.int64())).as_py() or 0
            last = (led[k - 1].as_py(), ent[k - 1].as_py())
        yield b
        prog.update(done)


def _print_records(
    batches: Iterable[pa.RecordBatch],
    args: argparse.Namespace,
    total: int,
    markers: bool = False,
    one_topic: bool = False,
) -> int:
    """Batches of the one message schema: as Parquet, or rendered as JSON records (JSON lines, table).
    ``one_topic``: the rows are one topic's, whose first rows may choose the payload's Parquet codec
    (``parquet_options``); a file of several topics keeps Snappy (the first topic's payloads say nothing of
    the others')."""
    prog = Progress(total, "reading", enabled=args.progress, unit="entries")
    if prog.enabled:  # the count costs a pass over each batch's ids: only when someone sees it
        batches = _entries_read(batches, prog)
    n = 0
    try:
        if args.format == "parquet":
            schema = arrow_schema(message_fields(markers))
            dest = _out_file(args)
            batches = iter(batches)
            ahead: list[pa.RecordBatch] = []  # up to the first rows, which may choose the payload's codec
            while one_topic and not (ahead and ahead[-1].num_rows) and (b := next(batches, None)) is not None:
                ahead.append(b)
            first = ahead[-1] if ahead and ahead[-1].num_rows else None
            with pq.ParquetWriter(dest, schema, **parquet_options(schema, first)) as w, RowGroups(w) as groups:
                for b in itertools.chain(ahead, batches):
                    groups.add(b)
                    n += b.num_rows
        elif args.format == "jsonl":
            # rendered natively a batch at a time (ASCII, as json.dumps of json_record), written in blocks
            out, write = _binary_out(args.dest)
            try:
                # each block written behind the rendering of the next (1 GB of lines for the benchmark's topic A:
                # the file system's copy was 2.4 s of its 3.6 s)
                with WriteBehind(write) as behind:
                    for b in batches:
                        behind(bulk.json_lines(b))
                        n += b.num_rows
            finally:
                if args.dest:
                    out.close()
                else:
                    out.flush()
        else:
            rows = []
            for r in (json_record(r) for b in batches for r in b.to_pylist()):
                mid = r["message_id"]
                pl = r["payload_b64"]
                shown = "<encrypted>" if r["encrypted"] else ("<null>" if r["null_value"] else _preview(pl))
                rows.append(
                    {
                        "message_id": _message_id(mid),
                        "topic": r["topic"],
                        "key": r["key"],
                        "publish_time": r["publish_time"],
                        "seq": r["sequence_id"],
                        "txn": r["txn"]["state"] if r["txn"] else "",
                        "marker": r.get("marker") or "",
                        "payload": shown,
                    }
                )
                n += 1
            cols = (
                ["message_id", "topic", "key", "publish_time", "seq", "txn"]
                + (["marker"] if markers else [])
                + ["payload"]
            )
            _table(rows, cols)
    finally:
        prog.close()
    return n


def _binary_out(dest: str | None) -> tuple[Any, Callable[[bytes], Any]]:
    """The file to write ASCII blocks to and its write function: ``dest``, else standard output's
    buffer (after what was printed to it), or the text stream itself when it has none (captured)."""
    if dest:
        f = open(dest, "wb")
        return f, f.write
    sys.stdout.flush()
    buf = getattr(sys.stdout, "buffer", None)
    if buf is not None:
        return buf, buf.write
    return sys.stdout, lambda b: sys.stdout.write(b.decode("ascii"))


def _print_decoded(batches: Iterable[pa.RecordBatch], schema: pa.Schema, args: argparse.Namespace, total: int) -> int:
    """Batches decoded with the topic's schema (:mod:`pulsarkit.analysis.decoded`): as Parquet, or as the JSON
    record of ``messages`` with ``schema_version``, the typed ``value`` (and ``key``, ``partition_key`` of a
    KEY_VALUE topic) and ``decode_error`` (JSON lines, table)."""
    prog = Progress(total, "reading", enabled=args.progress, unit="entries")
    if prog.enabled:  # the count costs a pass over each batch's ids: only when someone sees it
        batches = _entries_read(batches, prog)
    n = 0
    kv = "partition_key" in schema.names
    key_type, value_type = schema.field("key").type, schema.field("value").type

    def records() -> Iterator[dict[str, Any]]:
        for b in batches:
            for r in b.to_pylist():
                rec = json_record({**r, "key": r["partition_key"] if kv else r["key"]})
                rec["schema_version"] = r["schema_version"]
                if kv:
                    rec["key"], rec["partition_key"] = json_value(r["key"], key_type), r["partition_key"]
                rec["value"], rec["decode_error"] = json_value(r["value"], value_type), r["decode_error"]
                yield rec

    try:
        if args.format == "parquet":
            with pq.ParquetWriter(_out_file(args), schema) as w:
                for b in batches:
                    w.write_batch(b)
                    n += b.num_rows
        elif args.format == "jsonl":
            out = open(args.dest, "w") if args.dest else sys.stdout
            try:
                for rec in records():
                    out.write(json.dumps(rec) + "\n")
                    n += 1
            finally:
                if out is not sys.stdout:
                    out.close()
        else:
            rows = []
            for rec in records():
                mid = rec["message_id"]
                value = "<null>" if rec["value"] is None else json.dumps(rec["value"], ensure_ascii=False)
                rows.append(
                    {
                        "message_id": _message_id(mid),
                        "key": json.dumps(rec["key"], ensure_ascii=False) if kv else rec["key"],
                        "version": "" if rec["schema_version"] is None else rec["schema_version"],
                        "value": value if len(value) <= 60 else value[:59] + "…",
                        "error": rec["decode_error"] or "",
                    }
                )
                n += 1
            _table(rows, ["message_id", "key", "version", "value", "error"])
    finally:
        prog.close()
    return n


def _message_id(mid: dict[str, int]) -> str:
    """A record's ``message_id`` object as Pulsar prints the id (the tables; JSON keeps the object)."""
    return message_id_text(mid["ledger_id"], mid["entry_id"], mid["batch_index"], mid["partition"])


def _preview(b64: str | None, width: int = 40) -> str:
    if b64 is None:
        return ""
    raw = base64.b64decode(b64)
    try:
        s = raw.decode("utf-8")
        if s.isprintable():
            return s if len(s) <= width else s[: width - 1] + "…"
    except UnicodeDecodeError:
        pass
    h = raw.hex()
    return "0x" + (h if len(h) <= width else h[: width - 1] + "…")


def message_read_args(p: argparse.ArgumentParser) -> None:
    """How messages are read, as a consumer would get them: --txn, --markers and --decode (messages, sql)."""
    p.add_argument(
        "--txn",
        choices=("committed", "all"),
        default="committed",
        help="'all' keeps messages of aborted and unfinished transactions, flagged",
    )
    p.add_argument("--markers", action="store_true", help="also transaction and replication markers (column marker)")
    p.add_argument(
        "--decode",
        choices=DECODE_MODES,
        default="bytes",
        help="'schema': each payload and key decoded with its topic's Pulsar schema into typed value/key columns",
    )


@command(
    "messages",
    help="messages of a data directory as consumers received them (batches split, chunks "
    "reassembled, aborted transactions left out)",
)
def _messages(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    p.add_argument("--topic", action="append", help="only this topic (repeatable; default: every non-system topic)")
    p.add_argument("--format", choices=_FORMATS_MSG, default="table")
    p.add_argument("-o", "--output", help="output file (required for parquet)")
    overwrite_arg(p)
    message_read_args(p)
    p.add_argument("--system", action="store_true", help="also read system topics")
    progress_arg(p)

    def run(args: argparse.Namespace) -> int:

        dd = _open(args)
        topics = args.topic
        # resolve first: a topic that is not there is one clear error, before any output
        mls = [dd.resolve(ml) for t in topics for ml in dd.expand(t)] if topics else message_topics(dd, args.system)
        total = message_entries(dd, mls)
        if args.decode == "schema":
            if not topics:
                raise DataDirError("--decode schema needs --topic (topics of one schema)")
            batches = message_batches(dd, topics, txn=args.txn, markers=args.markers, include_system=args.system)
            ts = topic_schema(dd, ml_to_topic(dd.expand(topics[0])[0]))  # expand gives managed-ledger names
            _print_decoded(decode_batches(dd, batches), decoded_schema(ts, args.markers), args, total)
            return _finish(dd, args)
        _print_records(
            message_batches(dd, topics, txn=args.txn, markers=args.markers, include_system=args.system),
            args,
            total,
            markers=args.markers,
            one_topic=bool(topics) and len(topics) == 1,
        )
        return _finish(dd, args)

    return _with_output(run)


@command("backlog", help="the messages a consumer re-attaching to a subscription would receive")
def _backlog(p: argparse.ArgumentParser) -> Runner:
    # DATA_DIR may be left out (--zookeeper-dir or --metadata-dir with --ledger-dir): argparse then
    # gives the two arguments to TOPIC and SUBSCRIPTION
    _dir_args(p)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("subscription", metavar="SUBSCRIPTION")
    p.add_argument("--format", choices=_FORMATS_MSG, default="table")
    p.add_argument("-o", "--output", help="output file")
    overwrite_arg(p)
    progress_arg(p)

    def run(args: argparse.Namespace) -> int:
        if args.data_dir is None and not (args.metadata_dir or args.zookeeper_dir or args.metadata_store):
            # argparse gave the two words it got to TOPIC and SUBSCRIPTION
            raise DataDirError(
                f"backlog takes DATA_DIR TOPIC SUBSCRIPTION (got {args.topic!r} {args.subscription!r}), "
                "or TOPIC SUBSCRIPTION with --zookeeper-dir, --metadata-store or --metadata-dir and --ledger-dir"
            )
        dd = _open(args)
        c = dd.cursor(args.topic, args.subscription)
        total = message_entries(dd, [c.managed_ledger])
        n = _print_records(backlog_batches(dd, args.topic, args.subscription), args, total, one_topic=True)
        if args.format == "table":
            print(
                f"{n} message(s) in the backlog of {args.subscription} (mark-delete {c.mark_delete}, from {c.source})"
            )
        return _finish(dd, args)

    return _with_output(run)


#: view -> its table (the transactions' takes the clock too) and columns
_TXN_VIEWS: dict[str, tuple[Callable[..., Any], list[str]]] = {
    "transactions": (
        transactions_table,
        ["txn", "state", "coordinator_state", "age_ms", "timeout_ms", "timed_out", "log", "where"],
    ),
    "pending-acks": (
        pending_ack_table,
        ["topic", "subscription", "records", "records_after_mark_delete", "open_transactions", "bytes"],
    ),
    "logs": (
        transaction_log_table,
        ["topic", "entries", "batched_entries", "records", "live_records", "bytes", "reclaimable_bytes"],
    ),
}


@command(
    "transactions",
    help="the transaction inspector: every transaction with its state, age and timeout (hung ones flagged), "
    "pending-ack stores per subscription, and the coordinator logs' size; no broker needed",
)
def _transactions(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    p.add_argument("--view", choices=tuple(_TXN_VIEWS), default="transactions", help="what to list")
    p.add_argument("--format", choices=_FORMATS_TABLE, default="table")
    p.add_argument("--json", action="store_const", dest="format", const="json", help="same as --format json")
    p.add_argument("--parquet", metavar="FILE", help="same as --format parquet -o FILE")
    p.add_argument("-o", "--output", help="output file (parquet)")
    p.add_argument("--timed-out", action="store_true", help="only transactions still open past their timeout")
    p.add_argument("--now", type=int, metavar="MS", help="clock for ages and timeouts (default: now)")
    overwrite_arg(p)

    def run(args: argparse.Namespace) -> int:
        dd = _open(args)
        make, cols = _TXN_VIEWS[args.view]
        t = make(dd, args.now) if args.view == "transactions" else make(dd)
        if args.timed_out and args.view == "transactions":
            t = t.filter(t["timed_out"])
        if args.format == "parquet":
            pq.write_table(t, _out_file(args))
        elif args.format == "json":
            for r in t.to_pylist():
                print(json.dumps(r, default=str))
        else:
            rows = t.to_pylist()
            for r in rows:
                where = set(r.get("topics") or ()) | set(r.get("partitions") or ())
                where |= {k for k, _ in r.get("markers") or ()} | {k for k, _ in r.get("pending_acks") or ()}
                r["where"] = ",".join(sorted(where))
                if "log_records" in r:
                    r["log"] = f"{r['live_log_records']}/{r['log_records']}"
                r["coordinator_state"] = r.get("coordinator_state") or "(trimmed)"
                r["open_transactions"] = ",".join(r.get("open_transactions") or ())
            _table(rows, cols)
            if args.view == "transactions":
                hung = sum(r["timed_out"] for r in rows)
                print(f"{len(rows)} transaction(s), {hung} open past their timeout")
        return _finish(dd, args)

    return _with_parquet_alias(run)


@command("readjournal", help="entries of BookKeeper journal files (*.txn), as 'bookkeeper shell readjournal'")
def _readjournal(p: argparse.ArgumentParser) -> Runner:
    p.add_argument("paths", nargs="+", metavar="PATH", help="a journal file or a directory holding *.txn files")
    p.add_argument("--json", action="store_true", help="one JSON object per record")
    p.add_argument("-l", "--ledger", type=int, help="only this ledger")
    p.add_argument("-m", "--msg", action="store_true", help="print the entry data (hex)")

    def run(args: argparse.Namespace) -> int:

        files: list[Path] = []
        for raw in args.paths:
            pth = Path(raw)
            if pth.is_dir():
                files += sorted((f for f in pth.rglob("*.txn")), key=lambda f: (len(f.stem), f.stem))
            elif pth.is_file():
                if pth.suffix != ".txn":
                    raise DataDirError(f"{pth}: not a journal file (<hex id>.txn)", str(pth))
                files.append(pth)
            else:
                raise DataDirError(f"{pth}: no such file or directory", str(pth))
        if not files:
            raise DataDirError(f"no journal files (<hex id>.txn) under {' '.join(args.paths)}")
        problems = 0
        for f in files:
            records, issues, version = scan_journal(f)
            if not args.json:
                print(
                    f"Scan journal {int(f.stem, 16) if _hex(f.stem) else f.stem} ({f.name}), journal version {version}"
                )
            for _, off, lid, eid, rec in records:
                if args.ledger is not None and lid != args.ledger:
                    continue
                kind = "DATA" if eid >= 0 else META_ENTRY_KINDS.get(eid, "META")
                lac = int.from_bytes(rec[16:24], "big", signed=True) if eid >= 0 and len(rec) >= 24 else None
                if args.json:
                    d = {
                        "journal": str(f),
                        "offset": off,
                        "ledger_id": lid,
                        "entry_id": eid,
                        "size": len(rec),
                        "type": kind,
                        "last_add_confirmed": lac,
                    }
                    if args.msg:
                        d["data"] = rec.hex()
                    print(json.dumps(d))
                else:
                    print(f"--------- Lid={lid}, Eid={eid}, ByteOffset={off}, EntrySize={len(rec)} ---------")
                    print(f"Type:           {kind}")
                    if lac is not None:
                        print(f"LastConfirmed:  {lac}")
                    if args.msg:
                        print(f"Data:           {rec.hex()}")
            for i in issues:
                problems += 1
                print(f"pulsarkit readjournal: warning: {i}", file=sys.stderr)
        return EXIT_OK if not problems else EXIT_DATA_PROBLEMS

    return run


def _hex(s: str) -> bool:
    try:
        int(s, 16)
        return True
    except ValueError:
        return False
