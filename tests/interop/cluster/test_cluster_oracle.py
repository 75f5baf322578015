"""pulsarkit against a real Pulsar cluster: ZooKeeper, three bookies and a broker, from the Maven jars on 127.0.0.1.

The cluster: a ZooKeeper server (``test_interop_zookeeper.Server`` on the jars of ``pulsar-broker:<release>``, a
small ``snapCount`` so its data holds several snapshots and transaction logs, the logs in a separate
``dataLogDir``), cluster metadata written by Pulsar's own ``PulsarClusterMetadataSetup`` (``pulsar
initialize-cluster-metadata``), three bookies (``org.apache.bookkeeper.server.Main``, what ``pulsar bookie`` runs;
each in its own directory with ``journal/`` and ``ledgers/``, DbLedgerStorage) and one broker
(``PulsarBrokerStarter``: ensemble 3, write quorum 2, ack quorum 2, the PIP-70 interceptors, dedup, transactions
with PIP-160 batching, batch-index acks; ``cluster_oracle/``). The standalone oracle's workload
(``../standalone/datadir_oracle/Workload.java``: every codec batched and not, chunks, a partitioned topic, a schema,
dedup, compaction, a deleted topic, transactions) runs on it; everything is stopped with SIGTERM; then a cluster
restarted on a *copy* gives the oracle (Dump, CompactedDump, Reattach: what real Java clients read). The runs
(``RUNS``): ``clean``, and ``killed``: four bookies, one SIGKILLed in the middle of the workload (its ledgers change
ensemble; its acknowledged entries stay in its journal alone) and left down when the oracle's cluster restarts.
Releases: 4.0.7 both runs, the 3.0 LTS line (3.0.7) the clean run (``PULSAR_VERSIONS`` of the standalone oracle).

pulsarkit reads the untouched data offline, the ZooKeeper data dir plus the bookies' directories, and must agree
with the real clients on every field, with nothing more (also as commands, through an export, with a bookie's
directories missing, as of an older zxid); no file may change; a ZooKeeper server restarted on a copy serves
exactly the nodes pulsarkit restores; every entry is on its write set; pulsarkit's GC leaves a cluster the real
one still reads. Everything is cached under ``~/.cache/pulsarkit-tests/cluster-oracle/<hash of the harness files,
the runs and the release>/<run>``; on 2 shared cores a run takes 4-5 minutes to build (cluster start, workload,
stop, restart on a copy, the readers), the whole module about 70 s once they are cached.
"""

from __future__ import annotations

import base64
import collections
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/interop: the standalone and ZooKeeper harnesses
from helpers import free_port, read_export  # noqa: E402
from pulsarkit.analysis.backlog import iter_backlog  # noqa: E402
from pulsarkit.analysis.compaction import compacted_messages, compacted_topic, last_message_id  # noqa: E402
from pulsarkit.analysis.fsck import fsck  # noqa: E402
from pulsarkit.analysis.messages import iter_messages, read_messages  # noqa: E402
from pulsarkit.analysis.orphans import disk_usage_rows, find_orphans  # noqa: E402
from pulsarkit.analysis.transactions import transaction_log_table, transactions, transactions_table  # noqa: E402
from pulsarkit.bookkeeper.journal import scan_journal  # noqa: E402
from pulsarkit.cli import main  # noqa: E402
from pulsarkit.export.run import export  # noqa: E402
from pulsarkit.managed_ledger.position import Position  # noqa: E402
from pulsarkit.metadata.store import ledger_id_from_path, ledger_path, parse_ledger_metadata, serialize_ledger_metadata  # noqa: E402  # noqa: E402
from pulsarkit.metadata.zookeeper import Delete, Multi, ZkSnapshotStore, parse_txn_log, zxid_from_name  # noqa: E402
from pulsarkit.scan.datadir import DataDir, DataDirSpec, open_data_dir  # noqa: E402
from pulsarkit.scan.replicas import replica_report  # noqa: E402
from standalone.test_datadir_oracle import (  # noqa: E402
    COMPACTED_TOPICS,
    JVM,
    NS,
    PULSAR_VERSION,
    PULSAR_VERSIONS,
    SUBSCRIPTIONS,
    USER_TOPICS,
    Standalone,
    _exported,
    _java_id,
    _java_source,
    _lib,
    _ours,
    _read_compacted,
    _theirs,
    _tool,
    assert_read_only,
)
from standalone.test_datadir_oracle import HERE as PROGRAMS  # noqa: E402
from test_interop_zookeeper import Server, _assert_same, _served  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.slow]

HERE = Path(__file__).resolve().parent / "cluster_oracle"
CACHE = (
    Path(os.environ.get("PULSARKIT_TEST_CACHE") or Path.home() / ".cache" / "pulsarkit-tests").resolve()
    / "cluster-oracle"
)
CLUSTER = "cluster-a"
BOOKIES = 3
#: The runs: ``clean`` on three bookies; ``killed`` on four, the second SIGKILLed while the workload writes (once
#: the broker lists ``kill_after``'s topic), so that the ledgers it was in change ensemble and its journal keeps
#: entries no entry log has; it stays down, and the oracle's cluster restarts without it. Part of the cache key.
RUNS = {
    "clean": {"bookies": BOOKIES},
    "killed": {"bookies": BOOKIES + 1, "kill": 2, "kill_after": "codec-zlib"},
}
#: ZooKeeper snapshots after 100..200 transactions: a workload of a few thousand leaves several snapshots and logs.
SNAP_COUNT = 200
#: The bookies' JVM: small heaps (2 cores, four bookie/broker JVMs at once).
BOOKIE_JVM = ["-Xmx256m", "-XX:MaxDirectMemorySize=256m", *JVM[2:]]


