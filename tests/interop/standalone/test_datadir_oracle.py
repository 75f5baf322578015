"""pulsarkit's data-directory reader against real Pulsar standalones (their Java client is the oracle), of
each release in ``PULSAR_VERSIONS``: 4.0.7 and 3.0.7, the 3.0 LTS line.

A small workload (``datadir_oracle/Workload.java``: five codecs batched and not, keys, properties, event
times, null and empty values, chunks, a partitioned topic, a schema, resent duplicates, compaction, a
deleted topic, transactions committed, aborted and left open, acks individual, cumulative, batch-index and
in transactions) runs against a real standalone. Two directories are kept: ``clean`` after a SIGTERM stop,
``killed`` after a SIGKILL right after a final burst (entries only in the journal). For each, a broker
restarted on a *copy* gives the oracle: what a Java Reader receives (read-committed) and what a consumer re-
attaching to every subscription receives. pulsarkit reads the untouched directory and must agree on every
field, with nothing more; the directory's files must be byte-identical afterwards, also when read-only.
Where 3.0.7 writes differently (``CONF_EXTRA``, ``JAVA_PATCHES`` and ``_retains_keyless`` say what differs in
running it), the test asserts the difference exactly.

Everything is cached under ``~/.cache/pulsarkit-tests/datadir-oracle/<hash of the release and workload>``; the
first run of a release resolves ``pulsar-broker`` with Maven (about 1 minute for 4.0.7, 15 s for 3.0.7) and
takes about 4 minutes more (3.0.7: 6 on a loaded machine); later runs about 1 minute (3.0.7's tests 3, two
of them restarting the broker). This is pulsarkit's reader-side oracle; the issue-9 harness
(``tests/interop/standalone``, H3) records a larger workload with the Python and Java clients.
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
import threading
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import rocksdict
from conftest import require_tool
from helpers import free_port, maven_copy_dependencies, read_export
from oracle import JavaOracle
from pulsarkit.analysis.backlog import iter_backlog
from pulsarkit.analysis.compaction import compacted_messages, compacted_topic, last_message_id, phase_one
from pulsarkit.analysis.fsck import fsck
from pulsarkit.analysis.messages import iter_messages, read_messages
from pulsarkit.analysis.orphan_cleanup import execute as execute_cleanup
from pulsarkit.analysis.orphans import OrphanCleanupPlan, cleanup_plan, disk_usage_rows, find_orphans
from pulsarkit.analysis.transactions import pending_ack_table, transaction_log_table, transactions, transactions_table
from pulsarkit.bookkeeper import EntryLogReader
from pulsarkit.bookkeeper.gc import GarbageCollector, GcConfig, GcRequest
from pulsarkit.bookkeeper.journal import journal_table, scan_journal
from pulsarkit.bookkeeper.ledger_storage import SingleDirectoryDbLedgerStorage
from pulsarkit.export.run import export
from pulsarkit.managed_ledger.position import Position
from pulsarkit.metadata.store import MetadataStore, ledger_path
from pulsarkit.scan.datadir import open_data_dir

pytestmark = [pytest.mark.interop, pytest.mark.slow]

HERE = Path(__file__).resolve().parent / "datadir_oracle"
# PULSARKIT_PULSAR_VERSION runs the same workload and checks against another release (e.g. the 3.0 LTS line).
PULSAR_VERSION = os.environ.get("PULSARKIT_PULSAR_VERSION", "4.0.7")
#: The 3.0 LTS release every run also checks: 3.0.7 is the newest 3.0.x the registry serves (3.0.0, 3.0.2, 3.0.7).
PULSAR_LTS_VERSION = "3.0.7"
#: The releases this module's tests run against (one, when PULSARKIT_PULSAR_VERSION names it).
PULSAR_VERSIONS = (
    (PULSAR_VERSION,) if os.environ.get("PULSARKIT_PULSAR_VERSION") else (PULSAR_VERSION, PULSAR_LTS_VERSION)
)
# An unset or empty PULSARKIT_TEST_CACHE means the default; a relative one is taken from the start
# directory (Maven runs elsewhere, so the path must be absolute).
CACHE = (
    Path(os.environ.get("PULSARKIT_TEST_CACHE") or Path.home() / ".cache" / "pulsarkit-tests").resolve()
    / "datadir-oracle"
)
NS = "persistent://public/default/"
CODECS = ("none", "lz4", "zlib", "zstd", "snappy")
USER_TOPICS = [NS + f"codec-{c}" for c in CODECS] + [
    NS + t
    for t in (
        "chunked",
        "parts-partition-0",
        "parts-partition-1",
        "parts-partition-2",
        "schema-string",
        "dedup",
        "compact",
        "compact-batched",
        "txn-topic",
    )
]
#: Topics the workload compacts (one unbatched, one of LZ4 batches with tombstones and keyless messages).
COMPACTED_TOPICS = [NS + "compact", NS + "compact-batched"]
SUBSCRIPTIONS = [(NS + f"codec-{c}", s) for c in CODECS for s in ("ind", "cum", "none")] + [
    (NS + "chunked", "ind"),
    (NS + "parts", "ind"),
    (NS + "txn-topic", "txsub"),
]
JVM = [
    "-Xmx768m",
    "-XX:MaxDirectMemorySize=768m",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.io=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util.zip=ALL-UNNAMED",
]


#: What a release needs on top of ``standalone.conf`` (part of the workload's hash). 3.0.x's broker refuses to
#: start with its load balancer on when it cannot read the NIC speed (a VM's virtual NIC has none; 4.0.x only
#: warns), so the speed is given.
CONF_EXTRA = {"3.": "loadBalancerOverrideBrokerNicSpeedGbps=10\n"}
#: Client calls a release lacks in the oracle programs, and the same request the way that release makes it
#: (part of the workload's hash). ``Reader.getLastMessageIdsAsync()`` came in 3.1; 4.0's Reader answers it
#: from its consumer, whose GetLastMessageId call 3.0 has.
JAVA_PATCHES = {
    "3.": {
        "CompactedDump": [
            (
                "r.getLastMessageIdsAsync()",
                "((org.apache.pulsar.client.impl.ReaderImpl<byte[]>) r).getConsumer().getLastMessageIdsAsync()",
            )
        ]
    }
}


def _retains_keyless(version: str) -> bool:
    """``topicCompactionRetainNullKey``'s default: whether Pulsar's compactor keeps messages without a key in
    the compacted ledger. True in 3.0.x (the setting came to 3.0 with the old behaviour as its default),
    false since 3.2 and in 4.0."""
    return version.startswith("3.0.")


def _conf_extra(version: str) -> str:
    return "".join(v for prefix, v in CONF_EXTRA.items() if version.startswith(prefix))


def _java_source(main: str, version: str) -> str:
    """The source of oracle program ``main`` as run against ``version``."""
    src = (HERE / f"{main}.java").read_bytes().decode()
    for prefix, patches in JAVA_PATCHES.items():
        if version.startswith(prefix):
            for old, new in patches.get(main, []):
                assert old in src, (main, old)
                src = src.replace(old, new)
    return src


def _tool(name: str) -> str:
    return require_tool(name, "the data-directory oracle runs a real Pulsar standalone")


def _workload_hash(version: str = PULSAR_VERSION) -> str:
    h = hashlib.sha256(version.encode() + _conf_extra(version).encode())
    for p in sorted(HERE.iterdir()):
        h.update(p.name.encode() + (_java_source(p.stem, version).encode() if p.suffix == ".java" else p.read_bytes()))
    return h.hexdigest()[:16]


def _lib(version: str = PULSAR_VERSION) -> Path:
    """pulsar-broker ``version`` and its dependencies, resolved once with Maven."""
    lib = CACHE / f"lib-{version}"
    if (lib / ".complete").exists():
        return lib
    mvn = _tool("mvn")
    work = CACHE / "mvn" / version
    work.mkdir(parents=True, exist_ok=True)
    if version.startswith("3."):
        # 3.x's transitive gRPC modules pin each other with hard ranges ([1.54.1] from BookKeeper 4.16,
        # [1.55.3], [1.56.1] from jetcd) that cannot all hold; Maven 3.8's resolver then backtracks and, to
        # word the conflict, walks every path of the graph (over 30 minutes, never finishing). Pulsar's own
        # build settles them by its dependencyManagement: importing it gives the versions its distribution
        # ships (gRPC 1.55.3, ZooKeeper 3.9.2, log4j 2.18) in about 15 s. 3.x logs through slf4j 1.7 with
        # log4j-slf4j-impl, which comes with it.
        managed = (
            "<dependencyManagement><dependencies><dependency><groupId>org.apache.pulsar</groupId>"
            f"<artifactId>pulsar</artifactId><version>{version}</version><type>pom</type><scope>import</scope>"
            "</dependency></dependencies></dependencyManagement>"
        )
        binding = ""
    else:
        managed = ""
        binding = (
            "<dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId>"
            "<version>2.24.3</version></dependency>"
        )
    (work / "pom.xml").write_text(
        "<project xmlns='http://maven.apache.org/POM/4.0.0'><modelVersion>4.0.0</modelVersion>"
        "<groupId>pulsarkit.test</groupId><artifactId>standalone</artifactId><version>1</version>"
        f"<packaging>pom</packaging>{managed}<dependencies>"
        f"<dependency><groupId>org.apache.pulsar</groupId><artifactId>pulsar-broker</artifactId>"
        f"<version>{version}</version></dependency>{binding}</dependencies></project>"
    )
    return maven_copy_dependencies(mvn, work / "pom.xml", work, lib, f"pulsar-broker {version}")


class Standalone:
    """One standalone over ``<work>/data`` (relative paths, so no absolute path ends up in the data)."""

    def __init__(self, lib: Path, work: Path, version: str = PULSAR_VERSION) -> None:
        self.lib, self.work, self.version = lib, work, version
        self.broker_port, self.web_port = free_port(), free_port()
        conf = (HERE / "standalone.conf").read_text() + _conf_extra(version)
        conf += f"brokerServicePort={self.broker_port}\nwebServicePort={self.web_port}\n"
        (work / "standalone.conf").write_text(conf)
        self.log = open(work / "standalone.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                _tool("java"),
                *JVM,
                "-Dpulsar.log.dir=logs",
                "-cp",
                f"{lib}/*",
                "org.apache.pulsar.PulsarStandaloneStarter",
                "-c",
                "standalone.conf",
                "--metadata-dir",
                "data/metadata",
                "--bookkeeper-dir",
                "data/bookkeeper",
                "-nfw",
                "-nss",
                "-a",
                "127.0.0.1",
            ],
            cwd=work,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{self.web}/admin/v2/namespaces/public", timeout=2) as r:
                    if b"public/default" in r.read():
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise RuntimeError(f"standalone did not start; see {work / 'standalone.log'}")
            time.sleep(1)

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.broker_port}"

    @property
    def web(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def java(self, main: str, *args: str, wait: bool = True) -> subprocess.Popen | str:
        src = self.work / "src" / f"{main}.java"
        src.parent.mkdir(exist_ok=True)
        src.write_text(_java_source(main, self.version))
        cmd = [_tool("java"), "-cp", f"{self.lib}/*", str(src), *args]
        if not wait:
            with open(self.work / f"{main}.stderr", "ab") as err:
                return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=840)
        if r.returncode != 0:
            raise RuntimeError(f"{main} failed: {r.stderr[-3000:]}")
        for line in r.stderr.splitlines():
            if line.startswith("RETRY "):
                print(f"{main}: {line}")  # a topic re-read after a broker-side timeout: shown with the test's output
        return r.stdout

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _copy(src: Path, dst: Path, drop_ephemeral: bool = False) -> None:
    shutil.copytree(src, dst, symlinks=True)
    (dst / "metadata" / "LOCK").unlink(missing_ok=True)
    if drop_ephemeral:
        _drop_ephemeral(dst / "metadata")


def _drop_ephemeral(metadata: Path) -> None:
    """Removes a killed session's ephemeral nodes from a *copy* of its metadata store. A 4.0.7 standalone
    restarted on a SIGKILLed directory can otherwise spin forever re-validating its bookie's stale
    ``/ledgers/available/<bookie>`` registration (hundreds of MB of log a minute)."""
    db = rocksdict.Rdict(str(metadata), rocksdict.Options(raw_mode=True))
    try:
        stale = [k for k, v in db.items() if k.startswith(b"/") and len(v) > 40 and v[40] == 1]
        for k in stale:
            del db[k]
    finally:
        db.close()
    (metadata / "rocksdict-config.json").unlink(missing_ok=True)


def _run_workload(lib: Path, root: Path, version: str) -> None:
    shutil.rmtree(root, ignore_errors=True)
    run = root / "run"
    run.mkdir(parents=True)
    s = Standalone(lib, run, version)
    try:
        s.java("Workload", s.url, s.web, str(root / "txns.txt"))
    finally:
        s.stop()
    _copy(run / "data", root / "clean" / "data")
    s = Standalone(lib, run, version)  # the same directory goes on: a final burst, then SIGKILL
    burst = s.java("Burst", s.url, wait=False)
    watchdog = threading.Timer(420, burst.kill)  # a client stuck for good must fail the build, not hang it
    watchdog.start()
    try:
        done = any(line.startswith("BURST-DONE") for line in burst.stdout)
        err = (run / "Burst.stderr").read_text(errors="replace")[-3000:]
        assert done, f"the burst did not complete: {err}"
    finally:
        watchdog.cancel()
        s.stop(signal.SIGKILL)
        burst.kill()
        burst.wait()
    _copy(run / "data", root / "killed" / "data.tmp")
    (root / "killed" / "data.tmp").rename(root / "killed" / "data")
    shutil.rmtree(run, ignore_errors=True)


def _observe(lib: Path, version: str, data: Path, out: Path, topics: list[str], subs: list[tuple[str, str]]) -> None:
    """The oracle for one directory: a broker restarted on a copy, a Reader over every topic, then a consumer
    re-attaching to every subscription."""
    if (out / "reattach.txt").exists():
        return
    work = out / "observe"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _copy(data, work / "data", drop_ephemeral=True)
    s = Standalone(lib, work, version)
    try:
        dump = s.java("Dump", s.url, *topics)
        (out / "reader.jsonl").write_text(
            "".join(line[4:] + "\n" for line in dump.splitlines() if line.startswith("REC "))
        )
        got = s.java("CompactedDump", s.url, *COMPACTED_TOPICS)
        (out / "compacted.jsonl").write_text(
            "".join(line + "\n" for line in got.splitlines() if line.startswith(("CMPLAST ", "CMPMSG ")))
        )
        got = s.java("Reattach", s.url, *[x for pair in subs for x in pair])
        (out / "reattach.txt").write_text(
            "".join(line[4:] + "\n" for line in got.splitlines() if line.startswith("GOT "))
        )
    finally:
        s.stop()
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def oracle() -> Path:
    """``clean/`` and ``killed/`` data directories of the default release with the oracle's observations,
    built once and cached (the fixture other modules use)."""
    return _oracle(PULSAR_VERSION)


@pytest.fixture(scope="module", params=PULSAR_VERSIONS)
def pulsar_version(request) -> str:
    """Each release this module checks: 4.0.7 and the 3.0 LTS line."""
    return request.param


@pytest.fixture(scope="module")
def recorded(pulsar_version) -> Path:
    """The ``oracle`` of each release in ``PULSAR_VERSIONS``."""
    return _oracle(pulsar_version)


def _oracle(version: str) -> Path:
    root = CACHE / _workload_hash(version)
    if (root / ".complete").exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; a second session waits, then reuses it
        return _build_oracle(root, version)


def _build_oracle(root: Path, version: str) -> Path:
    if (root / ".complete").exists():
        return root
    lib = _lib(version)
    if not (root / "killed" / "data").exists():  # each step is kept, so an interrupted build resumes
        _run_workload(lib, root, version)
    _observe(lib, version, root / "clean" / "data", root / "clean", USER_TOPICS, SUBSCRIPTIONS)
    _observe(
        lib,
        version,
        root / "killed" / "data",
        root / "killed",
        [*USER_TOPICS, NS + "burst"],
        [*SUBSCRIPTIONS, (NS + "burst", "ind")],
    )
    (root / ".complete").write_text("ok")
    return root


def _java_id(mid: dict) -> str:
    s = f"{mid['ledger_id']}:{mid['entry_id']}:{mid['partition']}"
    return s + f":{mid['batch_index']}" if mid["batch_index"] >= 0 else s


def _ours(r: dict) -> dict:
    bem = r["broker_entry_metadata"] or {}
    return {
        "id": _java_id(r["message_id"]),
        "key": r["key"],
        "props": r["properties"],
        "data": None if r["payload_b64"] is None else base64.b64decode(r["payload_b64"]).hex(),
        "publish_time": r["publish_time"],
        "event_time": r["event_time"],
        "seq": r["sequence_id"],
        "producer": r["producer_name"],
        "index": bem.get("index"),
        "broker_time": bem.get("broker_timestamp"),
    }


def _theirs(e: dict) -> dict:
    return {
        "id": e["id"].split(";")[-1],  # a chunked message: Java prints first;last, the record carries the last
        "key": e["key"],
        "props": e["props"],
        "data": e["data"],
        "publish_time": e["publish_time"],
        "event_time": e["event_time"] or None,
        "seq": e["seq"],
        "producer": e["producer"],
        "index": None if e["index"] == -1 else e["index"],
        "broker_time": None if e["broker_time"] == -1 else e["broker_time"],
    }


def _sha256_tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture(params=["clean", "killed"])
def kind(request) -> str:
    return request.param


def test_every_message_equals_what_the_java_reader_received(recorded, kind):
    data = recorded / kind / "data"
    expected = [json.loads(line) for line in (recorded / kind / "reader.jsonl").read_text().splitlines()]
    by_topic = collections.defaultdict(list)
    for e in expected:
        by_topic[e["topic"]].append(_theirs(e))
    with open_data_dir(data) as dd:
        compared = 0
        for topic, want in by_topic.items():
            got = [_ours(r) for r in iter_messages(dd, topic)]
            assert got == want, topic
            compared += len(got)
        assert dd.issues == []
    assert compared == len(expected) and compared > 100
    if kind == "killed":
        burst = by_topic[NS + "burst"]
        assert len(burst) == 30  # acknowledged to the producer, then only in the journal


def _exported(r: dict) -> dict:
    """An exported row in the oracle's terms (``_theirs`` plus the topic)."""
    return {
        "id": _java_id(r),
        "key": r["key"],
        "props": dict(r["properties"]),
        "data": None if r["payload"] is None else r["payload"].hex(),
        "publish_time": r["publish_time"],
        "event_time": r["event_time"],
        "seq": r["sequence_id"],
        "producer": r["producer_name"],
        "index": r["broker_index"],
        "broker_time": r["broker_timestamp"],
        "topic": r["topic"],
    }


