"""Executing an orphan-ledger cleanup plan: re-checked, backed up, then deleted one ledger at a time.

:func:`pulsarkit.analysis.orphans.cleanup_plan` writes a reviewable :class:`OrphanCleanupPlan` from one
snapshot (a dry run is that plan alone); :func:`execute` applies it later, when the state may have moved
on. The order is the point:

1. The metadata store is opened for writing first. Its RocksDB lock means no broker or bookie can be
   running on it, and none can start while the cleanup runs.
2. A fresh snapshot is taken and every plan item is re-classified. An item is deleted only if it is
   still an orphan of the same class, its metadata node still has the version and creation time the
   plan pinned, and the bookies still hold as many of its entries as the plan saw (an OPEN ledger's
   entries change without its metadata); anything else is skipped with the reason. A snapshot with a
   ``missing`` ledger (referenced but gone: data loss) or unreadable metadata refuses the whole run: its
   inputs are inconsistent and deleting on top of them would hide the problem.
3. With ``backup_dir`` (new or empty, never inside a directory the plan reads, its name fsynced before
   any delete), each ledger's metadata node (raw, with its header) and every entry the bookies hold for
   it (digest-checked; an OPEN ledger's past a gap too), with their ids, are written and fsynced to
   ``backup_dir/ledger-<id>/`` before its node is deleted. :func:`restore_backup` puts the metadata back.
4. Each delete is one compare-and-delete on the node's version. A crash leaves some nodes deleted and
   some not; running the same plan again finds the deleted ones gone ("already deleted") and carries on.

Only metadata is deleted: the bookies reclaim the entries at their next garbage collection (or run
``pulsarkit gc``). Ledgers without metadata (``on_disk_only``) need nothing here.

A cluster's plan (made from a ZooKeeper data directory or a live ZooKeeper) is executed against the live
ZooKeeper (``metadata_store="zk:..."``), never against a snapshot: there is no lock to take, so the re-check is
one consistent read of the live tree (:class:`~pulsarkit.metadata.zookeeper_live.ZkLiveStore`), and each delete is
ZooKeeper's own compare-and-delete on the version the plan pinned
(:class:`~pulsarkit.metadata.zookeeper_write.ZkNodeWriter`): a node changed after the read is not deleted. The
backup keeps each node's data and path; :func:`restore_backup` re-creates them there.
"""

from __future__ import annotations

import json
import os
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from ..durable import fsync_dir, input_holding, make_private_dir, write_durably
from ..errors import BadVersionError, MetadataNotFoundError, MetadataStoreError, PulsarkitError
from ..metadata.store import MetadataStore, StoreItems, ledger_path
from ..metadata.zookeeper_live import ZkLiveStore
from ..metadata.zookeeper_write import ZkNodeWriter
from ..plan import Skipped, to_data
from ..scan.bookie_dir import is_rocksdb
from ..scan.datadir import DataDir, MetadataSource
from ..scan.records import held_pieces
from .orphans import OrphanCleanupItem, OrphanCleanupPlan, find_orphans

_ENTRIES_SCHEMA = pa.schema([("entry_id", pa.int64()), ("data", pa.binary())])


class OrphanCleanupError(PulsarkitError):
    """The plan cannot be applied: inconsistent inputs, or an unusable backup directory."""


@dataclass
class CleanupResult:
    """What :func:`execute` did."""

    deleted: list[int] = field(default_factory=list)
    #: The items that passed the re-check, with their bytes.
    to_delete: list[OrphanCleanupItem] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    backed_up: list[int] = field(default_factory=list)
    bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return typing.cast(dict[str, Any], to_data(self))


def _open_snapshot(plan: OrphanCleanupPlan, store: MetadataStore) -> DataDir:
    # under the lock, the metadata is read through the handle that holds it: copying the directory of a
    # store open for writing races its own flushes and compactions (an SST can vanish mid-copy)
    return DataDir(
        plan.metadata_dir,
        plan.ledger_dirs,
        journal_dirs=plan.journal_dirs,
        index_dirs=plan.index_dirs,
        metadata=MetadataSource(StoreItems(store.raw_items())),
    )


