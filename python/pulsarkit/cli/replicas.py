"""Several bookies sharing one metadata store: every entry's copies checked against its write set::

    pulsarkit replicas --metadata-dir M --bookie [ID=]DIR [--bookie [ID=]DIR ...]
    pulsarkit replicas --zookeeper-dir ZK [--zookeeper-log-dir L] [--zxid N] --bookie [ID=]DIR ...
    pulsarkit replicas --metadata-store zk:HOST:PORT[/chroot] --bookie [ID=]DIR ...
                       [--ledger ID]... [--view problems|ledgers] [--json | --parquet FILE] [--strict]

Each ``--bookie`` is a bookie's ledger directory (the one holding ``current/``) or a standalone's data
directory; its bookie id comes from its cookie (``current/VERSION``), or from ``ID=`` for a directory
without one (``--bookie 127.0.0.1:3181=/data/bk1``; a directory of several ledger directories is
named once per directory). ``--metadata-dir`` is the RocksDB metadata store or a standalone's data
directory holding one; a cluster whose metadata is in ZooKeeper gives ``--zookeeper-dir`` instead (the
ZooKeeper server's data directory, read offline) or ``--metadata-store`` (the live ZooKeeper, read-only).
The table shows one line per ledger, then one per problem (under-replicated, unexpected replica, divergent,
unreadable); ``--json``/``--parquet`` give the ``--view`` table. Read only; ``--strict`` exits 3 when there is
a problem or an unreadable part.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pyarrow.parquet as pq

from ..scan.bookie_dir import bookie_parts, find_layout, is_rocksdb
from ..scan.datadir import open_data_dir
from ..scan.records import DataDirError
from ..scan.replicas import replica_report
from .command import EXIT_DATA_PROBLEMS, Runner, command, output_args, output_file
from .datadir import _finish, _said_zxid, _table, _zookeeper, _zookeeper_args


def _bookie_arg(value: str) -> tuple[str | None, Path]:
    """``[ID=]DIR``: an id is what comes before a ``=`` that is not part of a path."""
    head, sep, tail = value.partition("=")
    if sep and head and "/" not in head and os.sep not in head:
        return head, Path(tail)
    return None, Path(value)


@command(
    "replicas",
    help="several bookies: which replica each entry is read from, and under-replicated, "
    "unexpected, divergent or unreadable copies",
)
def _replicas(p: argparse.ArgumentParser) -> Runner:
    p.add_argument("--metadata-dir", help="the RocksDB metadata store (or a data dir holding it)")
    _zookeeper_args(p, "--metadata-dir")
    p.add_argument(
        "--bookie",
        action="append",
        required=True,
        metavar="[ID=]DIR",
        help="a bookie: its ledger directory, the directory its journal/ and ledgers/ sit under, or a standalone's "
        "data dir (repeatable); ID= names a bookie without a cookie",
    )
    p.add_argument("--ledger", type=int, action="append", help="only this ledger (repeatable)")
    p.add_argument(
        "--view", choices=("problems", "ledgers"), default="problems", help="the table --json/--parquet give"
    )
    p.add_argument("--strict", action="store_true", help="exit 3 when there is a problem or an unreadable part")
    output_args(p)

    def run(args: argparse.Namespace) -> int:
        zk_kw = _zookeeper(args)
        given = [args.metadata_dir, zk_kw["zookeeper_dir"], zk_kw["metadata_store"]]
        if sum(x is not None for x in given) != 1:
            raise DataDirError("give the metadata: --metadata-dir or --zookeeper-dir or --metadata-store (one of them)")
        md = None
        if args.metadata_dir is not None:
            md = Path(args.metadata_dir)
            if not is_rocksdb(md):
                md = find_layout(md)[0]
        named: dict[str, list[Path]]
        dirs, journals, named = [], [], {}
        for value in args.bookie:
            bid, d = _bookie_arg(value)
            led, jrn = bookie_parts(d)
            dirs += led
            journals += jrn
            if bid is not None:
                named.setdefault(bid, []).extend(dict.fromkeys([*led, *jrn]))
        dd = _said_zxid(
            open_data_dir(metadata_dir=md, ledger_dirs=dirs, journal_dirs=journals, bookies=named or None, **zk_kw),
            args,
        )
        if args.ledger:
            missing = [lid for lid in args.ledger if lid not in dd.ledgers]
            if missing:
                raise DataDirError(f"no ledger {missing[0]} in this data directory")
        rep = replica_report(dd, args.ledger)
        table = rep.problems_table() if args.view == "problems" else rep.ledgers_table()
        if args.parquet:
            given = [args.metadata_dir, *(v for k, v in zk_kw.items() if k.endswith("_dir"))]
            inputs = [*(x for x in given if x), *(str(d) for d in dirs)]
            with output_file(args.parquet, overwrite=args.overwrite, inputs=inputs) as dest:
                pq.write_table(table, dest)
        elif args.json:
            for r in table.to_pylist():
                if "read_from" in r and isinstance(r["read_from"], list):
                    r["read_from"] = dict(r["read_from"])  # Arrow gives a map as (key, value) pairs
                print(json.dumps(r))
        else:
            rows = [dict(r) for r in rep.ledgers]
            for r in rows:
                if r["ensemble_size"] is not None:  # E/Qw/Aq; a deleted ledger has no metadata
                    r["quorums"] = f"{r['ensemble_size']}/{r['write_quorum']}/{r['ack_quorum']}"
                r["read_from"] = " ".join(f"{b}:{n}" for b, n in r["read_from"].items())
            cols = ["ledger_id", "kind", "state", "quorums", "entries", "copies", "under_replicated"]
            _table(rows, cols + ["unexpected_replica", "divergent", "unreadable", "read_from"])
            if rep.problems:
                print()
                probs = [dict(r, bookies=",".join(r["bookies"])) for r in rep.problems]
                _table(probs, ["ledger_id", "entry_id", "kind", "bookies", "read_from", "evidence"])
            print(
                f"{len(rep.bookies)} bookie(s) ({', '.join(rep.bookies)}), {len(rep.ledgers)} ledger(s), "
                f"{len(rep.problems)} problem(s)"
            )
            absent: dict[str, int] = {}
            for r in rep.ledgers:
                for b in r["bookies_absent"]:
                    absent[b] = absent.get(b, 0) + 1
            for b, n in sorted(absent.items()):  # a missing bookie is named: its copies were not checked
                print(f"not given: bookie {b}, in the ensembles of {n} ledger(s); its copies were not checked")
        code = _finish(dd, args)
        return EXIT_DATA_PROBLEMS if args.strict and rep.problems else code

    return run