def test_the_export_holds_what_the_java_reader_received(recorded, kind, tmp_path):
    """A Parquet export of the untouched directory, read back by pyarrow: every message the Java Reader got,
    every field the same, and nothing else."""
    out = tmp_path / "export"
    export(str(recorded / kind / "data"), "parquet", str(out), log=lambda m: None)
    got = [_exported(r) for r in read_export("parquet", out).to_pylist()]
    want = [
        _theirs(e) | {"topic": e["topic"]}
        for e in map(json.loads, (recorded / kind / "reader.jsonl").read_text().splitlines())
    ]
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want)) and len(got) > 100


def test_nothing_else_comes_out(recorded, kind):
    """Every message topic pulsarkit lists is one the oracle read (system topics aside), same counts."""
    expected = collections.Counter(
        json.loads(x)["topic"] for x in (recorded / kind / "reader.jsonl").read_text().splitlines()
    )
    with open_data_dir(recorded / kind / "data") as dd:
        got = collections.Counter(r["topic"] for r in read_messages(dd))
        listed = {t.name for t in dd.topics(include_system=False)}
    assert got == expected
    assert NS + "to-delete" not in listed and NS + "dedup" in listed


def test_backlog_equals_what_a_reattached_consumer_received(recorded, kind):
    want = collections.defaultdict(list)
    for line in (recorded / kind / "reattach.txt").read_text().splitlines():
        topic, sub, mid = line.split()
        want[(topic, sub)].append(mid.split(";")[-1])
    subs = SUBSCRIPTIONS + ([(NS + "burst", "ind")] if kind == "killed" else [])
    with open_data_dir(recorded / kind / "data") as dd:
        for topic, sub in subs:
            names = dd.expand(topic)
            got = [_java_id(r["message_id"]) for ml in names for r in iter_backlog(dd, ml, sub)]
            if len(names) > 1:  # a partitioned consumer interleaves partitions: compare per partition
                assert sorted(got) == sorted(want[(topic, sub)]), (topic, sub)
            else:
                assert got == want[(topic, sub)], (topic, sub)