def _raw_node(store: MetadataStore, lid: int) -> bytes:
    raw = store.raw_node(ledger_path(lid))
    if raw is None:
        raise OrphanCleanupError(f"ledger {lid}: metadata vanished while backing it up")
    return raw


def _backup_entries(dd: DataDir, lid: int) -> tuple[list[int], list[bytes]]:
    """Every entry the bookies hold for ``lid``, digest-checked: the range its metadata claims (a claimed
    entry no bookie holds is an error), then whatever is held past it. An OPEN ledger's ``last_entry_id`` is
    only the end of its first run of held entries; what lies past a gap is still reclaimed once the metadata
    goes, so it is backed up too."""
    led = dd.ledgers.get(lid)
    last = max(led.last_entry_id if led else -1, -1)
    held = dd.held_entries(lid)
    spans = [(0, last)] if last >= 0 else []
    spans += [(a, b) for a, b, is_held in held_pieces(held, last + 1, held[-1] if held else -1) if is_held]
    ids, datas = [], []
    for a, b in spans:
        for eid, data in dd.entries(lid, a, b):
            if isinstance(data, Exception):
                raise OrphanCleanupError(
                    f"ledger {lid}: cannot back up entry {eid}: {data}; nothing was deleted for it"
                )
            ids.append(eid)
            datas.append(data)
    if ids != held:  # the backup is exactly what the bookies' GC would reclaim, or nothing is deleted
        raise OrphanCleanupError(
            f"ledger {lid}: backed up {len(ids)} entries but the bookies hold {len(held)}; nothing was deleted for it"
        )
    return ids, datas


def _runs(ids: list[int]) -> list[list[int]]:
    """Sorted entry ids as ``[first, last]`` runs: a manifest as long as the gaps, not the entries."""
    return [[a, b] for a, b, is_held in held_pieces(ids, ids[0], ids[-1]) if is_held] if ids else []


def _backup_ledger(
    dd: DataDir, lid: int, raw_node: bytes, item: OrphanCleanupItem, root: Path, extra: dict[str, Any] | None = None
) -> None:
    d = root / f"ledger-{lid}"
    d.mkdir(mode=0o700)
    write_durably(d / "metadata.node", raw_node)
    ids, datas = _backup_entries(dd, lid)
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, _ENTRIES_SCHEMA) as w:
        w.write_table(pa.table({"entry_id": pa.array(ids, pa.int64()), "data": pa.array(datas, pa.binary())}))
    write_durably(d / "entries.arrow", sink.getvalue().to_pybytes())
    doc = {**to_data(item), "entries_backed_up": len(ids), "entry_ids_backed_up": _runs(ids), **(extra or {})}
    write_durably(d / "item.json", json.dumps(doc, indent=1).encode())
    fsync_dir(d)
    fsync_dir(root)


