"""Ctrl-C (issue 21 item 6): exit 130 with one line on stderr, no traceback, and nothing the command
started left running: SIGINT to the pulsarkit process alone used to leave Spark's JVM behind for good."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pulsarkit as pk
import pytest
from pulsarkit.cli.command import _descendants

pytest.importorskip("pyspark")


def _data(root: Path) -> Path:
    with pk.Store.open(root) as store:
        ml = store.managed_ledger("public/default/persistent/t")
        for i in range(50):
            ml.add_entry(pk.encode_entry(pk.message_metadata("p", i, 1_700_000_000_000 + i), b"v%d" % i))
    return root


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.spark
def test_sigint_to_the_process_alone_stops_its_spark_jvm(tmp_path: Path) -> None:
    data = _data(tmp_path / "data")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pulsarkit", "export", str(data), "--to", "parquet", str(tmp_path / "out")]
        + ["--engine", "spark"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group: the signal reaches the process alone, as with kill -INT
    )
    deadline = time.monotonic() + 240
    jvms: list[int] = []
    while not jvms and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
        jvms = [p for p in _descendants(proc.pid) if "java" in _cmdline(p)]
    assert jvms, f"no Spark JVM started (rc {proc.poll()})"
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "pulsarkit export: interrupted"
    deadline = time.monotonic() + 15
    while any(Path(f"/proc/{p}").exists() for p in jvms) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in jvms if Path(f"/proc/{p}").exists() and "java" in _cmdline(p)]


def test_descendants_lists_children_and_grandchildren() -> None:
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        found: list[int] = []
        while not (child.pid in found and _descendants(child.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
            found = _descendants(os.getpid())
        assert child.pid in found and _descendants(child.pid)
    finally:
        for p in [*_descendants(child.pid), child.pid]:  # only what this test started (a session's JVM lives on)
            os.kill(p, signal.SIGKILL)
        child.wait()
