"""Why the bookies' disks are full, read-only::

    pulsarkit orphans DATA_DIR   [--json | --parquet FILE] [--plan FILE [--include-review]]
    pulsarkit du DATA_DIR        [--by log|owner|ledger] [--json | --parquet FILE]
    pulsarkit fsck DATA_DIR      [--json | --parquet FILE]   (exit 3 when it finds an error)
    pulsarkit orphans-cleanup PLAN [--execute [--backup DIR]] [--json]
    pulsarkit gc DATA_DIR        [--force] [--suspend-major] [--suspend-minor] [--plan FILE]
                                 [--execute [--from-plan FILE]] [--json]

``orphans`` lists every ledger nothing owns, with its evidence and whether deleting it is safe by this
snapshot; ``--plan`` writes the reviewable cleanup plan (JSON). ``du`` attributes every byte of the
entry logs to its ledger and owner, live or dead, and says why dead bytes are still on disk. Nothing
is ever deleted by these commands, except ``orphans-cleanup --execute``: it re-checks a reviewed plan
against the current metadata (without ``--execute``, the dry run, it shows the plan alone), backs up
what it deletes with ``--backup``, and deletes only ledger metadata (the bookies' GC then reclaims the entries); and
``gc --execute``, the bookie's own garbage collection and transactional compaction run offline on a
stopped bookie (a plan, printed or written with ``--plan``, without ``--execute``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ..analysis.fsck import fsck_table
from ..analysis.orphan_cleanup import execute
from ..analysis.orphans import (
    MAJOR_COMPACTION_THRESHOLD,
    MINOR_COMPACTION_THRESHOLD,
    OrphanCleanupPlan,
    cleanup_plan,
    disk_usage_rows,
    disk_usage_table,
    orphans_table,
)
from ..bookkeeper.gc import GcConfig, GcRequest, LedgerManager, reclaiming_level
from ..bookkeeper.gc_cluster import BookieGcRun, GcPlans, execute_bookies, open_bookies, plan_bookies
from ..bookkeeper.key_value_storage import holding_lock
from ..errors import BookieError
from ..metadata.reader import LedgerIndex
from ..metadata.store import MetadataStore
from ..metadata.zookeeper_live import split_metadata_store_url
from ..plan import to_data
from ..scan.bookie_dir import bookie_ledger_dir, find_layout
from ..scan.datadir import DataDirSpec, metadata_store_metadata, zookeeper_metadata
from ..scan.records import DataDirError
from .command import EXIT_DATA_PROBLEMS, Runner, command, output_file, overwrite_arg
from .datadir import _dir_args, _finish, _inputs, _open, _table, data_dir_spec


def _parquet_or_json(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="one JSON object per line")
    g.add_argument("--parquet", metavar="FILE", help="write a Parquet file instead of printing")
    overwrite_arg(p)


@command("orphans", help="ledgers nothing owns (metadata without owner, on disk without metadata, ...), read-only")
def _orphans(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    _parquet_or_json(p)
    p.add_argument("--plan", metavar="FILE", help="also write the cleanup plan (JSON) for review")
    p.add_argument("--include-review", action="store_true", help="put 'review' findings in the plan too")

    def run(args: argparse.Namespace) -> int:
        dd = _open(args)
        if args.plan:
            with output_file(args.plan, overwrite=args.overwrite, inputs=_inputs(args)) as dest:
                cleanup_plan(dd, include_review=args.include_review).write(dest)
        if args.parquet:
            with output_file(args.parquet, overwrite=args.overwrite, inputs=_inputs(args)) as dest:
                pq.write_table(orphans_table(dd), dest)
        elif args.json:
            for f in orphans_table(dd).to_pylist():
                print(json.dumps(f))
        else:
            rows = orphans_table(dd).to_pylist()
            _table(rows, ["ledger_id", "category", "verdict", "owner", "bytes_on_bookie", "evidence"])
            safe = sum(r["bytes_on_bookie"] for r in rows if r["verdict"] == "safe")
            print(f"{len(rows)} orphan ledger(s); {safe} bytes held by the ones safe to delete")
        return _finish(dd, args)

    return run


@command("du", help="every byte of the entry logs by ledger and owner, live or dead, and why dead bytes remain")
def _du(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    p.add_argument("--by", choices=("log", "owner", "ledger"), default="log", help="how the table is grouped")
    _parquet_or_json(p)

    def run(args: argparse.Namespace) -> int:
        dd = _open(args)
        if args.parquet:
            with output_file(args.parquet, overwrite=args.overwrite, inputs=_inputs(args)) as dest:
                pq.write_table(disk_usage_table(dd), dest)
            return _finish(dd, args)
        rows = list(disk_usage_rows(dd))
        if args.by == "ledger":
            out = rows
            cols = ["log_id", "ledger_id", "bytes", "live", "owner_class", "owner", "reason"]
        elif args.by == "owner":
            agg: dict[tuple[str, str | None, bool], int] = defaultdict(int)
            for r in rows:
                agg[(r["owner_class"], r["owner"], r["live"])] += r["bytes"]
            out = [
                {"owner_class": c, "owner": o, "live": lv, "bytes": b} for (c, o, lv), b in sorted(agg.items(), key=str)
            ]
            cols = ["owner_class", "owner", "live", "bytes"]
        else:
            logs: dict[int, dict[str, Any]] = {}
            for r in rows:
                g = logs.setdefault(
                    r["log_id"],
                    {
                        "log_id": r["log_id"],
                        "total": r["log_total_size"],
                        "live": 0,
                        "dead": 0,
                        "usage": r["log_usage"],
                    },
                )
                g["live" if r["live"] else "dead"] += r["bytes"]
            out = list(logs.values())
            for g in out:
                level = reclaiming_level(g["usage"], MINOR_COMPACTION_THRESHOLD, MAJOR_COMPACTION_THRESHOLD)
                if not g["dead"]:
                    g["next_step"] = "nothing to reclaim"
                else:
                    g["next_step"] = f"{level} compaction reclaims it" if level else "kept: usage above both thresholds"
            cols = ["log_id", "total", "live", "dead", "usage", "next_step"]
        if args.json:
            for r in out:
                print(json.dumps(r))
        else:
            _table(out, cols)
            live = sum(r["bytes"] for r in rows if r["live"])
            dead = sum(r["bytes"] for r in rows if not r["live"])
            print(f"{len({r['log_id'] for r in rows})} entry log(s): {live} live bytes, {dead} dead bytes")
        if not rows and not dd.entry_logs():
            raise DataDirError("no entry logs in this data directory")
        return _finish(dd, args)

    return run


@command(
    "fsck",
    help="check every entry log (header, ledgers map, framing, digests) against the index and journal; exit 3 when "
    "it finds an error, --strict or not",
)
def _fsck(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    _parquet_or_json(p)

    def run(args: argparse.Namespace) -> int:
        dd = _open(args)
        if args.parquet:
            with output_file(args.parquet, overwrite=args.overwrite, inputs=_inputs(args)) as dest:
                t = fsck_table(dd)
                pq.write_table(t, dest)
            rows = t.to_pylist()
        else:
            rows = fsck_table(dd).to_pylist()
            if args.json:
                for r in rows:
                    print(json.dumps(r))
            else:
                shown = [r for r in rows if r["severity"] != "info"]
                if shown:
                    _table(shown, ["severity", "check", "path", "offset", "ledger_id", "entry_id", "message"])
        errors = sum(r["severity"] == "error" for r in rows)
        warnings = sum(r["severity"] == "warning" for r in rows)
        if not args.json:
            print(f"{errors} error(s), {warnings} warning(s), {len(rows) - errors - warnings} note(s)", file=sys.stderr)
        rc = _finish(dd, args)
        return EXIT_DATA_PROBLEMS if errors else rc

    return run


@command("orphans-cleanup", help="apply a reviewed orphan cleanup plan (dry run unless --execute), re-checked first")
def _orphans_cleanup(p: argparse.ArgumentParser) -> Runner:
    p.add_argument("plan", help="the plan written by 'pulsarkit orphans DATA_DIR --plan FILE'")
    p.add_argument("--execute", action="store_true", help="delete; without it nothing is written")
    p.add_argument("--backup", metavar="DIR", help="first save each ledger's metadata and entries here (a new dir)")
    p.add_argument(
        "--metadata-store",
        metavar="URL",
        help="execute against this live ZooKeeper (zk:host:port[,host:port][/chroot]) instead of the plan's RocksDB "
        "store: re-checked by one consistent read, each node compare-and-deleted on the version the plan pinned",
    )
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")

    def run(args: argparse.Namespace) -> int:
        plan = OrphanCleanupPlan.read(args.plan)
        if not args.execute:  # the dry run is the plan alone: nothing is opened, nothing re-checked
            todo, skipped, deleted, nbytes = plan.to_delete, [], [], sum(i.bytes_on_bookie for i in plan.to_delete)
            res = {"dry_run": True, "to_delete": to_data(todo), "skipped": [], "deleted": [], "bytes": nbytes}
        else:
            r = execute(plan, backup_dir=args.backup, metadata_store=args.metadata_store)
            todo, skipped, deleted, nbytes = r.to_delete, r.skipped, r.deleted, r.bytes
            res = {"dry_run": False, **r.to_dict()}
        if args.json:
            print(json.dumps(res))
            return 0
        _table(
            [{"ledger_id": i.ledger_id, "category": i.category, "bytes": i.bytes_on_bookie} for i in todo],
            ["ledger_id", "category", "bytes"],
        )
        for s in skipped:
            print(f"skipped {s.kind} {s.id}: {s.why}")
        verb = "would delete" if not args.execute else "deleted"
        n = len(todo) if not args.execute else len(deleted)
        print(
            f"{verb} the metadata of {n} ledger(s), {nbytes} bytes on the bookies"
            + ("; run again with --execute to delete (re-checked then)" if not args.execute else "")
        )
        return 0

    return run


@command("gc", help="the bookie's garbage collection and compaction, offline: a plan (dry run) unless --execute")
def _gc(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p, strict=False)
    p.add_argument("--force", action="store_true", help="the manual trigger (forceGC): ignore compaction intervals")
    p.add_argument("--suspend-major", action="store_true", help="no major compaction in this run")
    p.add_argument("--suspend-minor", action="store_true", help="no minor compaction in this run")
    p.add_argument("--minor-threshold", type=float, default=GcConfig.minor_compaction_threshold)
    p.add_argument("--major-threshold", type=float, default=GcConfig.major_compaction_threshold)
    p.add_argument("--max-time-ms", type=int, default=-1, help="stop compacting after this long (-1: no limit)")
    p.add_argument(
        "--rate",
        type=int,
        default=0,
        help="entries per second to copy (a bookie throttles to spare live traffic; offline the default is 0, none)",
    )
    p.add_argument("--disk-usage", type=float, help="the fill level to plan for (default: measured)")
    p.add_argument("--plan", metavar="FILE", help="write the plan (JSON) for review, without --execute (a dry run)")
    p.add_argument("--from-plan", metavar="FILE", help="with --execute: apply this reviewed plan, re-checked")
    p.add_argument("--execute", action="store_true", help="delete and compact; without it nothing is written")
    p.add_argument("--json", action="store_true", help="print the plan or result as JSON")
    overwrite_arg(p)

    def run(args: argparse.Namespace) -> int:
        spec = data_dir_spec(args)
        if spec.journal_dirs or spec.index_dirs:
            raise DataDirError(
                "gc works on ledger directories (their index within): --journal-dir and --index-dir are not used by it"
            )
        config = GcConfig(
            minor_compaction_threshold=args.minor_threshold,
            major_compaction_threshold=args.major_threshold,
            minor_compaction_max_time_ms=args.max_time_ms,
            major_compaction_max_time_ms=args.max_time_ms,
            compaction_rate_by_entries=args.rate,
        )
        if args.plan and args.execute:  # refused before anything is opened: the plan was silently not written
            raise DataDirError(
                "--plan writes a dry run's plan for review: run without --execute to write it, then apply the "
                "reviewed file with --execute --from-plan FILE"
            )
        reviewed = None
        if args.from_plan:
            if not args.execute:
                raise DataDirError("--from-plan applies a plan: give --execute too")
            reviewed = GcPlans.read(args.from_plan)
        with (
            _gc_metadata(spec, args.execute, reviewed) as (metadata, bookies, zxid),
            open_bookies(bookies, read_only=not args.execute) as dirs,
        ):
            request = GcRequest(
                force=args.force,
                suspend_major=args.suspend_major,
                suspend_minor=args.suspend_minor,
                disk_usage=args.disk_usage,
            )
            plans = reviewed or plan_bookies(dirs, metadata, config, request)
            if zxid is not None and not reviewed:
                plans = replace(plans, state={**plans.state, "metadata_zxid": zxid})
            if args.execute:
                try:
                    runs = execute_bookies(dirs, metadata, plans, config)
                except BookieError as e:
                    raise DataDirError(str(e)) from None
            else:
                runs = [BookieGcRun(p.ledger_dir, p, None) for p in plans.bookies]
        if args.plan:
            with output_file(args.plan, overwrite=args.overwrite, inputs=spec.inputs()) as dest:
                plans.write(dest)
        if args.json:
            doc = {"kind": "bookie-gc-run", "bookies": to_data(runs)} if args.execute else plans.to_dict()
            print(json.dumps(doc))
            return 0
        for run_ in runs:
            plan = run_.plan
            comp = plan.compaction
            print(f"{plan.ledger_dir}: disk {plan.disk_pressure.state}, {comp.level or 'no'} compaction")
            rows = [{"log_id": f"{c.log_id:x}", "usage": f"{c.usage:.1%}", "reason": c.reason} for c in comp.logs]
            _table(rows, ["log_id", "usage", "reason"])
            print(
                f"  {len(plan.ledgers_to_delete)} ledger(s) to delete, {len(plan.logs_to_remove)} log(s) to "
                f"remove, {len(comp.logs)} to compact: about {plan.bytes_reclaimed_estimate} bytes"
            )
            r = run_.result
            if r is not None:
                print(
                    f"  done: {len(r.deleted_ledgers)} ledger(s) deleted, {len(r.removed_logs)} log(s) removed, "
                    f"{len(r.compacted_logs)} compacted, {r.reclaimed_bytes} bytes reclaimed, "
                    f"{r.written_bytes} written, {len(r.skipped)} skipped"
                )
        if not args.execute:
            print("dry run: nothing was written; run again with --execute (the bookie must be stopped)")
        return 0

    return run


@contextmanager
def _gc_metadata(
    spec: DataDirSpec, execute: bool, reviewed: GcPlans | None
) -> Iterator[tuple[LedgerManager, list[Path], int | None]]:
    """What GC compares the bookies with: the ledger manager, the ledger directories, and the ZooKeeper
    transaction the metadata is at (None for a RocksDB store)."""
    store = spec.metadata_store
    if store is not None:
        scheme, rest = split_metadata_store_url(store)
        if scheme == "rocksdb" and spec.configuration_metadata_store is None:
            spec = replace(spec, metadata_dir=rest, metadata_store=None)  # rocksdb:PATH is --metadata-dir
        else:
            if execute:
                # The live tree moves on after it was read: a ledger created since would look deleted.
                raise DataDirError(
                    "refusing --execute with --metadata-store: a live ZooKeeper changes after it is read; plan from "
                    "it, and execute on a copy of its data directory (--zookeeper-dir) with the bookies stopped"
                )
            source = metadata_store_metadata(store, spec.configuration_metadata_store)
            yield LedgerIndex(source.reader), [bookie_ledger_dir(Path(d)) for d in spec.ledger_dirs], source.zxid
            return
    if spec.zookeeper_dir is not None:
        if spec.zxid is not None:
            raise DataDirError(
                "gc plans against the metadata as it is now: with --zxid (an older state) ledgers created since "
                "would look deleted"
            )
        source = zookeeper_metadata(
            spec.zookeeper_dir,
            spec.zookeeper_log_dir,
            spec.configuration_zookeeper_dir,
            None,
            spec.configuration_zookeeper_log_dir,
            spec.zookeeper_chroot,
        )
        if execute and source.issues:
            raise DataDirError(f"refusing --execute: the ZooKeeper data has problems ({source.issues[0]})")
        # No lock guards a ZooKeeper data directory: the plan names the transaction it was made at, and a
        # reviewed plan runs only on that same state (anything written since would have to be planned again).
        if reviewed is not None and reviewed.state.get("metadata_zxid") != source.zxid:
            raise DataDirError(
                f"refusing: the plan was made at ZooKeeper zxid {reviewed.state.get('metadata_zxid')}, the metadata "
                f"is now at {source.zxid:#x}; plan again"
            )
        yield LedgerIndex(source.reader), [bookie_ledger_dir(Path(d)) for d in spec.ledger_dirs], source.zxid
        return
    md_dir, bookies = find_layout(Path(spec.path)) if spec.path is not None else (None, [])
    md_dir = Path(spec.metadata_dir) if spec.metadata_dir is not None else md_dir
    if spec.ledger_dirs:
        bookies = [bookie_ledger_dir(Path(d)) for d in spec.ledger_dirs]
    if md_dir is None:
        raise DataDirError("give DATA_DIR, or --metadata-dir (or --zookeeper-dir) and --ledger-dir")
    if reviewed is not None and "metadata_zxid" in reviewed.state:
        raise DataDirError("refusing: the plan was made from a ZooKeeper data directory, not this metadata store")
    # --execute deletes what the metadata says is dead: the store's lock is held throughout, so no
    # broker is running on it (it would refuse to start), and one that is running is a clear refusal
    held = holding_lock(md_dir, error=DataDirError, what="metadata store") if execute else nullcontext()
    with held, MetadataStore(md_dir, read_only=True) as metadata:
        yield metadata, bookies, None