def execute(
    plan: OrphanCleanupPlan,
    *,
    backup_dir: str | os.PathLike[str] | None = None,
    metadata_store: str | None = None,
) -> CleanupResult:
    """Applies an orphan cleanup plan: re-checked, backed up, compare-and-deleted (the module
    docstring). A dry run is the plan alone (:attr:`OrphanCleanupPlan.to_delete`). ``metadata_store``
    (``zk:host:port[/chroot]``) executes it against a live ZooKeeper instead of the plan's RocksDB store."""
    if not isinstance(plan, OrphanCleanupPlan):
        raise OrphanCleanupError(f"not an orphan cleanup plan: {type(plan).__name__}; write one with --plan")
    if metadata_store is not None:
        return _execute_live(plan, _backup_root(plan, backup_dir), metadata_store)
    if not is_rocksdb(Path(plan.metadata_dir)):
        # never let the writable open below create a store: e.g. a plan made from a ZooKeeper data directory,
        # which is a copy of a cluster's state, not something to delete from
        raise OrphanCleanupError(
            f"{plan.metadata_dir} is not a RocksDB metadata store: a cleanup is executed only on one "
            "(a ZooKeeper data directory is a snapshot; its plan is for review)"
        )
    backup = _backup_root(plan, backup_dir)
    res = CleanupResult()
    # the writer's lock is taken before looking, so nothing moves between the re-check and the deletes
    with MetadataStore(plan.metadata_dir) as store, _open_snapshot(plan, store) as dd:
        todo = _recheck(plan, dd, res)
        for item in todo:
            lid = item.ledger_id
            if store.get(ledger_path(lid)) is None:
                res.skipped.append(Skipped("ledger", lid, "already deleted"))
                continue
            if backup is not None:
                _backup_ledger(dd, lid, _raw_node(store, lid), item, backup)
                res.backed_up.append(lid)
            _compare_and_delete(
                res, lid, lambda: store.delete(ledger_path(lid), expected_version=item.metadata_version)
            )
    return res


def _compare_and_delete(res: CleanupResult, lid: int, delete: Callable[[], None]) -> None:
    """One ledger's compare-and-delete, its outcome into ``res``."""
    try:
        delete()
    except BadVersionError:
        res.skipped.append(Skipped("ledger", lid, "its metadata changed while cleaning"))
    except MetadataNotFoundError:
        res.skipped.append(Skipped("ledger", lid, "already deleted"))
    else:
        res.deleted.append(lid)


def _backup_root(plan: OrphanCleanupPlan, backup_dir: str | os.PathLike[str] | None) -> Path | None:
    """The backup directory, new or empty, private (it holds the entries), its name durable before anything
    is deleted; a link, or a place inside the stores the plan reads, is refused."""
    backup = Path(backup_dir) if backup_dir is not None else None
    if backup is not None:
        if backup.is_symlink():
            raise OrphanCleanupError(f"{backup}: a symbolic link; give the backup directory itself (a new one)")
        held = input_holding(backup, [plan.metadata_dir, *plan.ledger_dirs, *plan.journal_dirs, *plan.index_dirs])
        if held is not None:
            raise OrphanCleanupError(
                f"{backup}: inside {held}, which the plan reads; give a backup directory elsewhere"
            )
        if backup.exists() and (not backup.is_dir() or any(backup.iterdir())):
            raise OrphanCleanupError(f"{backup}: exists and is not empty (or not a directory); give a new one")
        try:
            make_private_dir(backup)
        except OSError as e:
            raise OrphanCleanupError(f"{backup}: cannot make the backup directory: {e}") from None
    return backup


def _recheck(plan: OrphanCleanupPlan, dd: DataDir, res: CleanupResult) -> list[OrphanCleanupItem]:
    """The items still to delete by a fresh snapshot ``dd`` (the others into ``res.skipped``); refuses a
    snapshot whose metadata is unreadable or inconsistent."""
    bad = [i for i in dd.issues if i.kind in ("bad_metadata_value", "bad_ledger_metadata")]
    if bad:
        raise OrphanCleanupError(f"refusing: the metadata store has unreadable nodes ({bad[0].message})")
    now = {f.ledger_id: f for f in find_orphans(dd)}
    missing = sorted(lid for lid, f in now.items() if f.verdict == "inconsistent")
    if missing:
        raise OrphanCleanupError(
            f"refusing: ledgers {missing[:10]} are referenced but their data is missing "
            f"({', '.join(sorted({now[lid].category for lid in missing}))}); "
            "the inputs are inconsistent (see pulsarkit orphans)"
        )
    todo = []
    for item in plan.to_delete:
        lid = item.ledger_id
        path = dd.ledger_paths.get(lid, ledger_path(lid))
        f = now.get(lid)
        if path not in dd.node_versions:
            res.skipped.append(Skipped("ledger", lid, "already deleted"))
        elif f is None:
            res.skipped.append(Skipped("ledger", lid, "no longer an orphan: something refers to it now"))
        elif f.category != item.category:
            res.skipped.append(Skipped("ledger", lid, f"now classed {f.category!r}, planned as {item.category!r}"))
        elif tuple(dd.node_versions[path]) != (item.metadata_version, item.metadata_ctime):
            res.skipped.append(Skipped("ledger", lid, "its metadata changed since the plan"))
        elif f.entries_on_bookie != item.entries_on_bookie:
            # an open ledger's entries change without its metadata: the backup and the delete would be of
            # data the reviewer never saw
            now_held, planned = f.entries_on_bookie, item.entries_on_bookie
            why = f"its entries on the bookies changed since the plan ({now_held} held, {planned} planned)"
            res.skipped.append(Skipped("ledger", lid, why))
        else:
            todo.append(item)
    res.to_delete = todo
    res.bytes = sum(i.bytes_on_bookie for i in todo)
    return todo


