"""A Spark standalone cluster on this machine, for tests that need more than ``local[n]``: one master
and N workers, each its own process (``spark-class``, from the pyspark installation), bound to
127.0.0.1 on ephemeral ports, with their logs and work directories in one temporary directory::

    from pulsarkit.testing.spark_cluster import StandaloneCluster

    with StandaloneCluster(workers=2) as cluster:      # returns once both workers are registered
        env = cluster.driver_env()                     # SPARK_CONF_DIR, PYSPARK_PYTHON, SPARK_LOCAL_IP
        subprocess.Popen(["pulsarkit", "export", data, "--to", "parquet", out,
                          "--engine", "spark", "--master", cluster.master_url], env=env)
        cluster.kill_worker(1)                         # SIGKILL: the worker, its executors, their Python
    # everything stopped (process groups), even on an exception

A driver in this process can use ``SparkSession.builder.master(cluster.master_url)`` with
:meth:`StandaloneCluster.driver_conf` set on the builder and ``PYSPARK_PYTHON`` in ``os.environ``
(executors start the Python the driver names there); a driver in another process gets the same
settings from :meth:`StandaloneCluster.driver_env` (a ``spark-defaults.conf``, which
``spark-submit`` and PySpark read), so the program runs unchanged.

Each daemon is started in its own session, so :meth:`StandaloneCluster.kill_worker` and
:meth:`StandaloneCluster.stop` reach the JVM and everything it started (the executors a worker
launched and their Python workers): killing a worker is losing a machine. The master's REST
submission server (a fixed port) is off; the web UIs are on, on 127.0.0.1, and the master's
``/json/`` is what :meth:`StandaloneCluster.state` reads.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

#: What the daemons read (``--properties-file``): no REST submission server (it wants port 6066).
DAEMON_CONF = {"spark.master.rest.enabled": "false"}

_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_UI = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")
_WORKER_PORT = re.compile(r"Starting Spark worker \S+?:(\d+) with")


class ClusterError(RuntimeError):
    """The cluster did not start (the message ends with the daemons' logs)."""


def pyspark_home() -> Path:
    """The Spark installation inside the pyspark package (``bin/spark-class``, ``jars/``)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ClusterError("pyspark is not installed: pip install 'pulsarkit[spark]'")
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-class").exists():
        raise ClusterError(f"{home} has no bin/spark-class: not a pip-installed pyspark")
    return home


def _write_conf(path: Path, conf: dict[str, str]) -> Path:
    path.write_text("".join(f"{k} {v}\n" for k, v in sorted(conf.items())))
    return path


@dataclass
class Daemon:
    """One process of the cluster: the master or a worker."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    #: a worker's RPC port (from its log) and its id and web UI in the master's ``/json/``
    port: int | None = None
    worker_id: str | None = None
    webui: str | None = None
    killed: bool = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers on 127.0.0.1 (see the module doc).

    ``cores`` and ``memory`` are what each worker offers; ``daemon_memory`` is each daemon's own heap
    (``SPARK_DAEMON_MEMORY``); ``executor_memory`` goes into :meth:`driver_conf`. ``directory`` holds
    the logs (``master.log``, ``worker-1.log``, ...), the workers' work directories (executor logs
    under ``work-N/<app>/<executor>/``), the scratch space and the driver's ``conf/``; by default a
    new temporary directory, removed by :meth:`stop` unless ``keep``."""

    def __init__(
        self,
        workers: int = 2,
        *,
        cores: int = 1,
        memory: str = "1g",
        daemon_memory: str = "512m",
        executor_memory: str = "512m",
        directory: str | os.PathLike[str] | None = None,
        keep: bool = False,
        spark_home: str | os.PathLike[str] | None = None,
        python: str = sys.executable,
        timeout: float = 120.0,
    ) -> None:
        self.n_workers = workers
        self.cores, self.memory, self.daemon_memory = cores, memory, daemon_memory
        self.executor_memory = executor_memory
        self.spark_home = Path(spark_home) if spark_home is not None else pyspark_home()
        self.python = python
        self.timeout = timeout
        self._own_dir = directory is None
        self.keep = keep
        self.directory = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="pulsarkit-spark-"))
        self.master: Daemon | None = None
        self.workers: list[Daemon] = []
        self.master_url = ""
        self.webui_url = ""

    # ------------------------------------------------------------------------------ lifecycle

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(self.spark_home),
            SPARK_LOCAL_IP="127.0.0.1",  # RPC, block managers and the web UIs: loopback only
            SPARK_CONF_DIR=str(self.directory / "daemon-conf"),
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            SPARK_LOCAL_DIRS=str(self.directory / "scratch"),
            PYSPARK_PYTHON=self.python,
        )
        env.pop("SPARK_MASTER_OPTS", None)
        env.pop("SPARK_WORKER_OPTS", None)
        return env

    def _spawn(self, name: str, args: list[str]) -> Daemon:
        log = self.directory / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [str(self.spark_home / "bin" / "spark-class"), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                cwd=self.directory,
                start_new_session=True,  # its own process group: the JVM and all it starts
            )
        return Daemon(name, proc, log)

    def start(self) -> StandaloneCluster:
        """Starts the master, then the workers; returns once every worker is registered."""
        try:
            for d in ("daemon-conf", "scratch"):
                (self.directory / d).mkdir(parents=True, exist_ok=True)
            props = _write_conf(self.directory / "daemon-conf" / "spark-defaults.conf", DAEMON_CONF)
            loopback = ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--properties-file", str(props)]
            self.master = self._spawn("master", [MASTER_CLASS, *loopback])
            deadline = time.monotonic() + self.timeout
            url, ui = self._wait_log(self.master, (_MASTER_URL, _MASTER_UI), deadline)
            self.master_url, self.webui_url = url, f"http://127.0.0.1:{ui}"
            for i in range(1, self.n_workers + 1):
                work = self.directory / f"work-{i}"
                work.mkdir(exist_ok=True)
                self.workers.append(
                    self._spawn(
                        f"worker-{i}",
                        [
                            WORKER_CLASS,
                            self.master_url,
                            *loopback,
                            *("--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work)),
                        ],
                    )
                )
            for w in self.workers:
                (port,) = self._wait_log(w, (_WORKER_PORT,), deadline)
                w.port = int(port)
            self.wait_for_workers(self.n_workers, deadline - time.monotonic())
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_log(self, d: Daemon, patterns: tuple[re.Pattern[str], ...], deadline: float) -> list[str]:
        while True:
            text = d.log.read_text(errors="replace") if d.log.exists() else ""
            found = [p.search(text) for p in patterns]
            if all(found):
                return [m.group(1) for m in found if m is not None]
            if not d.alive():
                raise ClusterError(f"{d.name} exited with {d.proc.returncode}\n{self.logs()}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{d.name} did not start in {self.timeout} s\n{self.logs()}")
            time.sleep(0.1)

    def state(self) -> dict[str, Any]:
        """The master's ``/json/``: workers (``state``, ``coresused``...), ``activeapps``, ..."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=10) as r:
            doc: dict[str, Any] = json.loads(r.read())
        return doc

    def wait_for_workers(self, n: int, timeout: float) -> list[dict[str, Any]]:
        """Waits until ``n`` workers are ALIVE in the master's view; names each started worker."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            try:
                alive = [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]
            except OSError:
                alive = []
            by_port = {w.get("port"): w for w in alive}
            for d in self.workers:
                if d.port in by_port:
                    d.worker_id, d.webui = by_port[d.port]["id"], by_port[d.port]["webuiaddress"]
            if len(alive) >= n:
                return alive
            dead = [d for d in [self.master, *self.workers] if d is not None and not d.killed and not d.alive()]
            if dead:
                raise ClusterError(f"{dead[0].name} exited with {dead[0].proc.returncode}\n{self.logs()}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{len(alive)} of {n} workers registered\n{self.logs()}")
            time.sleep(0.2)

    def kill_worker(self, index: int, sig: int = signal.SIGKILL) -> Daemon:
        """Sends ``sig`` to worker ``index``'s process group (1-based: ``worker-1`` is 1): the worker
        JVM, the executors it launched and their Python workers. Returns the worker."""
        w = self.workers[index - 1]
        w.killed = True
        _signal_group(w.proc, sig)
        return w

    def stop(self) -> None:
        """Stops every daemon and what it started (SIGTERM, then SIGKILL after 5 s); removes the
        directory if this object made it (and not ``keep``)."""
        daemons = [d for d in [*self.workers, self.master] if d is not None]
        for d in daemons:
            _signal_group(d.proc, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for d in daemons:
            try:
                d.proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
        for d in daemons:  # the executors and Python workers may outlive their daemon
            _signal_group(d.proc, signal.SIGKILL)
            try:
                d.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self._own_dir and not self.keep:
            shutil.rmtree(self.directory, ignore_errors=True)

    # ------------------------------------------------------------------------------ drivers

    def driver_conf(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """Settings a driver on this machine needs for this cluster: a loopback driver, executors
        that fit the workers, and the Python of this process on the executors (``extra`` wins)."""
        return {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.memory": "512m",
            "spark.executor.memory": self.executor_memory,
            "spark.ui.enabled": "false",
            "spark.pyspark.python": self.python,
            # start a job only once every worker has its executor
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
            **(extra or {}),
        }

    def driver_env(self, conf: dict[str, str] | None = None, env: dict[str, str] | None = None) -> dict[str, str]:
        """The environment for a driver process: ``SPARK_CONF_DIR`` with a ``spark-defaults.conf``
        of :meth:`driver_conf` (plus ``conf``), ``PYSPARK_PYTHON``, ``SPARK_LOCAL_IP``."""
        d = self.directory / "conf"
        d.mkdir(parents=True, exist_ok=True)
        _write_conf(d / "spark-defaults.conf", self.driver_conf(conf))
        out = dict(os.environ if env is None else env)
        out.update(
            SPARK_CONF_DIR=str(d),
            SPARK_LOCAL_IP="127.0.0.1",
            PYSPARK_PYTHON=self.python,
            PYSPARK_DRIVER_PYTHON=self.python,
        )
        out.pop("SPARK_HOME", None)  # the pyspark package's own
        return out

    def logs(self, lines: int = 30) -> str:
        """The last ``lines`` of every daemon's log."""
        return "\n".join(
            f"--- {d.name} ({d.log}):\n{d.log_tail(lines)}" for d in [self.master, *self.workers] if d is not None
        )


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # start_new_session: the group id is the daemon's pid
    except (ProcessLookupError, PermissionError):
        pass


__all__ = ["DAEMON_CONF", "ClusterError", "Daemon", "StandaloneCluster", "pyspark_home"]
