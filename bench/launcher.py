"""Fresh ``python`` processes for the benchmarks' per-path figures: wall, CPU (user + system) and peak resident
MiB of each, from ``wait4``, the children forked by a small launcher process rather than by the benchmark.

Why a launcher: Linux starts a forked child's peak-RSS mark at its parent's resident size and keeps it across
``exec``, so a child forked by a benchmark that imported pyarrow, pulsarkit or the Java harness reports at least
that benchmark's size as its own peak (bench/RESULTS.md, issue 24's third measurement: every figure was an upper
bound). The launcher is a fresh ``python -S`` (about 10 MiB) that reads one command a line, forks and execs it,
and answers with the child's rusage; ``ru_maxrss`` of ``wait4`` is the maximum over the child and the
descendants it waited for (a Spark job's JVM included), not their sum.

    from launcher import run
    wall_s, cpu_s, peak_mib = run(pythonpath, ["-m", "pulsarkit", ...], data, out)
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

LAUNCHER = r"""
import json, os, sys, time
for line in sys.stdin:
    argv, env, err = json.loads(line)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_RDWR), 0)
        os.dup2(os.open(os.devnull, os.O_RDWR), 1)
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        os.execve(argv[0], argv, env)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    print(json.dumps([wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)]))
    sys.stdout.flush()
"""


class Launcher:
    """One launcher process (see the module doc); :meth:`run` one command at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-c", LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def run(
        self, pythonpath: str, argv: list[str], data: Path, out: Path, env: dict[str, str] | None = None
    ) -> tuple[float, float, float]:
        """``python ARGV`` (``{data}`` and ``{out}`` replaced; ``out`` emptied first, the child's stderr in
        ``out/../stderr.txt``) under ``PYTHONPATH=pythonpath`` and ``env`` over this process's environment:
        wall seconds, CPU seconds, peak resident MiB."""
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        args = [sys.executable, *(a.format(data=data, out=out) for a in argv)]
        # as a user's installation runs: with its modules' bytecode cached (a PYTHONDONTWRITEBYTECODE=1
        # environment would compile every module of the package again in each process, 0.3-0.7 s here)
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env = base | (env or {}) | {"PYTHONPATH": pythonpath}
        err = out.parent / "stderr.txt"
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([args, env, str(err)]) + "\n")
        self.proc.stdin.flush()
        wall, cpu, rss, code = json.loads(self.proc.stdout.readline())
        if code != 0:
            raise SystemExit(f"{argv} failed under {pythonpath} ({code}):\n{err.read_text()[-2000:]}")
        return wall, cpu, rss

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


_shared: Launcher | None = None


def run(
    pythonpath: str, argv: list[str], data: Path, out: Path, env: dict[str, str] | None = None
) -> tuple[float, float, float]:
    """:meth:`Launcher.run` on one launcher shared by the process (started at the first call, closed at exit)."""
    global _shared
    if _shared is None:
        _shared = Launcher()
        atexit.register(_shared.close)
    return _shared.run(pythonpath, argv, data, out, env)