def _execute_live(plan: OrphanCleanupPlan, backup: Path | None, url: str) -> CleanupResult:
    """The plan against a live ZooKeeper: one consistent read re-checks it (no lock exists there, so each
    delete is ZooKeeper's own compare-and-delete on the version the re-check saw, which is the plan's);
    each node is backed up (its data and path) before it is deleted."""
    res = CleanupResult()
    live = ZkLiveStore(url)
    dd = DataDir(
        url,
        plan.ledger_dirs,
        journal_dirs=plan.journal_dirs,
        index_dirs=plan.index_dirs,
        metadata=MetadataSource(live, [], live.zxid, live.describe()),
    )
    with dd, ZkNodeWriter(url) as writer:
        todo = _recheck(plan, dd, res)
        for item in todo:
            lid = item.ledger_id
            path = dd.ledger_paths[lid]
            if backup is not None:
                got = live.get(path)
                assert got is not None  # the re-check saw it
                _backup_ledger(dd, lid, got[0], item, backup, {"zookeeper_path": path})
                res.backed_up.append(lid)
            _compare_and_delete(res, lid, lambda: writer.delete(path, item.metadata_version))
    return res


def restore_backup(
    backup_dir: str | os.PathLike[str],
    metadata_dir: str | os.PathLike[str] | None = None,
    *,
    metadata_store: str | None = None,
) -> list[int]:
    """Puts the backed-up ledger metadata nodes back (never over an existing node), into the RocksDB store
    ``metadata_dir`` or, for a cleanup executed against a live ZooKeeper, into ``metadata_store`` (``zk:...``)
    where each node was. The entries are still on the bookies unless their garbage collection ran since;
    ``entries.arrow`` keeps them."""
    root = Path(backup_dir)
    restored = []
    if metadata_store is not None:
        with ZkNodeWriter(metadata_store) as writer:
            for d in sorted(root.glob("ledger-*")):
                lid = int(d.name.split("-", 1)[1])
                path = json.loads((d / "item.json").read_text()).get("zookeeper_path")
                if not path:
                    raise OrphanCleanupError(f"{d}: not a backup of a ZooKeeper cleanup (no zookeeper_path)")
                try:
                    writer.create(path, (d / "metadata.node").read_bytes())
                except MetadataStoreError as e:
                    raise OrphanCleanupError(f"ledger {lid}: {e}") from None
                restored.append(lid)
        return restored
    if metadata_dir is None:
        raise OrphanCleanupError("restore into what: give the metadata_dir or the metadata_store")
    with MetadataStore(metadata_dir) as store:
        for d in sorted(root.glob("ledger-*")):
            lid = int(d.name.split("-", 1)[1])
            if store.exists(ledger_path(lid)):
                raise OrphanCleanupError(f"ledger {lid} has metadata again; not overwriting it")
            store.restore_raw_node(ledger_path(lid), (d / "metadata.node").read_bytes())
            restored.append(lid)
    return restored
