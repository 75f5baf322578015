"""Entry-log commands: what ``bookkeeper shell readlog`` / ``readlogmetadata`` do, one file at a time
there, over any number of files and directories here::

    pulsarkit readlog PATH...            [--json | --parquet FILE] [-l LEDGER] [-e ENTRY] [--decode] [-m]
    pulsarkit readlogmetadata PATH...    [--json | --parquet FILE] [--no-index]

PATH is an entry-log file (``<hex id>.log``) or a directory searched recursively (a ledger
directory, its ``current/``, or a whole bookie data directory).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.parquet as pq

from .. import bulk
from ..bookkeeper.entrylog import entry_log_schema, find_entry_logs, read_entry_log_metadata, scan_entry_logs
from ..errors import BookieError
from ..lazy import deferred
from ..metadata import MetadataStore
from .command import (
    EXIT_DATA_PROBLEMS,
    EXIT_OK,
    Progress,
    Runner,
    command,
    output_args,
    output_file,
    progress_arg,
)

pc = deferred("pyarrow.compute")


def _fmt_time(ms: int | None) -> str:
    if ms is None:
        return "-"
    try:
        t = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC)
        return f"{ms} ({t.isoformat(timespec='milliseconds').replace('+00:00', 'Z')})"
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _filter(batch: Any, args: argparse.Namespace) -> Any:

    is_issue = pc.is_valid(batch.column("issue"))
    keep = None
    conds = []
    if args.ledger_id:
        conds.append(pc.is_in(batch.column("ledger_id"), value_set=pa.array(args.ledger_id, pa.int64())))
    if args.entry_id is not None:
        conds.append(pc.equal(batch.column("entry_id"), args.entry_id))
    # Records overlapping [start_pos, end_pos], as BookKeeper's -sp/-ep: a record spans offset..offset+size+3.
    if args.start_pos is not None:
        conds.append(pc.greater_equal(pc.add(batch.column("offset"), pc.add(batch.column("size"), 3)), args.start_pos))
    if args.end_pos is not None:
        conds.append(pc.less_equal(batch.column("offset"), args.end_pos))
    for c in conds:
        keep = c if keep is None else pc.and_(keep, c)
    if keep is None:
        return batch
    keep = pc.or_(is_issue, pc.fill_null(keep, False))
    return batch.filter(keep)


def _decode(batch: Any) -> Any:

    d = bulk.decode_metadata(batch.column("payload"), verify_checksum=True)
    return {
        "producer_name": d.column("producer_name"),
        "sequence_id": d.column("sequence_id"),
        "publish_time": d.column("publish_time"),
        "num_messages": d.column("num_messages"),
        "broker_timestamp": d.column("broker_timestamp"),
        "index": d.column("index"),
        "checksum_ok": d.column("checksum_ok"),
        "decode_error": d.column("error"),
    }


_JSON_DROP = {"payload"}


def _readlog(p: argparse.ArgumentParser) -> Runner:
    p.add_argument("paths", nargs="+", metavar="PATH", help="entry-log files or directories")
    p.add_argument("-l", "--ledger-id", type=int, action="append", help="only this ledger (repeatable)")
    p.add_argument("-e", "--entry-id", type=int, help="only this entry id")
    p.add_argument("-sp", "--start-pos", type=int, help="only records overlapping offsets from here")
    p.add_argument("-ep", "--end-pos", type=int, help="only records overlapping offsets up to here")
    p.add_argument("-m", "--msg", action="store_true", help="show the payload (hex; in JSON as payload_hex)")
    p.add_argument(
        "--decode",
        action="store_true",
        help="decode the Pulsar entry: producer, sequence id, publish time, messages",
    )
    p.add_argument(
        "--digest-type",
        default="CRC32C",
        type=str.upper,
        choices=["CRC32C", "CRC32", "MAC", "DUMMY", "AUTO"],
        help="bookie digest to verify (default CRC32C, Pulsar's default; AUTO detects per ledger)",
    )
    pw = p.add_mutually_exclusive_group()
    pw.add_argument(
        "--password", default="", help="ledger password, for MAC digests (visible to ps: prefer the next two)"
    )
    pw.add_argument("--password-env", metavar="VAR", help="read the ledger password from this environment variable")
    pw.add_argument("--password-file", metavar="FILE", help="read the ledger password from this file (one line)")
    p.add_argument("--no-payload", action="store_true", help="leave the payload column out of --parquet")
    p.add_argument("--strict", action="store_true", help="exit 3 when a log has issues or a digest does not verify")
    output_args(p)
    progress_arg(p)
    return _with_output(_run_readlog)


def _logs_with_progress(args: argparse.Namespace, what: str) -> tuple[list[tuple[Any, int]], Progress]:
    """The entry logs under the arguments' paths, and byte progress over all of them."""
    logs = find_entry_logs(args.paths)
    if not logs:
        raise BookieError(f"no entry logs (<hex id>.log) under {' '.join(args.paths)}")
    return logs, Progress(sum(os.path.getsize(p) for p, _ in logs), what, args.progress)