def test_transaction_states_equal_what_the_coordinator_reported(recorded, kind):
    reported = {}
    for line in (recorded / "txns.txt").read_text().splitlines():
        txn, state = line.split()
        most, least = txn.strip("()").split(",")
        reported[(int(most), int(least))] = state
    with open_data_dir(recorded / kind / "data") as dd:
        states = {k: t.state for k, t in transactions(dd).items()}
    assert {k: states.get(k) for k in reported} == reported


def test_which_entries_the_broker_stamped_with_entry_metadata(recorded, pulsar_version, kind):
    """The transaction topic's entries as written, and read the same by the Java Reader and pulsarkit
    (``test_every_message_equals_what_the_java_reader_received``): 4.0.7 gives every entry the PIP-70 broker
    entry metadata; 3.0.7's transaction buffer appends transactional messages and the commit and abort
    markers without it, and its index counts only the entries it stamped."""
    with open_data_dir(recorded / kind / "data") as dd:
        entries = {}
        for r in iter_messages(dd, NS + "txn-topic", txn="all", markers=True):
            mid = r["message_id"]
            entries[(mid["ledger_id"], mid["entry_id"])] = (r["txn"] is not None, r["broker_entry_metadata"])
    in_txn = [t for t, _ in entries.values()]
    # plain, [c1 c2], a1, commit, abort, plain, open, plain
    assert in_txn == [False, True, True, True, True, False, True, False]
    stamped = [m for _, m in entries.values() if m is not None]
    if pulsar_version.startswith("3.0."):
        assert [m is not None for _, m in entries.values()] == [not t for t in in_txn]
        assert [m["index"] for m in stamped] == [0, 1, 2]
    else:
        assert len(stamped) == len(entries)


