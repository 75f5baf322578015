"""Crash safety: a writer process adds entries through a managed ledger, flushes, and prints each
position the flush acknowledged. The test kills it with SIGKILL at random points (mid-batch,
right after a flush starts, while a large flush is being written), reopens the store, and checks
that every acknowledged entry reads back byte for byte, that cursor mark-deletes survive, and that
the reopened store reports the torn tails and re-indexed records the kills left behind."""

from __future__ import annotations

import hashlib
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pulsarkit as pk
from pulsarkit.managed_ledger import ManagedLedgerConfig, Position

NAME = "public/default/persistent/crash"
KILLS = 54
LOG_SIZE_LIMIT = 512 * 1024

CHILD = (
    r"""
import hashlib, random, sys, time
import pulsarkit as pk
from pulsarkit.managed_ledger import ManagedLedgerConfig

path, seed, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rnd = random.Random(seed)
store = pk.Store.open(path, log_size_limit=%(limit)d)
ml = store.managed_ledger(%(name)r, ManagedLedgerConfig(max_entries_per_ledger=40, minimum_rollover_time_ms=0))
cursor = ml.open_cursor("sub", "earliest")
out = sys.stdout
out.write("open\n")
out.flush()
n = 0
while True:
    big = mode == "big" and n > 0
    pending = []
    # big records go to the file as single multi-megabyte writes, which a kill can cut short
    for _ in range(1 if big else rnd.randint(1, 30)):
        size = 48 << 20 if big else rnd.choice((16, 100, 1000, 5000))
        body = hashlib.sha256(b"%%d:%%d" %% (seed, n)).digest() * (size // 32 + 1)
        data = b"%%d:%%d:" %% (seed, n) + body[:size]
        pending.append((ml.add_entry(data), data))
        n += 1
    out.write("flushing-big\n" if big else "flushing\n")
    out.flush()
    if big:
        time.sleep(0.05)  # lets the test note the log's size before the write starts
    ml.flush()
    out.write("".join("ack %%d %%d %%s\n" %% (p.ledger_id, p.entry_id, hashlib.sha1(d).hexdigest())
                      for p, d in pending))
    out.flush()
    if rnd.random() < 0.3:
        last = pending[-1][0]
        cursor.mark_delete(last)
        out.write("md %%d %%d\n" %% (last.ledger_id, last.entry_id))
        out.flush()
""".replace("%(limit)d", str(LOG_SIZE_LIMIT))
    .replace("%(name)r", repr(NAME))
    .replace("%%", "%")
)


class Child:
    """The writer process and the lines it printed (complete lines only)."""

    def __init__(self, path: Path, seed: int, mode: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), str(seed), mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: list[str] = []
        self._cv = threading.Condition()
        self._t = threading.Thread(target=self._pump, daemon=True)
        self._t.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if not raw.endswith(b"\n"):
                break  # a line cut by the kill was never fully acknowledged
            with self._cv:
                self.lines.append(raw.decode().rstrip("\n"))
                self._cv.notify_all()
        with self._cv:
            self.lines.append("<eof>")
            self._cv.notify_all()

    def wait_for(self, text: str, count: int = 1, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._cv:
            while sum(1 for l in self.lines if l == text) < count:
                if "<eof>" in self.lines:
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._t.join(timeout=10)
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read().decode(errors="replace")
        self.proc.stderr.close()


def _newest_log(path: Path) -> Path | None:
    logs = list((path / "bookie" / "current").glob("*.log"))
    return max(logs, key=lambda p: int(p.stem, 16)) if logs else None


def _kill_during_big_flush(child: Child, path: Path) -> None:
    """Kills while a multi-megabyte flush is being written: as soon as the log grows."""
    if not (child.wait_for("open") and child.wait_for("flushing-big")):
        child.kill()
        return
    deadline = time.monotonic() + 5
    log = _newest_log(path)
    start = log.stat().st_size if log else 0
    while time.monotonic() < deadline:
        now = _newest_log(path)
        if now is None:
            continue
        grown = now.stat().st_size - (start if now == log else 1024)
        # well into a multi-megabyte record (not just a ledgers map or a fresh header)
        if grown > 256 * 1024:
            break
    child.kill()


def test_sigkill_never_loses_a_flushed_entry(tmp_path) -> None:
    rnd = random.Random(20240611)
    path = tmp_path / "store"
    acked: dict[Position, str] = {}
    torn_tails = reindexed = 0
    last_md: Position | None = None
    kills = 0
    for i in range(KILLS):
        mode = "big" if i % 6 == 5 else "small"
        child = Child(path, 1000 + i, mode)
        if mode == "big":
            _kill_during_big_flush(child, path)
        elif not child.wait_for("open"):
            child.kill()
        elif rnd.random() < 0.5:
            # right after a flush starts, with a little jitter
            child.wait_for("flushing", rnd.randint(1, 6))
            time.sleep(rnd.random() * 0.004)
            child.kill()
        else:
            time.sleep(rnd.uniform(0.01, 0.25))
            child.kill()
        if child.proc.returncode != -signal.SIGKILL:
            raise AssertionError(f"writer exited by itself ({child.proc.returncode}): {child.stderr[-2000:]}")
        kills += 1
        new_acks = {}
        for line in child.lines:
            parts = line.split()
            if parts and parts[0] == "ack":
                new_acks[Position(int(parts[1]), int(parts[2]))] = parts[3]
            elif parts and parts[0] == "md":
                last_md = Position(int(parts[1]), int(parts[2]))
        assert not (new_acks.keys() & acked.keys()), "a position was handed out twice"
        acked.update(new_acks)

        # reopen the way the next writer will, and check what the flushes promised
        with pk.Store.open(path, log_size_limit=LOG_SIZE_LIMIT) as s:
            rep = s.recovery
            torn_tails += len(rep.torn_tails)
            reindexed += rep.reindexed_entries
            for t in rep.torn_tails:
                size = (path / "bookie" / "current" / f"{t.log_id:x}.log").stat().st_size
                # a torn record, or a log killed before its header was complete
                assert 0 <= t.offset <= size and t.offset + t.length == size, t
                assert t.offset >= 1024 or t.reason.startswith("truncated_header"), t
            ml = s.managed_ledger(NAME, ManagedLedgerConfig(max_entries_per_ledger=40, minimum_rollover_time_ms=0))
            for p, digest in new_acks.items():
                data = ml.read_entry(p)
                assert hashlib.sha1(data).hexdigest() == digest, f"entry {p} changed after a crash"
            if last_md is not None:
                assert ml.cursor("sub").mark_delete_position >= last_md
    assert kills >= 50
    # every acknowledged entry of every run is still there, in order
    with pk.Store.open(path, read_only=True) as s:
        ml = s.managed_ledger(NAME)
        positions = [p for p, _ in ml.read_after(Position(-1, -1)) if p in acked]
        assert positions == sorted(acked)
        assert all(hashlib.sha1(ml.read_entry(p)).hexdigest() == d for p, d in acked.items())
        assert len(acked) > 100
    # the kills did interrupt flushes: the reopened store found their tails
    assert torn_tails > 0, (torn_tails, reindexed)