#: Each release's runs: the default release (4.0.7) all of ``RUNS``, the 3.0 LTS line the clean run (CI time).
RELEASE_RUNS = [(v, k) for v in PULSAR_VERSIONS for k in RUNS if v == PULSAR_VERSION or k == "clean"]


def _harness_hash(version: str) -> str:
    h = hashlib.sha256((version + json.dumps(RUNS, sort_keys=True)).encode())
    for p in sorted(HERE.iterdir()):
        h.update(p.name.encode() + p.read_bytes())
    for p in sorted(PROGRAMS.iterdir()):  # the oracle programs as they run against this release
        h.update(p.name.encode() + (_java_source(p.stem, version).encode() if p.suffix == ".java" else p.read_bytes()))
    return h.hexdigest()[:16]


def _wait(what: str, ready, procs: list[subprocess.Popen], log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"{what} did not start (see {log}): {tail}")
        time.sleep(0.5)


class Cluster:
    """ZooKeeper, ``bookies`` bookies and a broker over ``data`` (``zookeeper/``, ``bookie-N/``, ``ports.json``:
    the bookie ids are in the ledgers' ensembles and cookies, so a restart keeps every port); configuration files
    and logs go to ``work``. The first start initialises the cluster metadata; ``down`` are bookies (numbered
    from 1) a restart leaves stopped."""

    java = Standalone.java  # a program of the standalone oracle against this cluster (uses .lib and .work)

    def __init__(
        self,
        lib: Path,
        work: Path,
        data: Path,
        bookies: int = BOOKIES,
        down: tuple[int, ...] = (),
        version: str = PULSAR_VERSION,
    ) -> None:
        self.lib, self.work, self.data = lib, work, data
        self.version = version  # the release whose client programs run (Standalone.java)
        work.mkdir(parents=True, exist_ok=True)
        data.mkdir(parents=True, exist_ok=True)
        ports_file = data / "ports.json"
        first = not ports_file.exists()
        if first:
            ports = {"broker": free_port(), "web": free_port(), "bookies": [free_port() for _ in range(bookies)]}
            ports_file.write_text(json.dumps(ports))
        self.ports = json.loads(ports_file.read_text())
        self.down = down
        self.bookies: dict[int, subprocess.Popen] = {}
        self.broker: subprocess.Popen | None = None
        self.logs: list = []
        self.zk = Server(lib, data / "zookeeper", 60_000, f"-Dzookeeper.snapCount={SNAP_COUNT}")
        try:
            self._start(first)
        except BaseException:
            self.stop(signal.SIGKILL)
            raise

    @property
    def zk_url(self) -> str:
        return f"zk:127.0.0.1:{self.zk.port}"

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.ports['broker']}"

    @property
    def web(self) -> str:
        return f"http://127.0.0.1:{self.ports['web']}"

    def bookie_id(self, i: int) -> str:
        return f"127.0.0.1:{self.ports['bookies'][i - 1]}"

    def _popen(self, name: str, args: list[str], cwd: Path, jvm: list[str]) -> subprocess.Popen:
        log = open(self.work / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
        self.logs.append(log)
        return subprocess.Popen(
            [_tool("java"), *jvm, "-Dpulsar.log.dir=logs", "-cp", f"{self.lib}/*", *args],
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _start(self, first: bool) -> None:
        if first:
            r = subprocess.run(
                [_tool("java"), "-Xmx256m", "-cp", f"{self.lib}/*", "org.apache.pulsar.PulsarClusterMetadataSetup"]
                + ["--cluster", CLUSTER, "--metadata-store", self.zk_url]
                + ["--configuration-metadata-store", self.zk_url, "--web-service-url", self.web]
                + ["--broker-service-url", self.url, "--initial-num-transaction-coordinators", "1"],
                capture_output=True,
                text=True,
                timeout=300,
            )
            (self.work / "setup.log").write_text(r.stdout + r.stderr)
            if r.returncode != 0:
                raise RuntimeError(f"PulsarClusterMetadataSetup failed: {(r.stdout + r.stderr)[-3000:]}")
        for i, port in enumerate(self.ports["bookies"], 1):
            if i in self.down:
                continue
            d = self.data / f"bookie-{i}"
            (d / "journal").mkdir(parents=True, exist_ok=True)
            (d / "ledgers").mkdir(parents=True, exist_ok=True)
            conf = self.work / f"bookie-{i}.conf"
            conf.write_text(
                (HERE / "bookie.conf").read_text()
                + f"bookiePort={port}\nmetadataServiceUri=zk+hierarchical://127.0.0.1:{self.zk.port}/ledgers\n"
            )
            main = ["org.apache.bookkeeper.server.Main", "--conf", str(conf)]
            self.bookies[i] = self._popen(f"bookie-{i}", main, d, BOOKIE_JVM)
        c = self.zk.client()
        try:

            def registered() -> bool:
                want = {self.bookie_id(i) for i in self.bookies}
                return want <= set(c.get_children("/ledgers/available") or [])

            _wait("the bookies", registered, list(self.bookies.values()), self.work / "bookie-1.log")
        finally:
            c.stop()
            c.close()
        conf = self.work / "broker.conf"
        conf.write_text(
            (HERE / "broker.conf").read_text()
            + f"metadataStoreUrl={self.zk_url}\nconfigurationMetadataStoreUrl={self.zk_url}\n"
            + f"brokerServicePort={self.ports['broker']}\nwebServicePort={self.ports['web']}\n"
        )
        (self.work / "broker").mkdir(exist_ok=True)
        self.broker = self._popen(
            "broker", ["org.apache.pulsar.PulsarBrokerStarter", "-c", str(conf)], self.work / "broker", JVM
        )

        def serving() -> bool:
            try:
                with urllib.request.urlopen(f"{self.web}/admin/v2/namespaces/public", timeout=2) as r:
                    return b"public/default" in r.read()
            except OSError:
                return False

        _wait("the broker", serving, [self.broker], self.work / "broker.log", timeout=180)

    def kill_bookie(self, i: int) -> None:
        self.bookies[i].send_signal(signal.SIGKILL)
        self.bookies[i].wait()

    def topics(self) -> list[str]:
        try:
            with urllib.request.urlopen(f"{self.web}/admin/v2/persistent/public/default", timeout=10) as r:
                return json.loads(r.read())
        except OSError:
            return []

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """The broker, then the bookies, then ZooKeeper (each closes its sessions: no ephemeral node stays)."""
        for p in [self.broker, *self.bookies.values()]:
            if p is not None and p.poll() is None:
                p.send_signal(sig)
                try:
                    p.wait(90)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.zk.stop(sig)
        for log in self.logs:
            log.close()


def _copy(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, symlinks=True)
    tmp.rename(dst)


def _run_workload(lib: Path, root: Path, kind: str, version: str) -> None:
    spec = RUNS[kind]
    run = root / f"run-{kind}"
    shutil.rmtree(run, ignore_errors=True)
    c = Cluster(lib, run, run / "data", spec["bookies"], version=version)
    txns = str(root / kind / "txns.txt")
    (root / kind).mkdir(parents=True, exist_ok=True)
    try:
        if "kill" not in spec:
            c.java("Workload", c.url, c.web, txns)
        else:
            w = c.java("Workload", c.url, c.web, txns, wait=False)
            # its client logs to stdout: a pipe nobody reads fills up and blocks the client's I/O thread
            threading.Thread(target=w.stdout.read, daemon=True).start()
            try:
                _wait("the topic to kill after", lambda: NS + spec["kill_after"] in c.topics(), [w], run / "broker.log")
                c.kill_bookie(spec["kill"])
                assert w.wait(600) == 0, (run / "Workload.stderr").read_text(errors="replace")[-3000:]
            finally:
                w.kill()
                w.wait()
    finally:
        c.stop()
    _copy(run / "data", root / kind / "data")
    shutil.rmtree(run, ignore_errors=True)


def _observe(lib: Path, root: Path, kind: str, version: str) -> None:
    """The oracle for one cluster's data: the cluster restarted on a copy (a killed bookie left down), a Reader
    over every topic, a readCompacted Reader over the compacted topics, then a consumer re-attaching to every
    subscription."""
    data, out, spec = root / kind / "data", root / kind, RUNS[kind]
    topics, subs = USER_TOPICS, SUBSCRIPTIONS
    if (out / "reattach.txt").exists():
        return
    work = out / "observe"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _copy(data, work / "data")
    down = (spec["kill"],) if "kill" in spec else ()
    c = Cluster(lib, work, work / "data", spec["bookies"], down=down, version=version)
    try:
        dump = c.java("Dump", c.url, *topics)
        (out / "reader.jsonl").write_text(
            "".join(line[4:] + "\n" for line in dump.splitlines() if line.startswith("REC "))
        )
        got = c.java("CompactedDump", c.url, *COMPACTED_TOPICS)
        (out / "compacted.jsonl").write_text(
            "".join(line + "\n" for line in got.splitlines() if line.startswith(("CMPLAST ", "CMPMSG ")))
        )
        got = c.java("Reattach", c.url, *[x for pair in subs for x in pair])
        (out / "reattach.txt").write_text(
            "".join(line[4:] + "\n" for line in got.splitlines() if line.startswith("GOT "))
        )
    finally:
        c.stop()
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module", params=RELEASE_RUNS, ids=lambda r: f"{r[0]}-{r[1]}")
def run(request) -> tuple[str, str]:
    """(release, kind): a run, built once and cached (``<kind>/build-seconds.txt``: how long the run and its
    observation took); each is built by the first test that needs it, inside that test's time budget."""
    version, kind = request.param
    root = CACHE / _harness_hash(version)
    done = root / kind / ".complete"
    if done.exists():
        return version, kind
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; a second session waits, then reuses it
        if not done.exists():
            lib = _lib(version)
            started = time.monotonic()
            if not (root / kind / "data").exists():  # each step is kept, so an interrupted build resumes
                _run_workload(lib, root, kind, version)
            _observe(lib, root, kind, version)
            (root / kind / "build-seconds.txt").write_text(f"{time.monotonic() - started:.0f}\n")
            done.write_text("ok")
    return version, kind


@pytest.fixture(scope="module")
def version(run) -> str:
    return run[0]


@pytest.fixture(scope="module")
def oracle(run) -> Path:
    """Where a release's runs are cached: ``<kind>/data`` (a cluster's data) with the oracle's observations."""
    return CACHE / _harness_hash(run[0])


@pytest.fixture(scope="module")
def kind(run) -> str:
    return run[1]


def _dirs(data: Path) -> dict:
    """open_data_dir's arguments for a cluster's data: the ZooKeeper data dir and every bookie's directories."""
    return {
        "zookeeper_dir": data / "zookeeper" / "data",
        "zookeeper_log_dir": data / "zookeeper" / "txlog",
        "ledger_dirs": sorted(data.glob("bookie-*/ledgers")),
        "journal_dirs": sorted(data.glob("bookie-*/journal")),
    }


def _open(data: Path) -> DataDir:
    return open_data_dir(**_dirs(data))


def test_every_message_equals_what_the_java_reader_received(oracle, kind):
    data = oracle / kind / "data"
    expected = [json.loads(line) for line in (oracle / kind / "reader.jsonl").read_text().splitlines()]
    by_topic = collections.defaultdict(list)
    for e in expected:
        by_topic[e["topic"]].append(_theirs(e))
    with _open(data) as dd:
        compared = 0
        for topic, want in by_topic.items():
            got = [_ours(r) for r in iter_messages(dd, topic)]
            assert got == want, topic
            compared += len(got)
        assert dd.issues == []
    assert compared == len(expected) and compared > 100


def test_nothing_else_comes_out(oracle, kind):
    expected = collections.Counter(
        json.loads(x)["topic"] for x in (oracle / kind / "reader.jsonl").read_text().splitlines()
    )
    with _open(oracle / kind / "data") as dd:
        got = collections.Counter(r["topic"] for r in read_messages(dd))
        listed = {t.name for t in dd.topics(include_system=False)}
    assert got == expected
    assert NS + "to-delete" not in listed and NS + "dedup" in listed


def test_backlog_equals_what_a_reattached_consumer_received(oracle, kind):
    want = collections.defaultdict(list)
    for line in (oracle / kind / "reattach.txt").read_text().splitlines():
        topic, sub, mid = line.split()
        want[(topic, sub)].append(mid.split(";")[-1])
    with _open(oracle / kind / "data") as dd:
        for topic, sub in SUBSCRIPTIONS:
            names = dd.expand(topic)
            got = [_java_id(r["message_id"]) for ml in names for r in iter_backlog(dd, ml, sub)]
            if len(names) > 1:  # a partitioned consumer interleaves partitions: compare per partition
                assert sorted(got) == sorted(want[(topic, sub)]), (topic, sub)
            else:
                assert got == want[(topic, sub)], (topic, sub)


def test_transaction_states_equal_what_the_coordinator_reported(oracle, kind):
    reported = {}
    for line in (oracle / kind / "txns.txt").read_text().splitlines():
        txn, state = line.split()
        most, least = txn.strip("()").split(",")
        reported[(int(most), int(least))] = state
    with _open(oracle / kind / "data") as dd:
        states = {k: t.state for k, t in transactions(dd).items()}
    assert {k: states.get(k) for k in reported} == reported


def test_compacted_view_and_last_message_id_equal_what_a_read_compacted_reader_got(oracle, kind):
    real = _read_compacted(oracle, kind)
    with _open(oracle / kind / "data") as dd:
        for topic in COMPACTED_TOPICS:
            ours = [
                (
                    f"{m['ledger_id']}:{m['entry_id']}:{m['batch_index']}",
                    m["key"],
                    base64.b64decode(m["payload_b64"]).hex(),
                )
                for m in compacted_messages(dd, topic)
            ]
            assert ours == real[topic]["messages"], topic
            last = last_message_id(dd, topic)
            assert [f"{last.ledger_id}:{last.entry_id}:{last.batch_index}"] == real[topic]["last"], topic
            view = compacted_topic(dd, topic)
            assert view.has_message_available(Position(-1, -1)) == real[topic]["available"], topic


def test_not_one_byte_written_also_read_only(oracle, kind, tmp_path):
    assert_read_only(oracle / kind / "data", tmp_path, _open)


def test_no_absolute_path_in_the_cluster_data(oracle, kind):
    """Every process ran in its own directory with relative paths: no file of ZooKeeper's data or of a bookie
    names where it was (the harness's own zoo.cfg and server.log beside ZooKeeper's data aside)."""
    data = oracle / kind / "data"
    named = [
        p
        for p in data.rglob("*")
        if p.is_file() and p.name not in ("zoo.cfg", "server.log") and str(CACHE).encode() in p.read_bytes()
    ]
    assert named == []
    cookies = [p.read_text() for p in data.glob("bookie-*/*/current/VERSION")]
    assert len(cookies) == 2 * RUNS[kind]["bookies"]
    assert all('journalDir: "journal"' in c and 'ledgerDirs: "1\\tledgers"' in c for c in cookies), cookies


def test_transaction_inspector_reports_what_the_coordinator_did(oracle, kind):
    """The one transaction coordinator's log (PIP-160 batches, on three bookies) gives every transaction the
    state the client saw; the open one is the only one with live log records."""
    reported = dict(line.split() for line in (oracle / kind / "txns.txt").read_text().splitlines())
    with _open(oracle / kind / "data") as dd:
        rows = {r["txn"]: r for r in transactions_table(dd).to_pylist()}
        (log,) = transaction_log_table(dd).to_pylist()
    assert {t: rows[t]["state"] for t in reported} == reported
    (open_txn,) = [t for t, s in reported.items() if s == "OPEN"]
    assert {t for t, r in rows.items() if r["live_log_records"]} == {open_txn}
    assert log["entries"] == log["batched_entries"] > 0


def test_every_entry_has_write_quorum_copies_on_its_write_set(oracle, kind, capsys):
    """Each entry of each ledger with metadata is on exactly the two bookies of its write set (ensemble 3,
    write quorum 2), every copy verifies, also on the killed bookie (its copies there in its journal alone);
    the killed run's ledgers changed ensemble; ``pulsarkit replicas --bookie DIR`` says the same as a command."""
    data = oracle / kind / "data"
    with _open(data) as dd:
        rep = replica_report(dd)
        ids = sorted({b for b in dd.bookie_ids if b})
    assert rep.problems == [] and sorted(rep.bookies) == ids and len(ids) == RUNS[kind]["bookies"]
    live = [r for r in rep.ledgers if r["ensemble_size"] is not None]
    assert len(live) > 15 and sum(r["entries"] for r in live) > 100
    for r in live:
        assert (r["ensemble_size"], r["write_quorum"], r["ack_quorum"]) == (3, 2, 2), r
        assert r["copies"] == 2 * r["entries"] and r["under_replicated"] == 0 and r["unexpected_replica"] == 0, r
        assert sum(r["read_from"].values()) == r["entries"], r
    changed = [r for r in live if len(r["ensembles"]) > 1]
    if "kill" in RUNS[kind]:
        killed = json.loads((data / "ports.json").read_text())["bookies"][RUNS[kind]["kill"] - 1]
        assert changed and all(f"127.0.0.1:{killed}" in r["ensembles"][0] for r in changed), changed
        assert all(f"127.0.0.1:{killed}" not in r["ensembles"][-1] for r in changed), changed
    else:
        assert changed == []
        assert {b for r in live for b in r["read_from"]} == set(ids)  # the ensembles spread reads over all
    d = _dirs(data)
    args = ["replicas", "--zookeeper-dir", str(d["zookeeper_dir"]), "--zookeeper-log-dir", str(d["zookeeper_log_dir"])]
    args += [x for b in sorted(data.glob("bookie-*")) for x in ("--bookie", str(b))]
    assert main([*args, "--view", "ledgers", "--json", "--strict"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["ledger_id"], r["copies"], r["entries"]) for r in rows] == [
        (r["ledger_id"], r["copies"], r["entries"]) for r in rep.ledgers
    ]


@pytest.mark.parametrize("run", [(PULSAR_VERSION, "killed")], indirect=True, ids=lambda r: f"{r[0]}-{r[1]}")
def test_the_killed_bookie_missing_every_message_comes_from_the_other_replicas(oracle, kind):
    """The SIGKILLed bookie's directories left out (a lost disk): every message the real reader got (on the
    cluster restarted without that bookie) still comes out, nothing else; the replica report names it absent
    for its ledgers and finds nothing else wrong. Its journal holds entries its ledger storage never got."""
    data = oracle / kind / "data"
    gone = data / f"bookie-{RUNS[kind]['kill']}"
    journal = [r for j in (gone / "journal" / "current").glob("*.txn") for r in scan_journal(j).records]
    assert [r for r in journal if r.entry_id >= 0] and not list((gone / "ledgers" / "current").glob("*.log"))
    d = _dirs(data)
    d["ledger_dirs"] = [p for p in d["ledger_dirs"] if gone not in p.parents]
    d["journal_dirs"] = [p for p in d["journal_dirs"] if gone not in p.parents]
    expected = [json.loads(line) for line in (oracle / kind / "reader.jsonl").read_text().splitlines()]
    by_topic = collections.defaultdict(list)
    for e in expected:
        by_topic[e["topic"]].append(_theirs(e))
    with open_data_dir(**d) as dd:
        for topic, want in by_topic.items():
            assert [_ours(r) for r in iter_messages(dd, topic)] == want, topic
        assert collections.Counter(r["topic"] for r in read_messages(dd)) == {t: len(w) for t, w in by_topic.items()}
        rep = replica_report(dd)
        killed = json.loads((data / "ports.json").read_text())["bookies"][RUNS[kind]["kill"] - 1]
        absent = [r for r in rep.ledgers if r["bookies_absent"]]
        assert dd.issues == [] and rep.problems == []
    assert absent and all(r["bookies_absent"] == [f"127.0.0.1:{killed}"] for r in absent)


def test_a_zookeeper_server_on_a_copy_serves_every_node_pulsarkit_reads(oracle, version, kind, tmp_path):
    """ZooKeeper itself (the cluster's own jars) restarted on a copy of the cluster's ZooKeeper data serves
    every node pulsarkit restores offline: path, data, the whole stat, ACL, children."""
    zk_root = oracle / kind / "data" / "zookeeper"
    store = ZkSnapshotStore(zk_root / "data", log_dir=zk_root / "txlog")
    served, zxid = _served(_lib(version), zk_root, tmp_path / "zk")
    n = _assert_same(store, served, zxid)
    assert store.issues == [] and n > 100
    snaps = list((zk_root / "data" / "version-2").glob("snapshot.*"))
    logs = list((zk_root / "txlog" / "version-2").glob("log.*"))
    assert len(snaps) >= 3 and len(logs) >= 3, (snaps, logs)
    with _open(oracle / kind / "data") as dd:
        n_ledgers = sum(1 for lid in dd.ledgers if dd.ledgers[lid].state != "DELETED")
        n_messages = sum(1 for _ in read_messages(dd))
    print(
        f"cluster oracle ({version} {kind}): {n} znodes, zxid {zxid:#x}, {len(snaps)} snapshots, {len(logs)} logs,"
        f" {n_ledgers} ledgers with metadata, {n_messages} messages"
    )


@pytest.mark.parametrize("run", [(PULSAR_VERSION, "clean")], indirect=True, ids=lambda r: f"{r[0]}-{r[1]}")
def test_pulsarkit_gc_on_every_bookie_then_the_real_cluster_reads_every_message(
    oracle, version, kind, tmp_path, capsys
):
    """On a copy of the clean cluster: ``pulsarkit gc --execute`` over ZooKeeper's data and all three bookies
    deletes the trimmed and deleted topics' ledgers from every bookie and compacts their entry logs; then the
    real cluster restarted on the result gives a Reader every message it gave before, with no BookKeeper
    error in any log."""
    work = tmp_path / "gc"
    _copy(oracle / kind / "data", work / "data")
    with _open(work / "data") as dd:
        dead = {lid for lid, led in dd.ledgers.items() if led.state == "DELETED" and led.entries_on_bookie}
    assert dead
    d = _dirs(work / "data")
    size = lambda: sum(p.stat().st_size for b in d["ledger_dirs"] for p in (b / "current").glob("*.log"))  # noqa: E731
    before = size()
    args = ["gc", "--zookeeper-dir", str(d["zookeeper_dir"]), "--zookeeper-log-dir", str(d["zookeeper_log_dir"])]
    args += [x for b in d["ledger_dirs"] for x in ("--ledger-dir", str(b))]
    assert main([*args, "--force", "--major-threshold", "0.99", "--execute", "--json"]) == 0
    runs = [b["result"] for b in json.loads(capsys.readouterr().out)["bookies"]]
    assert len(runs) == BOOKIES and all(not r["skipped"] for r in runs)
    assert {lid for r in runs for lid in r["deleted_ledgers"]} == dead
    assert sum(r["reclaimed_bytes"] for r in runs) > 0 and size() < before
    c = Cluster(_lib(version), work, work / "data", version=version)
    try:
        _assert_serves_what_the_reader_got(c, oracle / kind)
    finally:
        c.stop()
    errors = [
        line
        for log in work.glob("*.log")
        for line in log.read_text(errors="replace").splitlines()
        if " ERROR " in line and "org.apache.bookkeeper" in line and "BookieIdNotResolvedException" not in line
    ]
    assert errors == [], errors[:5]


def _assert_serves_what_the_reader_got(c: Cluster, recorded: Path) -> None:
    """A Reader through the running cluster's broker gets every message of every user topic the oracle's got."""
    dump = c.java("Dump", c.url, *USER_TOPICS)
    got = [json.loads(line[4:]) for line in dump.splitlines() if line.startswith("REC ")]
    want = [json.loads(line) for line in (recorded / "reader.jsonl").read_text().splitlines()]
    key = lambda r: (r["topic"], r["id"], r["data"], r["key"])  # noqa: E731
    assert [key(r) for r in got] == [key(r) for r in want]


def _live_ledger_ids(url: str) -> set[int]:
    from pulsarkit.metadata.zookeeper_live import ZkLiveStore

    return {lid for p in ZkLiveStore(url).keys("/ledgers/") if (lid := ledger_id_from_path(p)) is not None}


@pytest.mark.parametrize("run", [(PULSAR_VERSION, "clean")], indirect=True, ids=lambda r: f"{r[0]}-{r[1]}")
def test_orphans_cleanup_against_the_live_zookeeper_then_the_broker_serves_every_topic(
    oracle, version, kind, tmp_path, capsys
):
    """On a copy of the clean cluster, running: two leftover ledger nodes planted in its ZooKeeper (metadata that
    names the deleted topic's managed ledger, the Pulsar #13238 kind) are planned from the live ZooKeeper, then
    ``orphans-cleanup --execute --metadata-store`` deletes exactly those nodes while the cluster runs, and the
    broker still gives a Reader every message of every live topic."""
    from kazoo.client import KazooClient
    from pulsarkit.analysis.orphans import cleanup_plan

    work = tmp_path / "cleanup"
    _copy(oracle / kind / "data", work / "data")
    d = _dirs(work / "data")
    c = Cluster(_lib(version), work, work / "data", version=version)
    try:
        zk = KazooClient(hosts=c.zk_url[3:], timeout=30)
        zk.start(timeout=30)
        try:
            live_ids = _live_ledger_ids(c.zk_url)
            template = next(iter(sorted(live_ids)))
            raw, _ = zk.get(ledger_path(template))
            md = parse_ledger_metadata(raw)
            for e in md.customMetadata:
                if e.key == "pulsar/managed-ledger":
                    e.value = b"public/default/persistent/to-delete"
            planted = [max(live_ids) + 1000, max(live_ids) + 1001]
            for lid in planted:
                zk.create(ledger_path(lid), serialize_ledger_metadata(md), makepath=True)
        finally:
            zk.stop()
            zk.close()
        with open_data_dir(metadata_store=c.zk_url, ledger_dirs=d["ledger_dirs"], journal_dirs=d["journal_dirs"]) as dd:
            plan = cleanup_plan(dd)
        assert sorted(i.ledger_id for i in plan.to_delete) == planted
        assert {i.category for i in plan.to_delete} == {"owner_gone"}
        plan.write(str(tmp_path / "plan.json"))
        argv = ["orphans-cleanup", str(tmp_path / "plan.json"), "--execute", "--metadata-store", c.zk_url]
        assert main([*argv, "--backup", str(tmp_path / "backup"), "--json"]) == 0
        res = json.loads(capsys.readouterr().out)
        assert sorted(res["deleted"]) == planted and res["skipped"] == []
        after = _live_ledger_ids(c.zk_url)
        assert after == live_ids  # exactly the planted nodes went, every other ledger is still there
        _assert_serves_what_the_reader_got(c, oracle / kind)
    finally:
        c.stop()


def test_the_export_holds_what_the_java_reader_received(oracle, kind, tmp_path):
    """A Parquet export of the cluster (its ZooKeeper data and bookies as a DataDirSpec), read back by pyarrow:
    every message the Java Reader got, every field the same, and nothing else."""
    out = tmp_path / "export"
    export(DataDirSpec.of(**_dirs(oracle / kind / "data")), "parquet", str(out), log=lambda m: None)
    got = [_exported(r) for r in read_export("parquet", out).to_pylist()]
    want = [
        _theirs(e) | {"topic": e["topic"]}
        for e in map(json.loads, (oracle / kind / "reader.jsonl").read_text().splitlines())
    ]
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want)) and len(got) > 100