def test_transaction_inspector_reports_what_the_broker_did(recorded, kind):
    """The inspector, broker-less, on the directory a real standalone wrote with batched transaction
    logs and pending-ack stores: every transaction in the state the broker gave it; the open one is
    the only one whose log records the coordinator has not deleted; the log entries are PIP-160 batches."""
    reported = {}
    for line in (recorded / "txns.txt").read_text().splitlines():
        txn, state = line.split()
        reported[txn] = state
    with open_data_dir(recorded / kind / "data") as dd:
        rows = {r["txn"]: r for r in transactions_table(dd).to_pylist()}
        (log,) = transaction_log_table(dd).to_pylist()
        stores = pending_ack_table(dd).to_pylist()
    assert {t: rows[t]["state"] for t in reported} == reported
    (open_txn,) = [t for t, s in reported.items() if s == "OPEN"]
    live = {t for t, r in rows.items() if r["live_log_records"]}
    assert live == {open_txn}
    assert rows[open_txn]["timeout_ms"] == 60 * 60_000  # the workload's 60-minute transaction
    start = rows[open_txn]["start_time"]
    with open_data_dir(recorded / kind / "data") as dd:
        assert not transactions_table(dd, now_ms=start + 1000).to_pylist()[-1]["timed_out"]
        assert transactions_table(dd, now_ms=start + 61 * 60_000).filter(pc.field("timed_out")).column(
            "txn"
        ).to_pylist() == [open_txn]
    assert log["entries"] == log["batched_entries"] > 0  # transactionLogBatchedWriteEnabled=true
    assert log["live_records"] == rows[open_txn]["live_log_records"]
    assert [(s["topic"], s["subscription"]) for s in stores] == [(NS + "txn-topic", "txsub")]