def _with_output(run: Callable[[argparse.Namespace, str | None], int]) -> Runner:
    """Runs a command with its ``--parquet`` file (if any) checked first and written atomically."""

    def with_output(args: argparse.Namespace) -> int:
        if not args.parquet:
            return run(args, None)
        with output_file(args.parquet, overwrite=args.overwrite, inputs=args.paths) as dest:
            return run(args, dest)

    return with_output


def _password(args: argparse.Namespace) -> bytes:
    """The ledger password from --password, --password-env or --password-file; never printed."""
    if args.password_env:
        if args.password_env not in os.environ:
            raise BookieError(f"--password-env: the environment variable {args.password_env} is not set")
        return os.environ[args.password_env].encode()
    if args.password_file:
        with open(args.password_file, "rb") as f:
            return f.read().rstrip(b"\r\n")
    return args.password.encode()


def _run_readlog(args: argparse.Namespace, dest: str | None) -> int:
    password = _password(args)
    logs, progress = _logs_with_progress(args, "readlog")
    out = sys.stdout
    total_records = total_issues = 0
    writer = None
    problems = 0
    done = 0
    try:
        for path, log_id in logs:
            size = os.path.getsize(path)
            scan = scan_entry_logs([(path, log_id)], args.digest_type, password)
            if not args.json and not args.parquet:
                print(f"Scan entry log {log_id} ({log_id:x}.log) at {path}: {size} bytes", file=out)
            for batch in scan:
                if batch.num_rows:
                    last = batch.column("offset")[-1].as_py() + batch.column("size")[-1].as_py()
                    progress.update(done + min(last, size), f"{path.name}")
                problems += _count_problems(batch)
                batch = _filter(batch, args)
                if batch.num_rows == 0:
                    continue
                extra = _decode(batch) if args.decode else {}
                if args.parquet:
                    cols = {n: batch.column(n) for n in batch.schema.names if not (args.no_payload and n == "payload")}
                    cols["path"] = pa.array([str(path)] * batch.num_rows, pa.string())
                    cols.update(extra)
                    t = pa.RecordBatch.from_pydict(cols)
                    if writer is None:
                        writer = pq.ParquetWriter(dest, t.schema)
                    writer.write_batch(t)
                elif args.json:
                    _print_json_rows(batch, extra, str(path), args.msg, out)
                else:
                    _print_human_rows(batch, extra, args.msg, out)
            summary = scan.summaries[0]
            total_records += summary.records
            total_issues += len(summary.issues)
            if not args.json and not args.parquet:
                bad_note = f", {len(summary.issues)} issue(s)" if summary.issues else ""
                print(f"End of entry log {log_id}: {summary.records} records{bad_note}", file=out)
            done += size
    finally:
        progress.close()
        if writer is not None:
            writer.close()
    if not args.json and not args.parquet:
        print(f"Total: {len(logs)} entry log(s), {total_records} records, {total_issues} issue(s)", file=out)
    if args.parquet and writer is None:
        schema = entry_log_schema().append(pa.field("path", pa.string()))
        pq.write_table(schema.empty_table(), dest)
    return EXIT_DATA_PROBLEMS if (args.strict and problems) else EXIT_OK


def _count_problems(batch: Any) -> int:

    issues = pc.sum(pc.is_valid(batch.column("issue")).cast("int64")).as_py() or 0
    bad = pc.sum(pc.equal(batch.column("digest_ok"), False).cast("int64")).as_py() or 0
    return issues + bad


