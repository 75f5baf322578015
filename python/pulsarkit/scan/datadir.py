"""A real Pulsar data directory, opened read-only: every ledger by its kind, topics, cursors, entries.

``open_data_dir(path)`` accepts

* a Pulsar standalone's directory (``metadata/`` RocksDB metadata store + ``bookkeeper/current/``, or
  Pulsar's default ``data/standalone/bookkeeper``), and pulsarkit's own ``metadata/`` + ``bookie/``;
* a bookie with separate directories: ``open_data_dir(metadata_dir=..., ledger_dirs=[...],
  journal_dirs=[...], index_dirs=[...])``;
* several bookies sharing one metadata store: their ledger directories (each bookie known by its
  cookie, ``current/VERSION``), or ``bookies={"host:3181": [dir, ...], ...}``. Each entry is then read
  once, from one replica its ledger's ensembles choose (:mod:`pulsarkit.scan.replicas`);
* a cluster whose metadata is in ZooKeeper: ``open_data_dir(zookeeper_dir=..., ledger_dirs=[...])``, the
  ZooKeeper server's data directory read offline (:class:`~pulsarkit.metadata.zookeeper.ZkSnapshotStore`:
  the newest valid snapshot, the transaction logs replayed on it; ``zookeeper_log_dir`` when the logs are
  in a separate ``dataLogDir``, ``zxid`` for the state as of an older transaction), and
  ``configuration_zookeeper_dir`` when the configuration store is a separate ZooKeeper;
* a cluster's live ZooKeeper: ``open_data_dir(metadata_store="zk:host:port[,host:port][/chroot]",
  ledger_dirs=[...])``, Pulsar's metadata-store URL, read once, consistently and read-only
  (:class:`~pulsarkit.metadata.zookeeper_live.ZkLiveStore`), with ``configuration_metadata_store`` for a separate
  configuration store; ``rocksdb:PATH`` is ``metadata_dir=PATH``.

Whatever the source, the metadata is read through one interface
(:class:`~pulsarkit.metadata.reader.MetadataReader`) by one code path.

Nothing under those paths is ever written (no ``LOCK``/``LOG`` file, no RocksDB compaction): each
RocksDB (the metadata store, ``ledgers/``, ``locations/``) is copied into a temporary directory and opened
there (replaying its WAL, where a short run's metadata lives). The metadata store and ``ledgers/`` are read
completely and removed at once, also on errors; each ``locations/`` copy stays open for the life of the
:class:`DataDir` and is read by ledger, a ledger's key range when the ledger is first read or its figures
asked for (:class:`LedgerMap`), so opening a directory and reading one topic reads that topic's ledgers, not
every entry of the directory; it is removed by :meth:`DataDir.close` (``with``), or when the ``DataDir``
is collected or the process exits. Entry logs and journals are read in place, read-only.

A bookie's entries come from its ``locations`` index and entry logs, plus the journal entries after
the bookie's ``lastMark`` that the index does not hold: what bookie recovery replays after an
unclean stop. A missing ``locations/`` is rebuilt in memory by scanning the entry logs. Unreadable
bytes never stop the reader: each becomes an :class:`Issue` (file and offset) and everything else is
still read; ``strict=True`` raises :class:`DataDirError` instead.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.parse
from collections.abc import Callable, Collection, ItemsView, Iterator, Mapping, Sequence, ValuesView
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..bookkeeper import digest as bookie_digest
from ..bookkeeper.journal import JournalRecord, journal_files, last_mark, scan_journal
from ..broker.topic_name import (
    COMPACTED_LEDGER_PROPERTY,
    COMPACTION_CURSOR,
    SYSTEM_CURSORS,
    TopicName,
    is_system_topic,
    ml_kind,
    ml_paths,
    ml_to_topic,
    partition_of,
    topic_to_ml,
)
from ..errors import InvalidTopicNameError, MetadataStoreError, PulsarkitError
from ..managed_ledger import foreign
from ..managed_ledger.ack_set import bitset_from_words
from ..managed_ledger.position import Position
from ..metadata.reader import ChrootReader, MergedReader, MetadataReader
from ..metadata.store import (
    INSTANCE_ID_PATH,
    StoreItems,
    ledger_id_from_path,
    parse_instance_id,
    parse_ledger_metadata,
    parse_managed_cursor_info,
    parse_managed_ledger_info,
)
from ..metadata.zookeeper import ZkSnapshotStore
from ..metadata.zookeeper_live import ZkLiveStore, parse_connect_string, split_metadata_store_url
from ..proto import PositionInfo
from .bookie_dir import (
    BookieDir,
    BookieMapping,
    LogRead,
    LogsBehind,
    bookie_ids,
    entry_payload,
    find_layout,
    group_bookies,
    mapping_dirs,
    read_cookie,
    read_rocksdb,
)
from .records import LEDGERS_SCHEMA, Cursor, DataDirError, Issue, Ledger, Topic, add_issue, held_pieces, missing_message
from .replicas import Layout, ReplicaSet


def _digest_name(md: Any) -> str:
    if not md.HasField("digestType"):
        return "CRC32C"
    try:
        return bookie_digest.digest_type_name(md.digestType)
    except PulsarkitError:
        return "CRC32C"


PathLike = str | os.PathLike[str]

_STATES = {1: "OPEN", 2: "IN_RECOVERY", 3: "CLOSED"}


@dataclass
class MetadataSource:
    """Metadata already opened, for :class:`DataDir`: the tree, what opening it found (each becomes one of
    the directory's issues), and where it comes from."""

    reader: MetadataReader
    issues: list[Issue] = field(default_factory=list)
    #: the ZooKeeper transaction the state holds (None: not ZooKeeper)
    zxid: int | None = None
    #: one line saying what was read (the snapshot, transactions replayed, the zxid)
    description: str = ""


def _zk_store(data_dir: PathLike, log_dir: PathLike | None, zxid: int | None) -> tuple[ZkSnapshotStore, list[Issue]]:
    store = ZkSnapshotStore(data_dir, log_dir, as_of_zxid=zxid)
    issues = [Issue("zookeeper_data", i.file, i.offset if i.offset >= 0 else None, i.message) for i in store.issues]
    if not store.log_files:  # a snapshot alone is a valid input, but maybe not the state the user meant
        issues.append(
            Issue(
                "zookeeper_data",
                store.log_dir,
                None,
                f"no transaction log: the state is the snapshot's (zxid {store.zxid:#x}); "
                "give the logs' directory when the server kept them apart (dataLogDir)",
            )
        )
    return store, issues


def _zk_line(store: ZkSnapshotStore) -> str:
    return (
        f"ZooKeeper {store.data_dir}: {os.path.basename(store.snapshot)} + {store.txns_applied} transaction(s) "
        f"from {len(store.log_files)} log(s), zxid {store.zxid:#x}"
    )


def zookeeper_metadata(
    zookeeper_dir: PathLike,
    zookeeper_log_dir: PathLike | None = None,
    configuration_zookeeper_dir: PathLike | None = None,
    zxid: int | None = None,
    configuration_zookeeper_log_dir: PathLike | None = None,
    chroot: str | None = None,
) -> MetadataSource:
    """A cluster's metadata from ZooKeeper data directories (``*_log_dir``: the transaction logs, when the
    server kept them apart), read offline and read-only. ``zxid`` is the state of the metadata store as of
    that transaction (:class:`ZooKeeperDataError` when its files cannot give it); a separate configuration
    store has its own zxids and is read at its newest state. ``chroot`` (``/pulsar``) is where the cluster's
    tree sits in the metadata store's ZooKeeper, when its ``metadataStoreUrl`` names one."""
    if zxid is not None and zxid < 0:
        raise DataDirError(f"zxid {zxid} is negative")
    if configuration_zookeeper_log_dir is not None and configuration_zookeeper_dir is None:
        raise DataDirError("configuration_zookeeper_log_dir without configuration_zookeeper_dir")
    dirs = (zookeeper_dir, zookeeper_log_dir, configuration_zookeeper_dir, configuration_zookeeper_log_dir)
    for d in dirs:
        if d is not None and not os.path.isdir(d):
            raise DataDirError(f"{d}: no such directory", os.fspath(d))
    local, issues = _zk_store(zookeeper_dir, zookeeper_log_dir, zxid)
    line = _zk_line(local)
    reader: MetadataReader = local
    if chroot:
        try:
            reader = ChrootReader(local, chroot)
        except MetadataStoreError as e:
            raise DataDirError(str(e), os.fspath(zookeeper_dir)) from None
        line += f", below {chroot}"
    if configuration_zookeeper_dir is not None:
        conf, more = _zk_store(configuration_zookeeper_dir, configuration_zookeeper_log_dir, None)
        issues += more
        line += f"; configuration store {_zk_line(conf)}"
        reader = MergedReader(local, conf)
    return MetadataSource(reader, issues, local.zxid, line)


def _url_source(url: str, what: str) -> tuple[MetadataReader, list[Issue], int | None, str]:
    scheme, rest = split_metadata_store_url(url)
    if scheme == "rocksdb":
        if not os.path.isdir(rest):
            raise DataDirError(f"{rest}: no such directory", rest)
        return StoreItems(read_rocksdb(Path(rest), what)), [], None, f"RocksDB {rest}"
    store = ZkLiveStore(url)
    issues = [Issue("zookeeper_live", i.file, None, i.message) for i in store.issues]
    return store, issues, store.zxid, store.describe()


def metadata_store_metadata(metadata_store: str, configuration_metadata_store: str | None = None) -> MetadataSource:
    """A cluster's metadata from Pulsar metadata-store URLs: ``zk:host:port[,host:port][/chroot]`` read live,
    once and read-only (:class:`ZkLiveStore`: the zxid read is the source's), or ``rocksdb:PATH``; a separate
    configuration store by its own URL. etcd and Oxia are refused."""
    reader, issues, zxid, line = _url_source(metadata_store, "metadata store")
    if configuration_metadata_store is not None:
        conf, more, _, conf_line = _url_source(configuration_metadata_store, "configuration store")
        issues += more
        line += f"; configuration store {conf_line}"
        reader = MergedReader(reader, conf)
    return MetadataSource(reader, issues, zxid, line)


# -------------------------------------------------------------------------------- data dir


class LedgerMap(Mapping[int, Ledger]):
    """A data directory's ledgers by id. What metadata says of a ledger is there from the start; what the
    bookies hold of it (``entries_on_bookie``, ``last_entry_id`` of an open or deleted ledger, bytes, ...)
    is read from its own index range when it is first asked for, so that opening a directory and reading
    one topic reads only that topic's ledgers. Going through every ledger (:meth:`values`, :meth:`items`)
    first reads the bookies' indexes whole, in one pass each."""

    def __init__(self, ledgers: dict[int, Ledger], fill: Callable[[Ledger], None], fill_all: Callable[[], None]):
        self._ledgers = ledgers
        self._todo = set(ledgers)
        self._fill = fill
        self._fill_all = fill_all
        self._lock = threading.RLock()

    def __getitem__(self, ledger_id: int) -> Ledger:
        led = self._ledgers[ledger_id]
        if ledger_id in self._todo:
            with self._lock:
                if ledger_id in self._todo:
                    self._todo.discard(ledger_id)  # first: filling may read the ledger's own entries
                    self._fill(led)
        return led

    def __contains__(self, ledger_id: object) -> bool:
        return ledger_id in self._ledgers

    def __iter__(self) -> Iterator[int]:
        return iter(self._ledgers)

    def __len__(self) -> int:
        return len(self._ledgers)

    def _every(self) -> None:
        if self._todo:
            self._fill_all()

    def values(self) -> ValuesView[Ledger]:
        self._every()
        return super().values()

    def items(self) -> ItemsView[int, Ledger]:
        self._every()
        return super().items()

    @property
    def figured(self) -> frozenset[int]:
        """The ledgers whose figures were read (a seam for tests: what a read looked at)."""
        return frozenset(self._ledgers) - self._todo


class DataDir:
    """A Pulsar data directory, read-only. Build one with :func:`open_data_dir`."""

    def __init__(
        self,
        metadata_dir: PathLike,
        ledger_dirs: Sequence[PathLike] = (),
        *,
        journal_dirs: Sequence[PathLike] | None = None,
        index_dirs: Sequence[PathLike] | None = None,
        strict: bool = False,
        bookies: BookieMapping | None = None,
        metadata: MetadataSource | None = None,
        log_reads: Mapping[str, Mapping[int, LogRead]] | None = None,
    ) -> None:
        #: the metadata's directory: the RocksDB store, or the ZooKeeper data directory
        self.metadata_dir = Path(metadata_dir)
        #: the metadata already opened (a ZooKeeper directory, a store a cleanup holds locked); None: the
        #: RocksDB store at ``metadata_dir``, read through a private copy
        self._metadata = metadata
        #: the ZooKeeper transaction the metadata's state holds (None: not ZooKeeper)
        self.metadata_zxid = metadata.zxid if metadata is not None else None
        #: what the metadata was read from, in one line
        self.metadata_source = (metadata.description if metadata is not None else "") or f"{self.metadata_dir}"
        if not ledger_dirs and bookies:
            ledger_dirs = mapping_dirs(bookies)
        self.ledger_dirs = [Path(d) for d in ledger_dirs]
        self.journal_dirs = [Path(d) for d in (journal_dirs if journal_dirs is not None else ledger_dirs)]
        self.index_dirs = [Path(d) for d in (index_dirs if index_dirs is not None else ledger_dirs)]
        self.strict = strict
        self.read_only = True
        self.issues: list[Issue] = []
        for i in metadata.issues if metadata is not None else ():
            self.report(i)
        # the entry logs' accounting read on a thread while the metadata and the bookies' indexes are (a
        # directory dropped below is read for nothing); stopped if the open fails before it is used
        behind = LogsBehind([self._current(d) for d in self.ledger_dirs]) if log_reads is None else None

        def reads_of(d: Path) -> Callable[[], Mapping[int, LogRead] | None]:
            # log_reads: {real path of a current/: {log id: LogRead}}, the logs Spark tasks (or the thread) read
            real = os.path.realpath(self._current(d))
            return lambda: (behind.wait() if behind is not None else log_reads or {}).get(real)

        try:
            self._load_metadata()
            self._drop_unusable_dirs(journal_dirs is None)
            self._bookies = [
                BookieDir(self._current(d), self._current(i), self.issues, reads_of(d), self.report)
                for d, i in zip(self.ledger_dirs, self.index_dirs, strict=False)
            ]
        except BaseException:
            if behind is not None:
                behind.cancel()
            raise
        #: The bookie each ledger directory belongs to (``bookies`` names it, else its cookie), or None.
        self.bookie_ids, bad_cookies = bookie_ids(self.ledger_dirs, bookies)
        jids, bad_j = (self.bookie_ids, []) if journal_dirs is None else bookie_ids(self.journal_dirs, bookies)
        grouped = group_bookies(
            self._bookies, self.ledger_dirs, self.bookie_ids, self.journal_dirs, jids, bad_cookies + bad_j
        )
        #: Several bookies (two or more distinct ids): entries are read from one replica each, chosen
        #: by the ledgers' ensembles. None for one bookie, whose directories are read as before.
        self.replicas = ReplicaSet(grouped, self.ledger_metadata) if grouped is not None else None
        self._cursor_cache: dict[str, list[Cursor]] = {}
        self._load_journal()
        self._build_ledgers()
        if strict and self.issues:
            raise self.issues[0].error()

    def _drop_unusable_dirs(self, journals_are_ledger_dirs: bool) -> None:
        """A directory given twice is read once; one whose cookie names another cluster (its ``instanceId``
        is not this metadata's ``/ledgers/INSTANCEID``) is not read, since its ledger ids are another
        cluster's. Each is an issue naming the directory; everything else is read."""
        instance = parse_instance_id(self.nodes.get(INSTANCE_ID_PATH))

        def usable(dirs: list[Path], what: str) -> list[bool]:
            seen: dict[str, Path] = {}
            keep = []
            for d in dirs:
                real = os.path.realpath(self._current(d))
                if real in seen:
                    self.report(
                        Issue("directory_given_twice", str(d), None, f"{what} directory is also given as {seen[real]}")
                    )
                    keep.append(False)
                    continue
                seen[real] = d
                try:
                    cookie = read_cookie(d)
                except DataDirError:
                    cookie = None  # an unreadable cookie is reported where bookies are told apart
                foreign = bool(instance) and cookie is not None and cookie.instance_id not in (None, instance)
                if foreign and cookie is not None:
                    self.report(
                        Issue(
                            "foreign_bookie",
                            cookie.path,
                            None,
                            f"{what} directory of bookie {cookie.bookie_id} (cluster instance {cookie.instance_id}) "
                            f"is not of this cluster ({instance}): not read",
                        )
                    )
                keep.append(not foreign)
            return keep

        keep = usable(self.ledger_dirs, "ledger")
        self.ledger_dirs = [d for d, k in zip(self.ledger_dirs, keep, strict=True) if k]
        self.index_dirs = [d for d, k in zip(self.index_dirs, keep, strict=False) if k]
        if journals_are_ledger_dirs:
            self.journal_dirs = list(self.ledger_dirs)
        else:
            jkeep = usable(self.journal_dirs, "journal")
            self.journal_dirs = [d for d, k in zip(self.journal_dirs, jkeep, strict=True) if k]

    @staticmethod
    def _current(d: Path) -> Path:
        return d if d.name == "current" else d / "current"

    def entry_logs(self) -> list[tuple[str, int, Any]]:
        """``(entry-log path, log id, EntryLogMetadata)`` of every non-empty entry log, bookie by bookie:
        ``total_size``, ``remaining_size`` and ``ledgers`` (ledger id -> bytes) as BookKeeper accounts them."""
        out = []
        for b in self._bookies:
            for log_id, md in sorted(b.log_metadata.items()):
                out.append((str(b.reader.path_of(log_id)), log_id, md))
        return out

    def bookie_current_dirs(self) -> list[str]:
        """The ``current/`` directory of each bookie ledger directory (entry logs)."""
        return [str(b.current) for b in self._bookies]

    def entry_locations(self, ledgers: Collection[int] | None = None) -> Iterator[tuple[str, int, int, int]]:
        """``(current dir, ledger id, entry id, location)`` of every entry in the bookies' location indexes
        (only those of ``ledgers``, in ledger order, when given: only their key ranges are read)."""
        for current, lid, entries in self.ledger_locations(ledgers):
            for eid, loc in entries.items():
                yield current, lid, eid, loc

    def ledger_locations(self, ledgers: Collection[int] | None = None) -> Iterator[tuple[str, int, Mapping[int, int]]]:
        """:meth:`entry_locations` a ledger at a time: ``(current dir, ledger id, entry id -> location)`` (the
        index's own mapping: not to be changed)."""
        for b in self._bookies:
            for lid, entries in (
                b.locations.items() if ledgers is None else ((x, b.locations.get(x, {})) for x in sorted(ledgers))
            ):
                yield str(b.current), lid, entries

    def close(self) -> None:
        """Closes the entry-log files and removes the location indexes' private copies (the other RocksDB
        copies were read and removed when it was opened). What was already looked up stays readable; a
        lookup after it opens a new copy."""
        for b in self._bookies:
            b.close()
            for log_id in b.log_ids:
                b.reader.evict(log_id)

    def __enter__(self) -> DataDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def report(self, issue: Issue) -> None:
        """Records what could not be read (a :class:`DataDirError` instead, with ``strict``)."""
        if self.strict:
            raise issue.error()
        add_issue(self.issues, issue)

    # -- metadata ------------------------------------------------------------------------

    def _load_metadata(self) -> None:
        self.nodes: dict[str, bytes] = {}
        #: (version, creation time) of every node: what a cleanup plan pins and re-checks
        self.node_versions: dict[str, tuple[int, int]] = {}
        src = self._metadata
        reader = src.reader if src is not None else StoreItems(read_rocksdb(self.metadata_dir, "metadata store"))
        for path in reader.keys("/"):
            try:
                got = reader.get(path)
            except MetadataStoreError as e:
                self.report(Issue("bad_metadata_value", str(self.metadata_dir), None, str(e)))
                continue
            if got is not None:
                data, stat = got
                self.nodes[path] = data
                self.node_versions[path] = (stat.version, stat.creation_timestamp)
        self.ledger_metadata: dict[int, Any] = {}
        #: Where each ledger's metadata node is: the layout (hierarchical or long-hierarchical) is the cluster's.
        self.ledger_paths: dict[int, str] = {}
        self.ml_infos: dict[str, Any] = {}
        self.cursor_infos: dict[str, dict[str, Any]] = {}
        self.partitioned: dict[str, int] = {}
        self.schemas: dict[str, bytes] = {}
        root = "/managed-ledgers/"
        under_root: dict[str, bytes] = {}
        for path, data in self.nodes.items():
            if path.startswith("/ledgers/"):
                lid = ledger_id_from_path(path)
                if lid is None:
                    continue
                self.ledger_paths[lid] = path
                try:
                    self.ledger_metadata[lid] = parse_ledger_metadata(data, lid)
                except MetadataStoreError as e:
                    self.report(Issue("bad_ledger_metadata", str(self.metadata_dir), None, f"{path}: {e}", lid))
            elif path.startswith(root):
                under_root[path[len(root) :]] = data
            elif path.startswith("/admin/partitioned-topics/"):
                try:  # the same shape as a managed-ledger name, v1 or v2
                    name = TopicName.from_ml(path[len("/admin/partitioned-topics/") :]).full
                except InvalidTopicNameError:
                    continue  # ZooKeeper's parent nodes
                try:
                    n = int(json.loads(data or b"{}").get("partitions", 0))
                except (ValueError, AttributeError):
                    n = 0
                self.partitioned[name] = n
            elif path.startswith("/schemas/") and path.count("/") == 4:
                # /schemas/tenant/ns/topic; ZooKeeper also holds the (empty) parents
                self.schemas[path[len("/schemas/") :]] = data
        mls, cursors, odd = ml_paths(under_root)
        for rel in odd:
            # not silently dropped: its ledgers would otherwise look ownerless to the orphan finder
            why = "not a topic's managed ledger (v1 or v2 name) nor one of its cursors; not read"
            self.report(Issue("unrecognised_managed_ledger", str(self.metadata_dir), None, f"{root}{rel}: {why}"))
        for rel, ml in mls.items():
            try:
                self.ml_infos[ml] = parse_managed_ledger_info(under_root[rel], root + rel)
            except MetadataStoreError as e:
                self.report(Issue("bad_metadata_value", str(self.metadata_dir), None, f"{root}{rel}: {e}"))
        for rel, (ml, cursor) in cursors.items():
            try:
                self.cursor_infos.setdefault(ml, {})[cursor] = parse_managed_cursor_info(under_root[rel], root + rel)
            except MetadataStoreError as e:
                self.report(Issue("bad_metadata_value", str(self.metadata_dir), None, f"{root}{rel}: {e}"))
        # cursor nodes whose managed ledger node is gone belong to a deleted topic
        for ml in list(self.cursor_infos):
            if ml not in self.ml_infos:
                del self.cursor_infos[ml]

    # -- journal ---------------------------------------------------------------------------

    def _load_journal(self) -> None:
        """Entries the bookie would replay from its journal (after ``lastMark``) that ledger storage lacks;
        with several bookies, each bookie's own (:attr:`journal` then merges them, for the listings)."""
        self.journal_files: list[str] = []
        if self.replicas is None:
            self.journal = self._read_journals(self.ledger_dirs, self.journal_dirs)
            return
        self.journal = {}
        for b in self.replicas.bookies:
            b.journal = self._read_journals(b.ledger_dirs, b.journal_dirs)
            for lid, recs in b.journal.items():
                self.journal.setdefault(lid, {}).update(recs)

    def _read_journals(self, ledger_dirs: list[Path], journal_dirs: list[Path]) -> dict[int, dict[int, JournalRecord]]:
        journal: dict[int, dict[int, JournalRecord]] = {}
        currents = [self._current(d) for d in ledger_dirs]
        jdirs = [self._current(d) for d in journal_dirs]
        work = []
        for i, jd in enumerate(jdirs):
            mark = last_mark(currents, "lastMark" if len(jdirs) == 1 else f"lastMark.{i}")
            for jid, f in journal_files([jd]):
                self.journal_files.append(str(f))
                work.append((mark, jid, f))
        for mark, jid, f in work:
            if mark is not None and jid < mark[0]:
                continue
            start = mark[1] if mark is not None and jid == mark[0] else None
            try:
                records, issues, _ = scan_journal(f, start)
            except OSError as e:
                self.report(Issue("unreadable_journal", str(f), None, str(e)))
                continue
            for ji in issues:
                self.report(Issue(*ji))
            for r in records:
                if r.entry_id >= 0:
                    journal.setdefault(r.ledger_id, {})[r.entry_id] = r
        return journal

    # -- ledgers ---------------------------------------------------------------------------

    def last_stored_entry(self, ledger_id: int) -> int:
        """The highest entry id any bookie's index or journal holds for a ledger (-1: none): how far a
        ledger without metadata (a deleted one) can be read."""
        ids = [max(b.locations[ledger_id]) for b in self._bookies if b.locations.get(ledger_id)]
        ids += [max(self.journal[ledger_id])] if self.journal.get(ledger_id) else []
        return max(ids, default=-1)

    def _bookie_of(self, lid: int) -> BookieDir | None:
        for b in self._bookies:
            if lid in b.locations:
                return b
        return None

    def _holds_any(self, lid: int) -> bool:
        """Whether some bookie's index or journal holds an entry of a ledger (no index range read)."""
        return any(lid in b.locations for b in self._bookies) or bool(self.journal.get(lid))

    def _build_ledgers(self) -> None:
        """Every ledger with what its metadata and its managed ledger or cursor say; what the bookies hold
        of it (:meth:`_bookie_stats`) is read when the ledger is first asked for (:class:`LedgerMap`)."""
        ids = set(self.ledger_metadata)
        for b in self._bookies:
            ids |= set(b.locations) | set(b.log_ledger_bytes) | set(b.ledger_data)
        ids |= set(self.journal)
        owner: dict[int, str] = {}
        closed: dict[int, int] = {}
        for ml, info in self.ml_infos.items():
            for li in info.ledgerInfo:
                owner[li.ledgerId] = ml
                if li.timestamp > 0:  # 0 (or unset): the open last ledger
                    closed[li.ledgerId] = li.timestamp
        cursor_owner: dict[int, tuple[str, str]] = {}
        for ml, curs in self.cursor_infos.items():
            for name, ci in curs.items():
                if ci.cursorsLedgerId >= 0:
                    cursor_owner[ci.cursorsLedgerId] = (ml, name)
        # a ledger its managed ledger or cursor still names but that has no metadata: deleted under it
        ids |= set(owner) | set(cursor_owner)
        ledgers: dict[int, Ledger] = {}
        for lid in sorted(ids):
            md = self.ledger_metadata.get(lid)
            led = Ledger(lid, "deleted")
            if md is None and (lid in owner or lid in cursor_owner):
                who = owner.get(lid) or "/".join(cursor_owner[lid])
                self.report(
                    Issue(
                        "missing_ledger",
                        str(self.metadata_dir),
                        None,
                        f"ledger {lid} of {who} has no metadata: it was deleted",
                        lid,
                    )
                )
            if md is not None:
                cm = {e.key: bytes(e.value) for e in md.customMetadata}
                led.custom_metadata = cm
                led.state = _STATES.get(md.state, str(md.state))
                led.metadata_last_entry_id = md.lastEntryId if md.HasField("lastEntryId") else None
                led.digest_type = _digest_name(md)
                led.password = bytes(md.password)
                led.ctime = md.ctime if md.HasField("ctime") else None
                led.kind, led.managed_ledger, led.cursor = self._kind(cm)
            if lid in owner:
                led.referenced = True
                led.closed_time = closed.get(lid)
                led.managed_ledger = led.managed_ledger or owner[lid]
                if led.kind in ("unknown", "deleted") and md is not None:
                    led.kind = ml_kind(owner[lid])
            if lid in cursor_owner:
                led.referenced = True
                led.managed_ledger, led.cursor = cursor_owner[lid]
                if md is not None:
                    led.kind = "cursor"
            if led.managed_ledger:
                led.topic = ml_to_topic(led.managed_ledger)
            if led.kind == "compacted" and "pulsar/compactedTopic" in led.custom_metadata:
                led.topic = led.custom_metadata["pulsar/compactedTopic"].decode("utf-8", "replace")
            # a closed ledger's last entry is its metadata's; any other's is what the bookies hold, so
            # only a closed one can claim entries none holds
            claimed = led.metadata_last_entry_id if led.state == "CLOSED" else None
            if md is not None and lid in owner and claimed is not None and claimed >= 0 and not self._holds_any(lid):
                # the metadata outlived the data: a topic reading it would silently lose these entries
                self.report(
                    Issue(
                        "ledger_data_missing",
                        str(self.metadata_dir),
                        None,
                        f"ledger {lid} of {owner[lid]} has metadata claiming {claimed + 1} entries "
                        "but no given bookie holds any of them",
                        lid,
                    )
                )
            ledgers[lid] = led
        self._compacted: set[int] | None = None
        #: ledger id -> :class:`Ledger`; a ledger's figures from the bookies are read on first access
        self.ledgers: LedgerMap = LedgerMap(ledgers, self._ledger_figures, self._load_locations)

    def _ledger_figures(self, led: Ledger) -> None:
        """What the bookies hold of a ledger (entries, bytes, last entry of an open or deleted one), what a
        deleted one held, and whether a compaction cursor keeps it: read from its index range only."""
        self._bookie_stats(led)
        if led.state == "DELETED":
            led.deleted_guess = self._guess(led.ledger_id)
        if not led.referenced and led.ledger_id in self._compacted_ledgers():
            led.referenced = True

    def _compacted_ledgers(self) -> set[int]:
        """The compacted ledgers the topics' compaction cursors name (only compacted topics' cursors read)."""
        if self._compacted is None:
            self._compacted = set()
            for ml, infos in self.cursor_infos.items():
                if ml not in self.ml_infos or not any(urllib.parse.unquote_plus(n) == COMPACTION_CURSOR for n in infos):
                    continue
                for c in self.cursors(ml):
                    if c.name == COMPACTION_CURSOR and COMPACTED_LEDGER_PROPERTY in c.properties:
                        self._compacted.add(c.properties[COMPACTED_LEDGER_PROPERTY])
        return self._compacted

    def _load_locations(self) -> None:
        for b in self._bookies:
            b.load_locations()

    @staticmethod
    def _kind(cm: dict[str, bytes]) -> tuple[str, str | None, str | None]:
        comp = cm.get("component", b"").decode("utf-8", "replace")
        ml = (cm.get("pulsar/managed-ledger") or cm.get("psr/managed-ledger") or b"").decode("utf-8", "replace") or None
        cur = (cm.get("pulsar/cursor") or cm.get("psr/cursor") or b"").decode("utf-8", "replace") or None
        if comp == "compacted-ledger":
            return "compacted", None, None
        if comp == "schema":
            return "schema", None, None
        if cur is not None:
            return "cursor", ml, cur
        if ml is not None:
            return ml_kind(ml), ml, None
        return "unknown", None, None

    def _bookie_stats(self, led: Ledger) -> None:
        lid = led.ledger_id
        if self.replicas is not None:  # entries any bookie holds; bytes of every copy on disk
            present, jonly, jbytes = self.replicas.holdings(lid)
            count = len(present | jonly)
        else:  # counted, not gathered into a set: a ledger of 200 k entries is counted with its index
            b = self._bookie_of(lid)
            indexed = b.locations.get(lid, {}) if b else {}
            jr = self.journal.get(lid, {})
            jonly = {e for e in jr if e not in indexed}
            jbytes = sum(len(jr[e].data) + 4 for e in jonly)
            count = len(indexed) + len(jonly)
        led.entries_on_bookie = count
        led.journal_only_entries = len(jonly)
        led.bytes_on_bookie = sum(bd.log_ledger_bytes.get(lid, 0) for bd in self._bookies) + jbytes
        if led.state == "CLOSED" and led.metadata_last_entry_id is not None:
            led.last_entry_id = led.metadata_last_entry_id
            return
        held = self.held_entries(lid) if count else []
        if led.state == "DELETED":
            led.last_entry_id = held[-1] if held else -1
        else:
            # an open ledger is recovered up to the first entry the bookie lacks (ensemble of one), or,
            # with several bookies, that no bookie holds
            first = held_pieces(held, 0, held[-1])[0] if held and held[-1] >= 0 else None
            led.last_entry_id = first[1] if first is not None and first[2] else -1
            absent = self._ensemble_not_given(lid) if held and held[-1] > led.last_entry_id else []
            if absent:
                # BookKeeper's recovery would also ask these bookies: a gap on the ones given is their share
                # of the stripe, not the ledger's end. Read up to the last entry held, the gap reported.
                gap = led.last_entry_id + 1
                led.last_entry_id = held[-1]
                why = (
                    f"open ledger: entry {gap} is on no bookie given, but entries up to {held[-1]} are; bookies "
                    f"{', '.join(absent)} of its ensemble were not given, so its end is unknown: read up to "
                    f"{held[-1]}, what is missing reported as unreadable"
                )
                self.report(Issue("open_ledger_end_unknown", str(self.metadata_dir), None, why, lid, gap))

    def _ensemble_not_given(self, lid: int) -> list[str]:
        """Bookies of the ledger's ensembles (its metadata) that are not among the directories given; [] when
        its metadata does not place entries. A lone directory with no known id stands for a lone member."""
        md = self.ledger_metadata.get(lid)
        try:
            members = Layout.of(md).members() if md is not None else []
        except DataDirError:
            return []
        given = {b for b in self.bookie_ids if b is not None}
        if not given and len(members) <= 1:
            return []
        return [m for m in members if m not in given]

    def _guess(self, lid: int) -> str | None:
        """What a deleted ledger held, from its first entry's bytes (its metadata is gone)."""
        b = self._bookie_of(lid)
        first = min(b.locations.get(lid, {}), default=None) if b else None
        if first is None:
            return None
        try:
            data = self.read_entry(lid, first)
        except DataDirError:
            return None
        if data[:2] == b"\x0e\x02" or (data[:2] == b"\x0e\x01" and data[2:4] != b"\x00\x01"):
            return "topic"
        if data[:4] == b"\x0e\x01\x00\x01":
            return "transaction_log_or_pending_ack"
        pi = PositionInfo()
        try:
            pi.ParseFromString(data)
            if pi.IsInitialized():
                return "cursor"
        except Exception:  # noqa: BLE001 - protobuf DecodeError: not a PositionInfo
            pass
        return None

    def ledger_list(self, kinds: Sequence[str] | None = None) -> list[Ledger]:
        return [led for led in self.ledgers.values() if kinds is None or led.kind in kinds]

    # -- entries -------------------------------------------------------------------------

    def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        """The data of one entry (what the BookKeeper client wrote: for Pulsar, the entry bytes),
        digest verified. :class:`DataDirError` names the file and offset when it cannot be read. With
        several bookies, from the first copy of its write set that verifies (a copy skipped is an issue)."""
        led = self.ledgers.get(ledger_id)
        digest = led.digest_type if led and led.digest_type else None
        password = led.password if led else b""
        if self.replicas is not None:
            return self.replicas.read(ledger_id, entry_id, digest, password, self.report)
        b = self._bookie_of(ledger_id)
        got = b.read_raw(ledger_id, entry_id) if b else None
        if got is None:
            j = self.journal.get(ledger_id, {}).get(entry_id)
            if j is None:
                raise DataDirError(f"ledger {ledger_id} entry {entry_id} is on no bookie and in no journal", None, None)
            got = j.data, j.path, j.offset
        raw, path, offset = got
        return entry_payload(raw, digest, password, ledger_id, entry_id, path, offset)

    def where(self, ledger_id: int, entry_id: int) -> tuple[str, int | None]:
        """(file, offset of the record) holding an entry: its entry log, else its journal."""
        if self.replicas is not None:
            led = self.ledgers.get(ledger_id)
            return self.replicas.where(
                ledger_id, entry_id, led.digest_type if led else None, led.password if led else b""
            )
        b = self._bookie_of(ledger_id)
        loc = b.locations.get(ledger_id, {}).get(entry_id) if b else None
        if b is not None and loc is not None:
            return str(b.reader.path_of(loc >> 32)), (loc & 0xFFFFFFFF) - 4
        j = self.journal.get(ledger_id, {}).get(entry_id)
        return (j.path, j.offset) if j else ("?", None)

    def entries(
        self, ledger_id: int, first: int = 0, last: int | None = None
    ) -> Iterator[tuple[int, bytes | DataDirError]]:
        """``(entry_id, data)`` for a ledger's readable range; an unreadable entry yields its error
        (also recorded in :attr:`issues`) and reading goes on."""
        led = self.ledgers.get(ledger_id)
        end = led.last_entry_id if last is None and led else (last if last is not None else -1)
        for a, b, held in held_pieces(self.held_entries(ledger_id), first, end):
            if not held:  # a run no bookie holds: one issue and one error, however long it is
                where = "on no given bookie" if self.replicas is not None else "on no bookie and in no journal"
                gap = DataDirError(missing_message(ledger_id, a, b, where))
                self.report(Issue("unreadable_entry", "?", None, gap.reason, ledger_id, a, b - a + 1))
                yield a, gap
                continue
            for eid in range(a, b + 1):
                try:
                    yield eid, self.read_entry(ledger_id, eid)
                except DataDirError as e:
                    self.report(Issue("unreadable_entry", e.path or "?", e.offset, e.reason, ledger_id, eid))
                    yield eid, e

    def held_entries(self, ledger_id: int) -> list[int]:
        """The entry ids some bookie's index or journal holds for a ledger, sorted: what a read of it
        can find, whatever its metadata claims."""
        if self.replicas is not None:
            indexed, jonly, _ = self.replicas.holdings(ledger_id)
            return sorted(indexed | jonly)
        b = self._bookie_of(ledger_id)
        return sorted(set(b.locations.get(ledger_id, {}) if b else ()) | set(self.journal.get(ledger_id, {})))

    # -- topics and cursors ----------------------------------------------------------------

    def resolve(self, topic: str) -> str:
        """The managed-ledger name of a topic (``persistent://t/ns/x``, ``t/ns/x``, ``x`` or the ML name);
        :class:`DataDirError` when the directory has no such topic."""
        if topic in self.ml_infos:
            return topic
        ml = topic_to_ml(topic)
        if ml in self.ml_infos:
            return ml
        full = ml_to_topic(ml)
        for name in self.ml_infos:  # names Java's URLEncoder escapes differently from Python's
            if ml_to_topic(name) == full:
                return name
        raise DataDirError(f"no topic {topic!r} in {self.metadata_dir}")

    def expand(self, topic: str) -> list[str]:
        """Managed-ledger names of a topic, or of every partition of a partitioned topic."""
        try:
            return [self.resolve(topic)]
        except DataDirError:
            full = ml_to_topic(topic_to_ml(topic))
            parts = sorted(
                (partition_of(ml_to_topic(ml))[1], ml)
                for ml in self.ml_infos
                if partition_of(ml_to_topic(ml))[0] == full
            )
            if not parts:
                raise
            return [ml for _, ml in parts]

    def managed_ledger_names(self) -> list[str]:
        return sorted(self.ml_infos)

    def ml_ledgers(self, ml: str) -> list[int]:
        """Ledger ids of a managed ledger, in order (the current, possibly empty, one included)."""
        info = self.ml_infos.get(ml)
        return [li.ledgerId for li in info.ledgerInfo] if info is not None else []

    def ml_last_position(self, ml: str) -> Position:
        last = Position(-1, -1)
        for lid in self.ml_ledgers(ml):
            led = self.ledgers.get(lid)
            if led is not None and led.last_entry_id >= 0:
                last = Position(lid, led.last_entry_id)
        if last.ledger_id == -1:
            ids = self.ml_ledgers(ml)
            if ids:
                last = Position(ids[0], -1)
        return last

    def cursors(self, ml: str) -> list[Cursor]:
        """The durable cursors of a managed ledger, recovered as ``ManagedCursorImpl.recover`` does."""
        if ml in self._cursor_cache:
            return self._cursor_cache[ml]
        out = []
        for enc_name, info in sorted(self.cursor_infos.get(ml, {}).items()):
            out.append(self._recover_cursor(ml, urllib.parse.unquote_plus(enc_name), info))
        self._cursor_cache[ml] = out
        return out

    def _recover_cursor(self, ml: str, name: str, info: Any) -> Cursor:
        c = Cursor(
            name,
            ml,
            ml_to_topic(ml),
            Position(info.markDeleteLedgerId, info.markDeleteEntryId),
            cursor_properties={p.name: p.value for p in info.cursorProperties},
            cursor_ledger_id=info.cursorsLedgerId,
            last_active=info.lastActive or None,
            system=name in SYSTEM_CURSORS,
        )
        state: Any = info
        if info.cursorsLedgerId != -1:
            pi, why = self._last_position_info(info.cursorsLedgerId)
            if pi is not None:
                state = pi
                c.mark_delete = Position(pi.ledgerId, pi.entryId)
                c.source = "cursor_ledger"
            else:
                c.note = f"cursor ledger {info.cursorsLedgerId}: {why}; rolled back to the metadata snapshot"
        c.properties = {p.name: p.value for p in state.properties}
        ids = self.ml_ledgers(ml)
        for rg in state.individualDeletedMessages:
            lo = Position(rg.lowerEndpoint.ledgerId, rg.lowerEndpoint.entryId)
            hi = Position(rg.upperEndpoint.ledgerId, rg.upperEndpoint.entryId)
            c.individually_deleted.append((lo, hi))
        for llm in getattr(state, "individualDeletedMessageRanges", ()):
            bits = bitset_from_words(llm.values)
            e = 0
            while bits:
                if bits & 1:
                    c.individually_deleted.append((Position(llm.key, e - 1), Position(llm.key, e)))
                bits >>= 1
                e += 1
        for bi in state.batchedEntryDeletionIndexInfo:
            if len(bi.deleteSet):
                c.stored_batch_ack_sets[Position(bi.position.ledgerId, bi.position.entryId)] = list(bi.deleteSet)
        if c.source == "cursor_ledger":  # checked on a real 4.0.7: a snapshot's ack sets are not restored
            c.batch_ack_sets = dict(c.stored_batch_ack_sets)
        # recoveredCursor(): a mark-delete in a ledger that is gone moves to the next one; one past the
        # last entry is clamped to it
        md = c.mark_delete
        if md.entry_id == -1 and md.ledger_id not in ids:
            nxt = [i for i in ids if i > md.ledger_id]
            if nxt:
                md = Position(nxt[0], -1)
        last = self.ml_last_position(ml)
        if md > last and last.ledger_id != -1:
            md = last
        c.mark_delete = md
        return c

    def _last_position_info(self, lid: int) -> tuple[Any, str]:
        led = self.ledgers.get(lid)
        if led is None or led.state == "DELETED":
            return None, "no such ledger"
        if led.last_entry_id < 0:
            return None, "no entries"
        try:
            data = self.read_entry(lid, led.last_entry_id)
        except DataDirError as e:
            self.report(Issue("unreadable_entry", e.path or "?", e.offset, e.reason, lid, led.last_entry_id))
            return None, str(e)
        pi = PositionInfo()
        try:
            pi.ParseFromString(data)
        except Exception as e:  # noqa: BLE001 - protobuf DecodeError
            return None, f"last entry is no PositionInfo: {e}"
        if not pi.IsInitialized():
            return None, "last entry is no PositionInfo (required fields missing)"
        return pi, ""

    def cursor(self, topic: str, subscription: str) -> Cursor:
        ml = self.resolve(topic)
        for c in self.cursors(ml):
            if c.name == subscription:
                return c
        raise DataDirError(
            f"topic {topic!r} has no subscription {subscription!r} "
            f"(has: {', '.join(c.name for c in self.cursors(ml)) or 'none'})"
        )

    def topics(self, include_system: bool = True) -> list[Topic]:
        out = []
        for ml in self.managed_ledger_names():
            t = self.topic(ml)
            if include_system or not t.system:
                out.append(t)
        return out

    def topic(self, name: str) -> Topic:
        ml = self.resolve(name)
        info = self.ml_infos[ml]
        tname = ml_to_topic(ml)
        base, part = partition_of(tname)
        ids = self.ml_ledgers(ml)
        entries = size = 0
        for li in info.ledgerInfo:
            led = self.ledgers.get(li.ledgerId)
            n = li.entries if li.HasField("entries") else (led.entries if led else 0)
            entries += n
            if li.HasField("size"):
                size += li.size
            elif led is not None:
                size += sum(len(d) for _, d in self.entries(li.ledgerId) if isinstance(d, bytes))
        curs = self.cursors(ml)
        t = Topic(
            tname,
            ml,
            ml_kind(ml),
            is_system_topic(tname),
            part,
            base if base in self.partitioned or part >= 0 else None,
            ids,
            entries,
            size,
            curs,
            {p.key: p.value for p in info.properties},
        )
        if info.HasField("terminatedPosition"):
            t.terminated = Position(info.terminatedPosition.ledgerId, info.terminatedPosition.entryId)
        for c in curs:
            if c.name == COMPACTION_CURSOR:
                t.compaction_horizon = c.mark_delete
                t.compacted_ledger = c.properties.get(COMPACTED_LEDGER_PROPERTY)
        return t

    def ml_entries(self, ml: str, start: Position | None = None) -> Iterator[tuple[Position, bytes | DataDirError]]:
        """Every readable entry of a managed ledger in order, after ``start`` when given."""
        for lid in self.ml_ledgers(ml):
            if start is not None and lid < start.ledger_id:
                continue
            first = start.entry_id + 1 if start is not None and lid == start.ledger_id else 0
            for eid, data in self.entries(lid, first):
                yield Position(lid, eid), data

    def ml_records(
        self, ml: str, decode: Callable[[bytes], list[Any]], issue_kind: str, start: Position | None = None
    ) -> Iterator[tuple[Position, list[Any]]]:
        """The records of a managed ledger that is not a topic (a transaction log, a pending-ack
        store), each entry decoded by ``decode``; an entry that does not decode is an issue."""
        for pos, data in self.ml_entries(ml, start):
            if isinstance(data, DataDirError):
                continue  # already an issue of its own
            try:
                yield pos, decode(data)
            except PulsarkitError as e:
                self.report(Issue(issue_kind, ml, None, str(e), pos.ledger_id, pos.entry_id))

    # -- Arrow --------------------------------------------------------------------------

    def ledgers_table(self) -> Any:

        rows = [self.ledger_row(led) for led in self.ledgers.values()]
        return pa.Table.from_pylist(rows, schema=LEDGERS_SCHEMA())

    @staticmethod
    def ledger_row(led: Ledger) -> dict[str, Any]:
        return {
            "ledger_id": led.ledger_id,
            "kind": led.kind,
            "topic": led.topic,
            "managed_ledger": led.managed_ledger,
            "cursor": led.cursor,
            "state": led.state,
            "digest_type": led.digest_type,
            "metadata_last_entry_id": led.metadata_last_entry_id,
            "entries": led.entries,
            "entries_on_bookie": led.entries_on_bookie,
            "journal_only_entries": led.journal_only_entries,
            "bytes_on_bookie": led.bytes_on_bookie,
            "referenced": led.referenced,
            "deleted_guess": led.deleted_guess,
            "ctime": led.ctime,
            "custom_metadata": {
                k: v.decode("utf-8", "replace") for k, v in led.custom_metadata.items() if k != "pulsar/compactedTo"
            },
        }

    def __repr__(self) -> str:
        return f"DataDir({str(self.metadata_dir)!r}, ledger_dirs={[str(d) for d in self.ledger_dirs]})"


#: The directory-valued fields of a :class:`DataDirSpec` that hold several directories.
_SPEC_LISTS = ("ledger_dirs", "journal_dirs", "index_dirs")
_SPEC_PATHS = (
    "path",
    "metadata_dir",
    "zookeeper_dir",
    "zookeeper_log_dir",
    "configuration_zookeeper_dir",
    "configuration_zookeeper_log_dir",
)
_SPEC_URLS = ("metadata_store", "configuration_metadata_store")
#: String fields passed as they are.
_SPEC_STRINGS = (*_SPEC_URLS, "zookeeper_chroot")


@dataclass(frozen=True)
class DataDirSpec:
    """Where a data directory's parts are, as one value: what :func:`open_data_dir` takes, carried by a
    plan, an export and a Spark source (whose options spell it out, :meth:`options`), so that a cluster
    (ZooKeeper metadata, several bookies) is read by every path the way a standalone's directory is."""

    path: str | None = None
    metadata_dir: str | None = None
    ledger_dirs: tuple[str, ...] = ()
    journal_dirs: tuple[str, ...] = ()
    index_dirs: tuple[str, ...] = ()
    zookeeper_dir: str | None = None
    zookeeper_log_dir: str | None = None
    configuration_zookeeper_dir: str | None = None
    configuration_zookeeper_log_dir: str | None = None
    zxid: int | None = None
    metadata_store: str | None = None
    configuration_metadata_store: str | None = None
    zookeeper_chroot: str | None = None

    @classmethod
    def of(cls, path: PathLike | None = None, **kw: Any) -> DataDirSpec:
        """From :func:`open_data_dir`'s arguments (None and empty lists mean not given)."""
        args: dict[str, Any] = {"path": os.fspath(path) if path is not None else None}
        for k, v in kw.items():
            if k in _SPEC_LISTS:
                args[k] = tuple(os.fspath(d) for d in v or ())
            elif k in _SPEC_PATHS:
                args[k] = os.fspath(v) if v is not None else None
            elif k in ("zxid", *_SPEC_STRINGS):
                args[k] = v
            else:
                raise TypeError(f"DataDirSpec has no field {k!r}")
        return cls(**args)

    def kwargs(self) -> dict[str, Any]:
        """The given fields as :func:`open_data_dir`'s keyword arguments (``path`` included)."""
        out: dict[str, Any] = {}
        for k in (*_SPEC_PATHS, *_SPEC_LISTS, "zxid", *_SPEC_STRINGS):
            v = getattr(self, k)
            if v is not None and v != ():
                out[k] = list(v) if k in _SPEC_LISTS else v
        return out

    def open(self, **kw: Any) -> DataDir:
        """:func:`open_data_dir` of these parts (``kw``: ``strict``, ``log_reads``...)."""
        args = self.kwargs()
        return open_data_dir(args.pop("path", None), **args, **kw)

    @property
    def key(self) -> str:
        """The data's identity, what an export's marks are kept under: a standalone's directory by its real
        path; otherwise the metadata's (``zookeeper:``/``metadata:`` + real path, a live ZooKeeper's normalised
        ``zk:`` URL), since which bookie
        directories are given, or as of which zxid, does not make it other data."""
        if self.zookeeper_dir is not None:
            return "zookeeper:" + os.path.realpath(self.zookeeper_dir) + (self.zookeeper_chroot or "")
        if self.metadata_store is not None:  # the live ZooKeeper by its normalised URL, chroot included
            scheme, rest = split_metadata_store_url(self.metadata_store)
            if scheme == "rocksdb":
                return "metadata:" + os.path.realpath(rest)
            return str(parse_connect_string(rest))
        if self.metadata_dir is not None:
            return "metadata:" + os.path.realpath(self.metadata_dir)
        if self.path is None:
            raise DataDirError("no data directory: give a path, a metadata_dir or a zookeeper_dir")
        return os.path.realpath(self.path)

    def inputs(self) -> list[str]:
        """Every directory it reads (an output must be in none of them)."""
        rocksdb = [
            rest
            for k in _SPEC_URLS
            if (v := getattr(self, k)) is not None
            for scheme, rest in [split_metadata_store_url(v)]
            if scheme == "rocksdb"
        ]
        return (
            [v for k in _SPEC_PATHS if (v := getattr(self, k)) is not None]
            + rocksdb
            + [d for k in _SPEC_LISTS for d in getattr(self, k)]
        )

    def options(self) -> dict[str, str]:
        """The Spark data source's options for these parts (lists comma-separated), ``path`` apart."""
        out = {}
        for k, v in self.kwargs().items():
            if k != "path":
                out[k] = ",".join(v) if k in _SPEC_LISTS else str(v)
        return out

    @classmethod
    def from_options(cls, path: str | None, options: Mapping[str, str]) -> DataDirSpec | None:
        """What :meth:`options` wrote, or None when the options name no part besides ``path``."""
        kw: dict[str, Any] = {}
        for k in (*_SPEC_PATHS[1:], *_SPEC_LISTS, "zxid", *_SPEC_STRINGS):
            v = options.get(k)
            if not v:
                continue
            if k in _SPEC_LISTS:
                kw[k] = [d for d in v.split(",") if d]
            elif k == "zxid":
                kw[k] = int(v, 0)
            else:
                kw[k] = v
        return cls.of(path, **kw) if kw else None


def open_data_dir(
    path: PathLike | None = None,
    *,
    read_only: bool = True,
    metadata_dir: PathLike | None = None,
    ledger_dirs: Sequence[PathLike] | None = None,
    journal_dirs: Sequence[PathLike] | None = None,
    index_dirs: Sequence[PathLike] | None = None,
    strict: bool = False,
    bookies: BookieMapping | None = None,
    log_reads: Mapping[str, Mapping[int, LogRead]] | None = None,
    zookeeper_dir: PathLike | None = None,
    zookeeper_log_dir: PathLike | None = None,
    configuration_zookeeper_dir: PathLike | None = None,
    zxid: int | None = None,
    configuration_zookeeper_log_dir: PathLike | None = None,
    metadata_store: str | None = None,
    configuration_metadata_store: str | None = None,
    zookeeper_chroot: str | None = None,
) -> DataDir:
    """Opens a Pulsar data directory read-only (the only mode: a directory pulsarkit did not create is
    never written). Either ``path`` (a standalone's data dir), or ``metadata_dir`` (a RocksDB metadata
    store) or ``zookeeper_dir`` (a ZooKeeper server's data directory, :func:`zookeeper_metadata`: with
    ``zookeeper_log_dir``, ``configuration_zookeeper_dir``, ``configuration_zookeeper_log_dir`` and ``zxid``),
    or ``metadata_store`` (a Pulsar metadata-store URL, :func:`metadata_store_metadata`: ``zk:...`` read live
    and read-only, ``rocksdb:PATH``; with ``configuration_metadata_store``),
    with ``ledger_dirs`` (+ ``journal_dirs``, ``index_dirs`` for a bookie with separate directories).
    ``bookies`` names the bookie of directories without a cookie (``{"host:3181": [dir, ...]}``) and,
    without ``ledger_dirs``, gives them (a standalone's data dir is accepted for its bookie directory).
    ``log_reads`` holds entry logs already read elsewhere (:func:`pulsarkit.spark.storage.open_data_dir`'s
    tasks), by the real path of their ``current/`` and log id; the others are read here."""
    if not read_only:
        raise DataDirError("open_data_dir reads only; use pulsarkit.Store to write a directory pulsarkit owns")
    # each directory given is checked as itself, before a reader names a path below it (current/, a log)
    for d in [metadata_dir, *(ledger_dirs or ()), *(journal_dirs or ()), *(index_dirs or ())]:
        if d is not None and not os.path.isdir(d):
            raise DataDirError(f"{d}: {'not a directory' if os.path.exists(d) else 'no such directory'}", os.fspath(d))

    def cluster(name: PathLike, src: MetadataSource | None) -> DataDir:  # the bookies given; src: the metadata read
        return DataDir(
            name,
            ledger_dirs or (),
            journal_dirs=journal_dirs,
            index_dirs=index_dirs,
            strict=strict,
            bookies=bookies,
            metadata=src,
            log_reads=log_reads,
        )

    if metadata_store is None:
        if configuration_metadata_store is not None:
            raise DataDirError("configuration_metadata_store without metadata_store")
    else:
        others = [n for n, v in (("path", path), ("metadata_dir", metadata_dir), ("zookeeper_dir", zookeeper_dir)) if v]
        if others or zxid is not None:
            raise DataDirError(
                f"metadata_store is the metadata: give it without {', '.join(others) or 'zxid'}"
                + (" (a live ZooKeeper serves only its current state)" if zxid is not None else "")
            )
        if not (ledger_dirs or bookies):
            raise DataDirError("metadata_store holds the metadata only: give the bookies' ledger_dirs (or bookies)")
        scheme, rest = split_metadata_store_url(metadata_store)
        if scheme == "rocksdb" and configuration_metadata_store is None:
            metadata_dir = rest  # today's RocksDB store
        else:
            src = metadata_store_metadata(metadata_store, configuration_metadata_store)
            return cluster(rest if scheme == "rocksdb" else str(parse_connect_string(rest)), src)  # not Path(): zk://
    if zookeeper_dir is None:
        given = [
            n
            for n, v in (
                ("zookeeper_log_dir", zookeeper_log_dir),
                ("configuration_zookeeper_dir", configuration_zookeeper_dir),
                ("configuration_zookeeper_log_dir", configuration_zookeeper_log_dir),
                ("zxid", zxid),
                ("zookeeper_chroot", zookeeper_chroot),
            )
            if v is not None
        ]
        if given:
            raise DataDirError(f"{', '.join(given)} without zookeeper_dir: they describe a ZooKeeper data directory")
    else:
        if path is not None or metadata_dir is not None:
            raise DataDirError(
                "zookeeper_dir is the metadata: give it without path or metadata_dir, with the bookies' ledger_dirs"
            )
        if not (ledger_dirs or bookies):
            raise DataDirError("zookeeper_dir holds the metadata only: give the bookies' ledger_dirs (or bookies)")
        src = zookeeper_metadata(
            zookeeper_dir,
            zookeeper_log_dir,
            configuration_zookeeper_dir,
            zxid,
            configuration_zookeeper_log_dir,
            zookeeper_chroot,
        )
        return cluster(zookeeper_dir, src)
    if path is not None:
        root = Path(path)
        if not root.exists():
            raise DataDirError(f"{root}: no such directory", str(root))
        if not root.is_dir():
            raise DataDirError(f"{root}: not a directory (a data directory is one)", str(root))
        md, bks = find_layout(root)
        return DataDir(
            metadata_dir or md,
            ledger_dirs or ([] if bookies else bks),
            journal_dirs=journal_dirs,
            index_dirs=index_dirs,
            strict=strict,
            bookies=bookies,
            log_reads=log_reads,
        )
    if metadata_dir is None or not (ledger_dirs or bookies):
        raise DataDirError(
            "open_data_dir needs a path, or metadata_dir (or zookeeper_dir) and ledger_dirs (or bookies)"
        )
    return cluster(metadata_dir, None)  # the RocksDB store at metadata_dir, read by DataDir itself


foreign.register(lambda p: open_data_dir(p))  # Store.open of a directory pulsarkit did not create reads it here
