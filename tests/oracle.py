"""Long-lived Java oracle processes for the interop tests.

A harness is a Maven project under ``tests/java/<name>/`` whose main class reads one JSON request per line on
stdin and writes one JSON response per line on stdout::

    request   {"id": 7, "op": "crc32c", ...args}
    response  {"id": 7, "ok": true, "result": ...}
              {"id": 7, "ok": false, "error": "<exception class>", "message": "..."}

and exits on ``{"op": "stop"}`` or end of input. Logging must stay off stdout (use slf4j-nop or log to
stderr). The project's pom must build into ``<repo>/target/java/<name>`` (``<build><directory>``) and copy
its runtime dependencies into ``${project.build.directory}/lib`` during ``package``; the JVM then runs with
``-cp <build>/classes:<build>/lib/*``.

Use from a test module::

    from oracle import JavaOracle, PulsarOracle

    @pytest.fixture(scope="session")
    def pulsar_oracle():
        with PulsarOracle() as o:          # builds once (offline first), starts one JVM
            yield o

    pulsar_oracle.call("crc32c", parts=[b"data"])      # bytes arguments are sent as hex

    # another harness: same class, other project and main class
    JavaOracle(TESTS / "java" / "bookkeeper-oracle", "org.apache.bookkeeper.bookie.Oracle")

Building happens once per checkout and source state (a stamp over pom.xml and src/ records the last good
build), under a file lock so concurrent sessions do not race. Maven runs offline (``-o``) when the local
repository already has everything, else online. A missing ``mvn``/``java``, or a build that fails, fails
the test in CI and skips it elsewhere (``require_tool`` policy in ``conftest.py``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import queue
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import pytest
from conftest import IN_CI, require_tool

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

#: Netty reflection flags as BookKeeper's and Pulsar's scripts set them, plus a small, quick-starting JVM.
DEFAULT_JVM_ARGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xmx512m",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
)


class OracleError(RuntimeError):
    """The oracle process could not be built, started or talked to."""


class JavaError(Exception):
    """The Java side threw while handling a request; ``java_class`` is the exception's class name."""

    def __init__(self, java_class: str, message: str) -> None:
        super().__init__(f"{java_class}: {message}")
        self.java_class = java_class
        self.java_message = message