def _print_json_rows(batch: Any, extra: dict[str, Any], path: str, msg: bool, out: TextIO) -> None:
    cols = {n: batch.column(n).to_pylist() for n in batch.schema.names if n not in _JSON_DROP}
    payload = batch.column("payload").to_pylist() if msg else None
    ext = {k: v.to_pylist() for k, v in extra.items()}
    lines = []
    for i in range(batch.num_rows):
        row: dict[str, Any] = {"type": "issue" if cols["issue"][i] is not None else "entry", "path": path}
        for k, v in cols.items():
            row[k] = v[i]
        for k, v in ext.items():
            row[k] = v[i]
        if payload is not None:
            row["payload_hex"] = None if payload[i] is None else payload[i].hex()
        lines.append(json.dumps(row, separators=(",", ":")))
    out.write("\n".join(lines) + "\n")


def _print_human_rows(batch: Any, extra: dict[str, Any], msg: bool, out: TextIO) -> None:
    rows = batch.to_pylist()
    ext = {k: v.to_pylist() for k, v in extra.items()}
    for i, r in enumerate(rows):
        if r["issue"] is not None:
            print(f"!!! {r['issue']} at offset {r['offset']} ({r['size']} bytes): {r['error']}", file=out)
            continue
        print(
            f"--------- Lid={r['ledger_id']}, Eid={r['entry_id']}, ByteOffset={r['offset']}, "
            f"EntrySize={r['size']} ---------",
            file=out,
        )
        print("Type:           DATA", file=out)
        print(f"LastConfirmed:  {r['last_add_confirmed']}", file=out)
        if r["digest_ok"] is None:
            state = "not verified" if r["digest_type"] == "DUMMY" else "unknown"
        else:
            state = "ok" if r["digest_ok"] else "MISMATCH"
        print(f"Digest:         {r['digest_type'] or '-'} {state}", file=out)
        if r["error"]:
            print(f"Error:          {r['error']}", file=out)
        if ext:
            if ext["decode_error"][i]:
                print(f"Decode error:   {ext['decode_error'][i]}", file=out)
            else:
                print(
                    f"Producer:       {ext['producer_name'][i]}  SequenceId: {ext['sequence_id'][i]}  "
                    f"NumMessages: {ext['num_messages'][i]}",
                    file=out,
                )
                print(f"PublishTime:    {_fmt_time(ext['publish_time'][i])}", file=out)
                if ext["broker_timestamp"][i] is not None or ext["index"][i] is not None:
                    print(
                        f"BrokerEntry:    timestamp={_fmt_time(ext['broker_timestamp'][i])} index={ext['index'][i]}",
                        file=out,
                    )
        if msg and r["payload"] is not None:
            data = r["payload"]
            shown = data[:256].hex()
            more = f" ... ({len(data)} bytes)" if len(data) > 256 else ""
            print(f"Data:           {shown}{more}", file=out)


command("readlog", help="print the records of BookKeeper entry logs (files or directories)")(_readlog)


# ------------------------------------------------------------------------------------------------
# readlogmetadata


def _readlogmetadata(p: argparse.ArgumentParser) -> Runner:
    p.add_argument("paths", nargs="+", metavar="PATH", help="entry-log files or directories")
    p.add_argument("--no-index", action="store_true", help="always scan, ignoring the ledgers map")
    p.add_argument(
        "--metadata-dir",
        metavar="DIR",
        help="a metadata store (RocksDB, read-only): bytes of ledgers it still knows are live, the rest dead "
        "(what bookie garbage collection reclaims)",
    )
    p.add_argument("--strict", action="store_true", help="exit 3 when a log needed a fallback scan that found issues")
    output_args(p)
    progress_arg(p)
    return _with_output(_run_readlogmetadata)