def _read_compacted(recorded: Path, kind: str) -> dict[str, dict]:
    """What the real readCompacted readers got, per topic: last message ids, availability, messages."""
    out: dict[str, dict] = {t: {"messages": []} for t in COMPACTED_TOPICS}
    for line in (recorded / kind / "compacted.jsonl").read_text().splitlines():
        tag, body = line.split(" ", 1)
        j = json.loads(body)
        if tag == "CMPLAST":
            out[j["topic"]].update(last=j["last"], available=j["available"])
        else:
            out[j["topic"]]["messages"].append((j["id"], j["key"], j["data"]))
    return out


def test_compacted_view_and_last_message_id_equal_what_a_read_compacted_reader_got(recorded, kind):
    """Broker-less, from the real compacted ledger and the topic's tail: the same messages in the same
    order with the same ids, and the same GetLastMessageId answer, as a real readCompacted Reader."""
    real = _read_compacted(recorded, kind)
    with open_data_dir(recorded / kind / "data") as dd:
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
    batched = real[NS + "compact-batched"]["messages"]
    assert len(batched) >= 3 and all(not mid.endswith(":-1") for mid, _, _ in batched)  # batch indexes kept


def test_the_upsert_export_at_the_horizon_equals_what_a_read_compacted_reader_got(recorded, kind, tmp_path):
    """``export --mode upsert --until <the broker's compaction horizon>``: one row per key, the same message
    id and value as the real readCompacted Reader received from the broker's compacted ledger (keyless
    messages, which 3.0.x's compactor keeps, are not keys of an upsert table)."""
    from pulsarkit.export.marks import MessageId

    real = _read_compacted(recorded, kind)
    data = recorded / kind / "data"
    for topic in COMPACTED_TOPICS:
        with open_data_dir(data) as dd:
            h = compacted_topic(dd, topic).horizon
        assert h is not None, topic
        out = tmp_path / topic.rsplit("/", 1)[1] / kind
        export(str(data), "parquet", str(out), topics=[topic], mode="upsert", log=lambda m: None,
               until={topic: MessageId(h.ledger_id, h.entry_id)})  # fmt: skip
        rows = read_export("parquet", out).to_pylist()
        ours = {r["key"]: (f"{r['ledger_id']}:{r['entry_id']}:{r['batch_index']}", r["payload"].hex()) for r in rows}
        assert len(ours) == len(rows), topic
        theirs = {}
        for mid, key, data_hex in real[topic]["messages"]:
            lid, eid, _ = (int(x) for x in mid.split(":"))
            if Position(lid, eid) <= h and key is not None:
                theirs[key] = (mid, data_hex)
        assert ours == theirs, topic


def test_the_cpp_client_shows_placeholders_of_pulsars_own_compacted_ledger(recorded, kind):
    """Pulsar's compacted ledger entries, served as they are to the real C++ client (pulsar-client)
    through the fake broker: the client returns each compacted_out placeholder as an empty, keyless
    message, where the Java reader (CompactedDump) skipped it. The C++ client's own behaviour, recorded
    here so that pulsarkit's interop tests can expect it (3.0.7's ledger also keeps keyless messages with
    their data: those the client returns as they are)."""
    pulsar = pytest.importorskip("pulsar")
    from pulsarkit.testing.fake_broker import FakeBroker

    with open_data_dir(recorded / kind / "data") as dd:
        view = compacted_topic(dd, NS + "compact-batched")
        entries = [(p, d) for p, d in view.compacted_entries()]
    java = [tuple(m[0].split(":")) for m in _read_compacted(recorded, kind)[NS + "compact-batched"]["messages"]]
    b = FakeBroker().start()
    try:
        t = b._topic(NS + "served")
        for _, d in entries:
            b._stored(t, t.persistent.ml.add_entry(d))
        c = pulsar.Client(b.service_url, operation_timeout_seconds=10)
        r = c.create_reader(NS + "served", pulsar.MessageId.earliest)
        got = []
        while r.has_message_available():
            m = r.read_next(5000)
            got.append((m.message_id().entry_id(), m.message_id().batch_index(), m.partition_key() or None, m.data()))
        c.close()
    finally:
        b.stop()
    real = [(i, int(bi)) for i, (_, _, bi) in enumerate(java)]
    placeholders = [(e, bi) for e, bi, k, v in got if k is None and v == b""]
    assert placeholders, "Pulsar's compacted batches hold compacted_out placeholders"
    assert len(got) == len(real) + len(placeholders)
    assert sorted({bi for _, bi, k, v in got if (k, v) != (None, b"")}) == sorted({bi for _, bi in real})


