"""What the disk will do, and a page that shows it::

    pulsarkit whatif DATA_DIR [--retention-minutes M] [--retention-mb MB] [--ttl-seconds S]
                              [--conf FILE | --no-conf] [--horizon-hours H] [--target-bytes B] [--json]
    pulsarkit report DATA_DIR -o report.html [the same options]

``whatif`` replays retention, TTL and the bookies' GC from one snapshot and prints the timeline of what
is deleted, removed and compacted, with the bytes each bookie holds after; ``--target-bytes`` adds the
fewest logs to compact to get under a target. ``report`` writes one self-contained HTML page with the
disk usage per log, by owner and by reason, the orphans, the fsck verdict and the what-if timeline.
Retention, TTL and GC come from the data itself unless a flag says otherwise: namespace policies in the
store, then the configuration files beside the data, then Pulsar's defaults; both say which each
setting came from. Both only read.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..analysis.report import build_report
from ..analysis.whatif import WhatIf, compaction_to_target, simulate
from ..bookkeeper.gc import GcConfig
from .command import Runner, command, output_file, overwrite_arg
from .datadir import _dir_args, _finish, _inputs, _open, _table


def _whatif_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "what-if settings: each one given here overrides, for every topic, the policies stored in the data "
        "(namespace policies), the configuration files beside it (standalone.conf, broker.conf, bookkeeper.conf, "
        "bk_server.conf) and Pulsar's defaults, in that order"
    )
    g.add_argument("--retention-minutes", type=int, help="retention time (-1: forever; default 0)")
    g.add_argument("--retention-mb", type=int, help="retention size (-1: unlimited; default 0)")
    g.add_argument("--ttl-seconds", type=int, help="message TTL (0: none; the default)")
    g.add_argument("--retention-check-s", type=int, help="retentionCheckIntervalInSeconds (default 120)")
    g.add_argument("--horizon-hours", type=float, default=48.0)
    g.add_argument("--gc-wait-ms", type=int, help=f"gcWaitTime (default {GcConfig.gc_wait_time_ms})")
    g.add_argument("--minor-threshold", type=float, help=f"default {GcConfig.minor_compaction_threshold}")
    g.add_argument("--major-threshold", type=float, help=f"default {GcConfig.major_compaction_threshold}")
    g.add_argument("--minor-interval-s", type=int, help=f"default {GcConfig.minor_compaction_interval_s}")
    g.add_argument("--major-interval-s", type=int, help=f"default {GcConfig.major_compaction_interval_s}")
    g.add_argument(
        "--conf",
        action="append",
        metavar="FILE",
        help="a broker or bookie configuration file to read instead of those found beside the data (repeatable)",
    )
    g.add_argument("--no-conf", action="store_true", help="read no configuration file")
    g.add_argument("--not-loaded", action="store_true", help="topics without active cursors are never trimmed")
    g.add_argument("--target-bytes", type=int, help="also: the fewest logs to compact to get under this")


def _whatif(args: argparse.Namespace) -> WhatIf:
    gc = {
        "gc_wait_time_ms": args.gc_wait_ms,
        "minor_compaction_threshold": args.minor_threshold,
        "major_compaction_threshold": args.major_threshold,
        "minor_compaction_interval_s": args.minor_interval_s,
        "major_compaction_interval_s": args.major_interval_s,
    }
    return WhatIf(
        retention_time_minutes=args.retention_minutes,
        retention_size_mb=args.retention_mb,
        ttl_seconds=args.ttl_seconds,
        retention_check_interval_s=args.retention_check_s,
        horizon_hours=args.horizon_hours,
        gc_overrides={k: v for k, v in gc.items() if v is not None},
        config_files=() if args.no_conf else (tuple(args.conf) if args.conf else None),
        assume_loaded=not args.not_loaded,
    )


def _print_settings(out: dict[str, Any]) -> None:
    """Which value each setting took, and from where (flag, namespace policy, config file, default)."""
    st = out["settings"]
    for name, src in st["sources"].items():
        value = st["gc"][name] if name in st["gc"] else st[name]
        print(f"setting {name} = {value} ({src})")
    for ml, p in out["topics"].items():
        # the topics a namespace policy governs (the others follow the broker-wide lines above)
        if (
            p["retention_source"] != st["sources"]["retention_time_minutes"]
            or p["ttl_source"] != st["sources"]["ttl_seconds"]
        ):
            print(
                f"topic {ml}: retention {p['retention_time_minutes']} min / {p['retention_size_mb']} MB "
                f"({p['retention_source']}), ttl {p['ttl_seconds']} s ({p['ttl_source']})"
            )
    for note in st["notes"]:
        print(f"note: {note}")


@command("whatif", help="simulate retention, TTL and bookie GC: which ledgers go when, what each bookie frees")
def _whatif_cmd(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    _whatif_args(p)
    p.add_argument("--json", action="store_true", help="print the whole result as one JSON object")

    def run(args: argparse.Namespace) -> int:
        dd = _open(args)
        out = simulate(dd, _whatif(args))
        if args.target_bytes is not None:
            out["to_target"] = compaction_to_target(dd, args.target_bytes)
        if args.json:
            print(json.dumps(out))
            return _finish(dd, args)
        _print_settings(out)
        _table(out["timeline"], ["hours", "event", "topic", "ledger_id", "log_id", "bytes_reclaimed", "disk"])
        s = out["summary"]
        for bookie, b in s["bookies"].items():
            print(f"{bookie}: {b['bytes_before']} -> {b['bytes_after']} bytes")
        print(
            f"{s['ledgers_deleted']} ledger(s) deleted, {s['logs_removed']} log(s) removed, {s['logs_compacted']} "
            f"compacted; {s['bytes_reclaimed']} bytes reclaimed, {s['bytes_written_by_compaction']} written"
        )
        if "to_target" in out:
            t = out["to_target"]
            verdict = "reachable" if t["reachable"] else "NOT reachable by compaction alone"
            print(
                f"target {t['target_bytes']}: {verdict}; compact {len(t['logs'])} log(s) -> {t['bytes_after']} "
                f"bytes, needs {t['headroom_bytes']} bytes free while running"
            )
        return _finish(dd, args)

    return run


@command("report", help="an HTML page: disk per entry log, by owner and reason, orphans, fsck, what-if timeline")
def _report(p: argparse.ArgumentParser) -> Runner:
    _dir_args(p)
    _whatif_args(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the HTML file to write")
    overwrite_arg(p)

    def run(args: argparse.Namespace) -> int:
        dd = _open(args)
        page = build_report(dd, _whatif(args), args.target_bytes)
        with output_file(args.output, overwrite=args.overwrite, inputs=_inputs(args)) as dest:
            with open(dest, "w") as f:
                f.write(page)
        print(f"wrote {args.output} ({len(page)} bytes)")
        return _finish(dd, args)

    return run