@pytest.mark.spark
@pytest.mark.parametrize("run", [(PULSAR_VERSION, "killed")], indirect=True, ids=lambda r: f"{r[0]}-{r[1]}")
def test_the_spark_source_reads_what_the_java_reader_received(spark, oracle, kind):
    """``spark.read.format("pulsarkit")`` with the cluster's parts as options (ZooKeeper data, four bookies'
    ledger and journal directories, one of them killed mid-workload): every message the Java Reader got."""
    r = spark.read.format("pulsarkit")
    for k, v in DataDirSpec.of(**_dirs(oracle / kind / "data")).options().items():
        r = r.option(k, v)
    got = [_exported(row.asDict()) for row in r.load().collect()]
    want = [
        _theirs(e) | {"topic": e["topic"]}
        for e in map(json.loads, (oracle / kind / "reader.jsonl").read_text().splitlines())
    ]
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want)) and len(got) > 100


def test_the_messages_command_on_the_cluster(oracle, kind):
    """``pulsarkit messages`` run as a command on the cluster's directories (``--zookeeper-dir``, each bookie's
    ``--ledger-dir`` and ``--journal-dir``) prints what the library reads, naming the ZooKeeper state it used."""
    d = _dirs(oracle / kind / "data")
    args = ["--zookeeper-dir", d["zookeeper_dir"], "--zookeeper-log-dir", d["zookeeper_log_dir"]]
    for ledgers, journal in zip(d["ledger_dirs"], d["journal_dirs"], strict=True):
        args += ["--ledger-dir", ledgers, "--journal-dir", journal]
    got = subprocess.run(
        [sys.executable, "-m", "pulsarkit", "messages", *map(str, args), "--format", "jsonl"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0, got.stderr
    with _open(oracle / kind / "data") as dd:
        want = [json.loads(json.dumps(r)) for r in read_messages(dd)]
        source = dd.metadata_source
    assert [json.loads(line) for line in got.stdout.splitlines()] == want and len(want) > 100
    assert got.stderr == f"pulsarkit messages: metadata: {source}\n" and "zxid 0x" in source


def test_orphans_disk_usage_and_fsck_of_the_real_cluster(oracle, kind):
    """Over the three (four) bookies: every ledger some bookie holds without metadata is found (the deleted
    topic's and trimmed ledgers), nothing a topic, cursor, schema or compaction uses is called an orphan, the
    per-ledger attribution adds up to BookKeeper's remaining size of each bookie's each log, and fsck finds
    nothing wrong."""
    with _open(oracle / kind / "data") as dd:
        found = {f.ledger_id: f for f in find_orphans(dd)}
        used = {led.ledger_id for led in dd.ledgers.values() if led.referenced}
        assert used and not used & set(found)
        on_disk_only = {lid for lid, led in dd.ledgers.items() if led.state == "DELETED" and led.entries_on_bookie}
        assert on_disk_only and {lid for lid, f in found.items() if f.category == "on_disk_only"} == on_disk_only
        assert {f.category for f in found.values()} <= {"on_disk_only", "schema_unreferenced"}
        rows = list(disk_usage_rows(dd))
        logs = dd.entry_logs()
        assert len({path.rsplit("/current/", 1)[0] for path, _, _ in logs}) == RUNS[kind]["bookies"] - (
            1 if "kill" in RUNS[kind] else 0  # the killed bookie never wrote an entry log
        )
        for path, _, md in logs:
            assert sum(r["bytes"] for r in rows if r["entry_log"] == path) == md.remaining_size, path
        assert [f for f in fsck(dd) if f["severity"] != "info"] == []


def _deletes(zk_log_dir: Path) -> dict[str, int]:
    """Every path a logged transaction deleted, with that transaction's zxid (the first one)."""
    out: dict[str, int] = {}
    for log in sorted((zk_log_dir / "version-2").glob("log.*"), key=lambda p: zxid_from_name(p.name, "log")):
        for t in parse_txn_log(log.read_bytes(), str(log)).txns:
            ops = [r for _, r in t.record.ops] if isinstance(t.record, Multi) else [t.record]
            for r in ops:
                if isinstance(r, Delete):
                    out.setdefault(r.path, t.zxid)
    return out


def test_the_deleted_topic_as_of_a_zxid_before_its_deletion(oracle, kind):
    """``zxid=`` on the real cluster: as of the transaction before the broker began deleting ``to-delete`` (its
    ledgers' metadata, then its managed ledger), the topic is there and its one message is read from the
    bookies, which still hold it; at the newest state it is gone."""
    d = _dirs(oracle / kind / "data")
    deletes = _deletes(d["zookeeper_log_dir"])
    ml = "public/default/persistent/to-delete"
    before = deletes["/managed-ledgers/" + ml] - 1
    with open_data_dir(**d, zxid=before) as dd:
        ledgers = dd.ml_ledgers(ml)
    assert ledgers and all(ledger_path(lid) in deletes for lid in ledgers)  # the broker deleted them first
    first = min([before + 1, *(deletes[ledger_path(lid)] for lid in ledgers if ledger_path(lid) in deletes)])
    with open_data_dir(**d, zxid=first - 1) as dd:
        assert dd.metadata_zxid == first - 1 and dd.ml_ledgers(ml) == ledgers
        got = [base64.b64decode(r["payload_b64"]) for r in iter_messages(dd, NS + "to-delete")]
        assert got == [b"bye"] and dd.issues == []
    with _open(oracle / kind / "data") as dd:
        assert NS + "to-delete" not in {t.name for t in dd.topics()}
        assert all(lid not in dd.ledger_metadata for lid in ledgers)


def _tree(server: Server) -> dict[str, tuple]:
    """Every node a live server serves: data, version, child version, mzxid (kazoo, one walk)."""
    c = server.client()
    try:
        out, todo = {}, ["/"]
        while todo:
            p = todo.pop()
            data, st = c.get(p)
            out[p] = (data or b"", st.version, st.cversion, st.mzxid)
            todo.extend(("" if p == "/" else p) + "/" + ch for ch in c.get_children(p))
        return out
    finally:
        c.stop()
        c.close()


def test_the_live_zookeeper_reads_as_its_data_dir_and_is_left_unchanged(oracle, version, kind, tmp_path):
    """The cluster's ZooKeeper restarted on a copy of its data and read live (``metadata_store="zk:..."``): the
    same topics, ledgers and messages as its data dir read offline, and the server's every node afterwards as
    before (data, version, child version, mzxid: pulsarkit wrote nothing)."""
    zk_root = tmp_path / "zk"
    for sub in ("data", "txlog"):
        shutil.copytree(oracle / kind / "data" / "zookeeper" / sub, zk_root / sub)
    d = _dirs(oracle / kind / "data")
    bookies = {"ledger_dirs": d["ledger_dirs"], "journal_dirs": d["journal_dirs"]}
    started = time.monotonic()
    with _open(oracle / kind / "data") as dd:
        offline = (dd.ledgers_table(), [t.name for t in dd.topics()], list(read_messages(dd)))
    offline_seconds = time.monotonic() - started
    server = Server(_lib(version), zk_root, 3_600_000)
    try:
        before = _tree(server)
        started = time.monotonic()
        with open_data_dir(metadata_store=f"zk:127.0.0.1:{server.port}", **bookies) as dd:
            live = (dd.ledgers_table(), [t.name for t in dd.topics()], list(read_messages(dd)))
            assert dd.issues == []
        seconds = time.monotonic() - started
        after = _tree(server)
    finally:
        server.stop()
    assert live[0].equals(offline[0]) and live[1:] == offline[1:] and len(live[2]) > 100
    assert after == before
    print(
        f"cluster oracle ({version} {kind}): metadata and every message in {offline_seconds:.2f} s from the data"
        f" dir, {seconds:.2f} s through the live ZooKeeper"
    )