def test_our_compactor_keeps_the_same_key_to_message_id_map(recorded, pulsar_version, kind):
    """pulsarkit's phase one over the topic's own entries, up to the broker's horizon, retains exactly the
    messages the broker's compactor put in its compacted ledger; phase two rewrites them to the same ids.
    3.0.x's compactor also keeps every keyless message (``topicCompactionRetainNullKey`` defaults to true
    there), which pulsarkit's phase two does with ``retain_null_key``."""
    retain = _retains_keyless(pulsar_version)
    with open_data_dir(recorded / kind / "data") as dd:
        for topic in COMPACTED_TOPICS:
            view = compacted_topic(dd, topic)
            kept = [m for m in compacted_messages(dd, topic) if m["from_compacted_ledger"]]
            theirs = {m["key"]: (m["ledger_id"], m["entry_id"], m["batch_index"]) for m in kept if m["key"] is not None}
            latest = phase_one(dd, topic, up_to=view.horizon)
            ours = {r["key"]: (r["ledger_id"], r["entry_id"], r["batch_index"]) for r in latest.retained().to_pylist()}
            assert ours == theirs, topic
            keyless = [m for m in kept if m["key"] is None]
            assert len(keyless) == (latest.keyless if retain else 0), topic
            if topic == NS + "compact-batched":
                assert latest.keyless == 2  # the workload's keyless messages
            t = dd.topic(topic)
            entries = [(p, d) for p, d in dd.ml_entries(t.managed_ledger) if p <= view.horizon]
            out = latest.compact_entries(
                pa.array([d for _, d in entries], pa.binary()),
                pa.array([p.ledger_id for p, _ in entries], pa.int64()),
                pa.array([p.entry_id for p, _ in entries], pa.int64()),
                retain_null_key=retain,
            )
            assert [Position(r["ledger_id"], r["entry_id"]) for r in out.to_pylist()] == [
                p for p, _ in view.compacted_entries()
            ], topic


def test_orphans_and_disk_usage_of_the_real_directory(recorded, kind):
    """On the real directory: every ledger the bookie holds without metadata is found (the deleted topic's
    and trimmed ledgers), nothing a topic, cursor, schema locator or compaction still uses is called an
    orphan, and the per-ledger attribution adds up to BookKeeper's own remaining size of each log."""
    with open_data_dir(recorded / kind / "data") as dd:
        found = {f.ledger_id: f for f in find_orphans(dd)}
        used = {led.ledger_id for led in dd.ledgers.values() if led.referenced}
        assert not used & set(found)
        on_disk_only = {lid for lid, led in dd.ledgers.items() if led.state == "DELETED" and led.entries_on_bookie}
        assert {lid for lid, f in found.items() if f.category == "on_disk_only"} == on_disk_only
        assert {f.category for f in found.values()} <= {"on_disk_only", "schema_unreferenced"}
        rows = list(disk_usage_rows(dd))
        for _, log_id, md in dd.entry_logs():
            assert sum(r["bytes"] for r in rows if r["log_id"] == log_id) == md.remaining_size
        # fsck: every record's digest verifies and the index names exactly the records there; what is left
        # is expected state (the active log without a map, the empty preallocated log, journal-only entries)
        assert [f for f in fsck(dd) if f["severity"] != "info"] == []


def test_pulsarkit_gc_on_a_copy_then_real_pulsar_reads_every_live_message(recorded, pulsar_version, tmp_path):
    """The strongest check of bookie GC: on a copy of the real standalone's directory, pulsarkit's GC
    (Pulsar's own metadata store as the ledger manager, read-only) compacts the entry log holding the
    deleted topic's and trimmed ledgers; then the same real Pulsar release is started on that directory and a
    Reader gets every message it got before, with no BookKeeper error in the log."""
    lib = _lib(pulsar_version)
    work = tmp_path / "gc"
    work.mkdir()
    _copy(recorded / "clean" / "data", work / "data", drop_ephemeral=True)
    bk = work / "data" / "bookkeeper"
    storage = SingleDirectoryDbLedgerStorage(str(bk), read_only=False)
    metadata = MetadataStore(work / "data" / "metadata", read_only=True)
    try:
        before = sum(p.stat().st_size for p in (bk / "current").glob("*.log"))
        gc = GarbageCollector(
            storage, metadata, GcConfig(major_compaction_threshold=0.99, compaction_rate_by_entries=0)
        )
        plan = gc.plan(GcRequest(force=True))
        assert plan.compaction.logs, plan
        res = gc.execute(plan)
        assert res.compacted_logs and res.reclaimed_bytes > 0 and not res.skipped
    finally:
        storage.close()
        metadata.close()
    after = sum(p.stat().st_size for p in (bk / "current").glob("*.log"))
    assert after < before
    s = Standalone(lib, work, pulsar_version)
    try:
        dump = s.java("Dump", s.url, *USER_TOPICS)
    finally:
        s.stop()
    got = [json.loads(line[4:]) for line in dump.splitlines() if line.startswith("REC ")]
    want = [json.loads(line) for line in (recorded / "clean" / "reader.jsonl").read_text().splitlines()]
    key = lambda r: (r["topic"], r["id"], r["data"], r["key"])  # noqa: E731
    assert [key(r) for r in got] == [key(r) for r in want if r["topic"] in USER_TOPICS]
    log = (work / "standalone.log").read_text(errors="replace")
    # A client that connects before the bookie's registration reaches its cache logs an unresolved
    # bookie id (seen once on a loaded 2-core machine); that is a start-up race, not the data.
    bk_errors = [
        line
        for line in log.splitlines()
        if " ERROR " in line and "org.apache.bookkeeper" in line and "BookieIdNotResolvedException" not in line
    ]
    assert bk_errors == [], bk_errors[:5]