def _hexify(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, dict):
        return {k: _hexify(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_hexify(x) for x in v]
    return v


def _skip_or_fail(msg: str) -> None:
    if IN_CI:
        pytest.fail(msg)
    pytest.skip(msg)


class JavaOracle:
    """One JVM running ``main_class`` from the Maven project in ``project_dir``; see the module docstring."""

    def __init__(
        self,
        project_dir: Path | str,
        main_class: str,
        build_dir: Path | str | None = None,
        jvm_args: Sequence[str] = DEFAULT_JVM_ARGS,
        call_timeout: float = 120.0,
        build_timeout: float = 1800.0,
        classpath: Sequence[str] | None = None,
    ) -> None:
        self.project_dir = Path(project_dir).resolve()
        self.main_class = main_class
        self.build_dir = Path(build_dir) if build_dir else REPO / "target" / "java" / self.project_dir.name
        self.jvm_args = list(jvm_args)
        self.call_timeout = call_timeout
        self.build_timeout = build_timeout
        #: Run against these jars instead of the harness's own dependencies (e.g. the exact jars a
        #: Pulsar release bundles); the harness's classes always come first.
        self.classpath = list(classpath) if classpath else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._responses: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: Any = None
        self._lock = threading.Lock()
        self._next_id = 0

    # --- build -----------------------------------------------------------------------------------------------

    def _source_digest(self) -> str:
        h = hashlib.sha256()
        files = [self.project_dir / "pom.xml", *sorted((self.project_dir / "src").rglob("*"))]
        for f in files:
            if f.is_file():
                h.update(str(f.relative_to(self.project_dir)).encode() + b"\0" + f.read_bytes() + b"\0")
        return h.hexdigest()

    def build(self) -> None:
        """Builds the harness unless the last good build is of the same sources."""
        mvn = require_tool("mvn", f"builds the Java oracle in {self.project_dir.name}")
        require_tool("java", f"runs the Java oracle in {self.project_dir.name}")
        self.build_dir.parent.mkdir(parents=True, exist_ok=True)
        stamp = self.build_dir / ".oracle-build-stamp"
        digest = self._source_digest()
        with open(self.build_dir.parent / f".{self.build_dir.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if stamp.exists() and stamp.read_text() == digest and (self.build_dir / "lib").is_dir():
                return
            base = [mvn, "-q", "-B", "-f", str(self.project_dir / "pom.xml"), "package", "-DskipTests"]
            out = ""
            # Offline first: no network at all when the local repository is already warm.
            for cmd in (base[:3] + ["-o"] + base[3:], base):
                try:
                    r = subprocess.run(
                        cmd,
                        check=False,
                        capture_output=True,
                        text=True,
                        timeout=self.build_timeout,
                        cwd=self.project_dir,
                    )
                except subprocess.TimeoutExpired:
                    _skip_or_fail(f"Maven build of {self.project_dir.name} timed out after {self.build_timeout:.0f}s")
                if r.returncode == 0:
                    stamp.write_text(digest)
                    return
                out = (r.stdout + r.stderr)[-4000:]
            _skip_or_fail(
                f"Maven could not build {self.project_dir.name} (needs Maven Central or a warm ~/.m2):\n{out}"
            )

    # --- process ---------------------------------------------------------------------------------------------

    def start(self) -> Self:
        """Builds if needed and starts the JVM; returns self."""
        if self._proc is not None:
            return self
        self.build()
        java = require_tool("java", f"runs the Java oracle in {self.project_dir.name}")
        deps = self.classpath or [str(self.build_dir / "lib" / "*")]
        cp = os.pathsep.join([str(self.build_dir / "classes"), *deps])
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the JVM; closed in stop()
        self._proc = subprocess.Popen(
            [java, *self.jvm_args, "-cp", cp, self.main_class],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=self.build_dir,
        )
        threading.Thread(target=self._read, args=(self._proc.stdout,), daemon=True).start()
        return self

    def _read(self, stream: Any) -> None:
        for line in stream:
            self._responses.put(line)
        self._responses.put(None)  # end of output: the process is gone

    def stderr_tail(self, n: int = 4000) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-n:]

    def call(self, op: str, **args: Any) -> Any:
        """Sends one request and returns its ``result``; raises :class:`JavaError` if Java threw."""
        if self._proc is None:
            raise OracleError("oracle not started")
        with self._lock:
            self._next_id += 1
            rid = self._next_id
            line = json.dumps({"id": rid, "op": op, **_hexify(args)}) + "\n"
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(line.encode())
                self._proc.stdin.flush()
            except BrokenPipeError as e:
                raise OracleError(f"oracle exited; stderr:\n{self.stderr_tail()}") from e
            try:
                raw = self._responses.get(timeout=self.call_timeout)
            except queue.Empty:
                raise OracleError(
                    f"no answer to {op!r} within {self.call_timeout:.0f}s; stderr:\n{self.stderr_tail()}"
                ) from None
            if raw is None:
                self._responses.put(None)
                raise OracleError(f"oracle exited while handling {op!r}; stderr:\n{self.stderr_tail()}")
        resp = json.loads(raw)
        if resp.get("id") != rid:
            raise OracleError(f"answer id {resp.get('id')} does not match request {rid}")
        if not resp["ok"]:
            raise JavaError(resp.get("error", "?"), resp.get("message", ""))
        return resp.get("result")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.write(b'{"op": "stop"}\n')
            proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class PulsarOracle(JavaOracle):
    """pulsar-common's Commands, codecs and CRC32C (``tests/java/pulsar-oracle``).

    Operations (bytes as hex; metadata as ``{proto field name: value}``, properties as [[k, v], ...]):
    ``info``, ``crc32c(parts)``, ``serializeMetadataAndPayload(metadata, payload, checksum)``,
    ``encodeBatch(metadata, messages, compression, checksum, always_uncompressed_size)``,
    ``decodeEntry(data, metadata_only)``,
    ``compress(codec, data)``, ``decompress(codec, data, size)``,
    ``addBrokerEntryMetadata(data, broker_timestamp, index, num_messages)``,
    ``appendIndex(entries, num_messages, broker_timestamp)``, ``peekBrokerEntryMetadata(data)``,
    ``newSend(producer_id, sequence_id, highest_sequence_id, num_messages, txnid_*, checksum, metadata, payload)``.
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(TESTS / "java" / "pulsar-oracle", "io.pulsarkit.oracle.PulsarOracle", **kw)