def _run_readlogmetadata(args: argparse.Namespace, dest: str | None) -> int:
    live_ledgers: set[int] | None = None
    if args.metadata_dir:
        with MetadataStore(args.metadata_dir, read_only=True) as md:
            live_ledgers = set(md.ledger_ids())
    logs, progress = _logs_with_progress(args, "readlogmetadata")
    totals = [0, 0, 0]  # total_size, remaining_size, live bytes over every log
    out = sys.stdout
    rows: dict[str, list[Any]] = {
        k: []
        for k in (
            "path",
            "log_id",
            "ledger_id",
            "size",
            "total_size",
            "remaining_size",
            "from_index",
            "fallback_reason",
            "issues",
        )
    }
    problems = 0
    done = 0
    try:
        for path, log_id in logs:
            if os.path.getsize(path) == 0:
                # A bookie keeps its next entry log preallocated and empty (its lastId names it): not damage.
                _empty_log(args, out, rows, path, log_id)
                continue
            m = read_entry_log_metadata(path, log_id, use_index=not args.no_index)
            done += os.path.getsize(path)
            progress.update(done, path.name)
            problems += len(m.issues)
            if args.json:
                obj = {
                    "log_id": m.log_id,
                    "path": str(path),
                    "total_size": m.total_size,
                    "remaining_size": m.remaining_size,
                    "usage": m.usage,
                    "ledgers": {str(k): v for k, v in sorted(m.ledgers.items())},
                    **_live_dead(m, live_ledgers),
                    "from_index": m.from_index,
                    "fallback_reason": m.fallback_reason,
                    "issues": [vars(i) for i in m.issues],
                }
                out.write(json.dumps(obj, separators=(",", ":")) + "\n")
            elif args.parquet:
                items: list[tuple[int | None, int | None]] = sorted(m.ledgers.items()) or [(None, None)]
                for lid, size in items:
                    rows["path"].append(str(path))
                    rows["log_id"].append(m.log_id)
                    rows["ledger_id"].append(lid)
                    rows["size"].append(size)
                    rows["total_size"].append(m.total_size)
                    rows["remaining_size"].append(m.remaining_size)
                    rows["from_index"].append(m.from_index)
                    rows["fallback_reason"].append(m.fallback_reason)
                    rows["issues"].append(len(m.issues))
            else:
                source = "ledgers map" if m.from_index else f"scan ({m.fallback_reason or 'requested'})"
                ld = _live_dead(m, live_ledgers)
                if ld:
                    source += f", live={ld['live_size']} dead={ld['dead_size']}"
                print(
                    f"Entry log {m.log_id} ({m.log_id:x}.log) at {path}: total_size={m.total_size} "
                    f"remaining_size={m.remaining_size} usage={m.usage:.3f} ledgers={len(m.ledgers)} from {source}",
                    file=out,
                )
                for lid, size in sorted(m.ledgers.items()):
                    print(f"--------- Lid={lid}, TotalSizeOfEntriesOfLedger={size} ---------", file=out)
                for i in m.issues:
                    print(f"!!! {i}", file=out)
            totals[0] += m.total_size
            totals[1] += m.remaining_size
            totals[2] += _live_dead(m, live_ledgers).get("live_size", 0)
    finally:
        progress.close()
    if not args.json and not args.parquet:
        dead = f" live={totals[2]} dead={totals[1] - totals[2]}" if live_ledgers is not None else ""
        print(f"Total: {len(logs)} entry log(s), total_size={totals[0]} remaining_size={totals[1]}{dead}", file=out)
    if args.parquet:
        schema = pa.schema(
            [
                ("path", pa.string()),
                ("log_id", pa.int64()),
                ("ledger_id", pa.int64()),
                ("size", pa.int64()),
                ("total_size", pa.int64()),
                ("remaining_size", pa.int64()),
                ("from_index", pa.bool_()),
                ("fallback_reason", pa.string()),
                ("issues", pa.int64()),
            ]
        )
        pq.write_table(pa.Table.from_pydict(rows, schema=schema), dest)
    return EXIT_DATA_PROBLEMS if (args.strict and problems) else EXIT_OK


def _empty_log(args: argparse.Namespace, out: Any, rows: dict[str, list[Any]], path: Any, log_id: int) -> None:
    """A zero-byte entry log, in each output format: the bookie's preallocated next log, with nothing in it."""
    if args.json:
        obj = {"log_id": log_id, "path": str(path), "total_size": 0, "remaining_size": 0, "usage": 0.0}
        out.write(json.dumps({**obj, "ledgers": {}, "preallocated": True, "issues": []}, separators=(",", ":")) + "\n")
    elif args.parquet:
        row = {"path": str(path), "log_id": log_id, "ledger_id": None, "size": None, "total_size": 0}
        row.update(remaining_size=0, from_index=False, fallback_reason="preallocated, empty", issues=0)
        for k, v in row.items():
            rows[k].append(v)
    else:
        print(f"Entry log {log_id} ({log_id:x}.log) at {path}: empty, the bookie's preallocated next log", file=out)


def _live_dead(m: Any, live_ledgers: set[int] | None) -> dict[str, int]:
    """Bytes of the log's ledgers the metadata store still knows (live) and of the others (dead)."""
    if live_ledgers is None:
        return {}
    live = sum(size for lid, size in m.ledgers.items() if lid in live_ledgers)
    return {"live_size": live, "dead_size": m.remaining_size - live}


command("readlogmetadata", help="print the ledgers (id → bytes) of BookKeeper entry logs")(_readlogmetadata)