def assert_read_only(data: Path, tmp_path: Path, opener=open_data_dir) -> None:
    """Reading every entry of ``data`` (``opener`` opens a directory of that shape) changes no byte, and a
    copy nobody may write reads the same."""
    before = _sha256_tree(data)
    with opener(data) as dd:
        list(read_messages(dd, txn="all", markers=True, include_system=True))
    assert _sha256_tree(data) == before
    ro = tmp_path / "ro"
    shutil.copytree(data, ro)
    subprocess.run(["chmod", "-R", "a-w", str(ro)], check=True)
    try:
        with opener(ro) as dd:
            n = len(list(read_messages(dd)))
        assert n > 100 and _sha256_tree(ro) == before
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(ro)], check=True)


def test_not_one_byte_written_also_read_only(recorded, kind, tmp_path):
    assert_read_only(recorded / kind / "data", tmp_path)


def test_damaged_real_directories_name_file_and_offset(recorded, tmp_path):
    good_dir = recorded / "killed" / "data"
    with open_data_dir(good_dir) as dd:
        good = list(read_messages(dd))
    # a truncated entry log
    d1 = tmp_path / "trunc"
    shutil.copytree(good_dir, d1)
    log = max((d1 / "bookkeeper" / "current").glob("*.log"), key=lambda p: p.stat().st_size)
    size = log.stat().st_size
    with open(log, "r+b") as f:
        f.truncate(size * 2 // 3)
    with open_data_dir(d1) as dd:
        got = list(read_messages(dd))
        bad = [i for i in dd.issues if i.kind == "unreadable_entry"]
    assert 0 < len(got) < len(good) and all(r in good for r in got)
    assert bad and all(i.path == str(log) and 0 < i.offset < size for i in bad)
    # a missing locations/ index: rebuilt by scanning, nothing lost
    d2 = tmp_path / "noloc"
    shutil.copytree(good_dir, d2)
    shutil.rmtree(d2 / "bookkeeper" / "current" / "locations")
    with open_data_dir(d2) as dd:
        assert list(read_messages(dd)) == good
        assert [i.kind for i in dd.issues] == ["missing_index"]
    # a torn journal tail: the last record cut in half
    d3 = tmp_path / "torn"
    shutil.copytree(good_dir, d3)
    journal = max((d3 / "bookkeeper" / "current").glob("*.txn"), key=lambda p: int(p.stem, 16))
    raw = journal.read_bytes()
    end = len(raw.rstrip(b"\0"))
    journal.write_bytes(raw[: end - 20])
    with open_data_dir(d3) as dd:
        got = list(read_messages(dd))
        torn = [i for i in dd.issues if i.kind == "torn_journal_tail"]
    # the cut record is lost (it may be a message or a cursor update), everything before it is still read
    assert len(good) - 1 <= len(got) <= len(good) and all(r in good for r in got)
    assert torn and torn[0].path == str(journal) and torn[0].offset < end


@pytest.fixture(scope="module")
def bookkeeper_shell(recorded, pulsar_version):
    """BookKeeper's own readlog/readjournal logic (ReadOnlyDefaultEntryLogger.scanEntryLog,
    Journal.scanJournal), run against the very jars the standalone bundles (4.0.7: bookkeeper-server 4.17.2,
    3.0.7: 4.16.6)."""
    repo_tests = Path(__file__).resolve().parents[2]
    lib = CACHE / f"lib-{pulsar_version}"
    with JavaOracle(
        repo_tests / "java" / "bookkeeper-oracle", "org.apache.bookkeeper.bookie.Oracle", classpath=[str(lib / "*")]
    ) as o:
        info = o.call("info")
        assert str(lib) in info["jar"] and "bookkeeper-server-" in info["jar"], info  # the standalone's own
        yield o


def test_bookkeeper_readlog_and_readjournal_agree_with_pulsarkit_on_every_entry(recorded, kind, bookkeeper_shell):
    """Every record of every entry log and every journal of the real directory, as BookKeeper's own
    scanners see it and as pulsarkit's readers see it: the same offsets, ledger and entry ids, bytes."""
    ledger_dir = recorded / kind / "data" / "bookkeeper"
    current = ledger_dir / "current"
    log_ids = EntryLogReader(current).log_ids()
    java = bookkeeper_shell.call("defaultScanAll", dir=str(ledger_dir), logIds=log_ids)
    reader = EntryLogReader(current)
    entries = 0
    for log_id in log_ids:
        scan = reader.scan(log_id)
        ours = [
            (r.ledger_id, r.offset, r.entry_id, hashlib.sha256(r.data).hexdigest()) for r in scan if r.ledger_id >= 0
        ]
        theirs = [(j["ledger"], j["offset"], j["entry"], j["sha256"]) for j in java[str(log_id)]]
        assert ours == theirs, f"entry log {log_id:x}.log"
        entries += len(ours)
    journals = sorted(current.glob("*.txn"), key=lambda p: int(p.stem, 16))
    records = 0
    for j in journals:
        theirs = bookkeeper_shell.call("journalScan", dir=str(current), journalId=int(j.stem, 16))["records"]
        scan = scan_journal(j)
        ours = [(r.ledger_id, r.entry_id, len(r.data), hashlib.sha256(r.data).hexdigest()) for r in scan.records]
        assert ours == [(t["ledger"], t["entry"], t["size"], t["sha256"]) for t in theirs], j.name
        # both report each record at the offset of its length field
        assert [r.offset for r in scan.records] == [t["offset"] for t in theirs], j.name
        assert {t["version"] for t in theirs} == {scan.version}
        table = journal_table([j])  # the Arrow scan: the same records, nothing else
        assert table.column("record").to_pylist() == [r.data for r in scan.records]
        assert table.num_rows == len(theirs)
        records += len(ours)
    assert entries > 100 and records > 10, (entries, records)


def _plant_orphans(metadata: Path, drop_ml: list[str], drop_ledgers: list[int], drop_cursors: list[str]) -> None:
    """Leaves orphans in a *copy* of a metadata store the way failed deletes do: a topic's managed-ledger
    and cursor nodes removed but its ledgers' metadata kept (Pulsar #13238), ledgers whose metadata is
    gone while their entries stay on the bookie, and a subscription removed without its cursor ledger."""
    db = rocksdict.Rdict(str(metadata), rocksdict.Options(raw_mode=True))
    try:
        keys = [bytes(k) for k in db.keys()]
        doomed = {f"/managed-ledgers/{c}".encode() for c in drop_cursors}
        for ml in drop_ml:
            node = f"/managed-ledgers/{ml}".encode()
            doomed |= {k for k in keys if k == node or k.startswith(node + b"/")}
        doomed |= {ledger_path(lid).encode() for lid in drop_ledgers}
        assert doomed <= set(keys), sorted(doomed - set(keys))
        for k in doomed:
            del db[k]
    finally:
        db.close()
    (metadata / "rocksdict-config.json").unlink(missing_ok=True)


def test_orphans_made_on_purpose_are_found_cleaned_and_pulsar_still_reads_everything(
    recorded, pulsar_version, tmp_path
):
    """On a copy of the SIGKILLed standalone: the harness leaves a deleted topic's ledgers with their
    metadata (owner gone), another topic's ledgers on disk without metadata, and a removed subscription's
    cursor ledger. pulsarkit finds exactly those and nothing live; the cleanup plan, executed with a
    backup, deletes exactly the metadata it should; pulsarkit's GC then drops them from the bookie; and
    the same real Pulsar release restarted on the result gives every remaining topic's messages as before."""
    lib = _lib(pulsar_version)
    work = tmp_path / "orphans"
    work.mkdir()
    _copy(recorded / "killed" / "data", work / "data", drop_ephemeral=True)
    data = work / "data"
    ml = lambda t: "public/default/persistent/" + t  # noqa: E731
    with open_data_dir(data) as dd:
        baseline = {f.ledger_id: f.category for f in find_orphans(dd)}
        owner_gone = dd.ml_ledgers(ml("codec-snappy"))
        on_disk_only = dd.ml_ledgers(ml("dedup"))
        cursor_ledger = dd.cursor_infos[ml("burst")]["ind"].cursorsLedgerId
    assert owner_gone and on_disk_only and cursor_ledger >= 0
    planted = {lid: "owner_gone" for lid in owner_gone} | {lid: "on_disk_only" for lid in on_disk_only}
    planted[cursor_ledger] = "deleted_subscription"
    _plant_orphans(data / "metadata", [ml("codec-snappy"), ml("dedup")], on_disk_only, [ml("burst") + "/ind"])
    with open_data_dir(data) as dd:
        found = {f.ledger_id: f.category for f in find_orphans(dd)}
        live = {lid for lid, led in dd.ledgers.items() if led.referenced}
        plan = cleanup_plan(dd)
        # what the bookie's ledger storage holds; entries only in the journal come back at its replay
        indexed = {lid for lid in planted if dd.ledgers[lid].entries_on_bookie > dd.ledgers[lid].journal_only_entries}
    assert {lid: c for lid, c in found.items() if baseline.get(lid) != c} == planted
    assert not live & set(found)
    # the dry run is the plan alone, and the plan file reads back as the same plan
    assert sorted(i.ledger_id for i in plan.to_delete) == sorted([*owner_gone, cursor_ledger])
    assert OrphanCleanupPlan.from_json(plan.to_json()) == plan
    res = execute_cleanup(plan, backup_dir=work / "backup")
    assert sorted(res.deleted) == sorted([*owner_gone, cursor_ledger]) == sorted(res.backed_up)
    storage = SingleDirectoryDbLedgerStorage(str(data / "bookkeeper"), read_only=False)
    metadata = MetadataStore(data / "metadata", read_only=True)
    try:
        config = GcConfig(major_compaction_threshold=0.99, compaction_rate_by_entries=0)
        gc = GarbageCollector(storage, metadata, config)
        gres = gc.execute(gc.plan(GcRequest(force=True)))
        assert indexed and indexed <= set(gres.deleted_ledgers)
    finally:
        storage.close()
        metadata.close()
    topics = [t for t in USER_TOPICS if not t.endswith(("/codec-snappy", "/dedup"))] + [NS + "burst"]
    s = Standalone(lib, work, pulsar_version)
    try:
        dump = s.java("Dump", s.url, *topics)
    finally:
        s.stop()
    got = [json.loads(line[4:]) for line in dump.splitlines() if line.startswith("REC ")]
    want = [json.loads(line) for line in (recorded / "killed" / "reader.jsonl").read_text().splitlines()]
    key = lambda r: (r["topic"], r["id"], r["data"], r["key"])  # noqa: E731
    assert [key(r) for r in got] == [key(r) for r in want if r["topic"] in topics]
    log = (work / "standalone.log").read_text(errors="replace")
    assert [line for line in log.splitlines() if " ERROR " in line and "org.apache.bookkeeper" in line] == []
