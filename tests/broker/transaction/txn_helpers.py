"""Deterministic stand-ins for the writer's surroundings: an executor that runs tasks when told, a
timer fired by hand, and a ledger that can be made to fail."""

from __future__ import annotations

import random
from collections import deque

from pulsarkit.managed_ledger.position import Position


class QueueExecutor:
    """Runs submitted tasks only when ``run()`` is called, in order (one writer thread, made visible)."""

    def __init__(self) -> None:
        self.tasks: deque = deque()

    def submit(self, fn, *args):
        self.tasks.append((fn, args))

    def run(self) -> int:
        n = 0
        while self.tasks:
            fn, args = self.tasks.popleft()
            fn(*args)
            n += 1
        return n


class ManualTimer:
    def __init__(self) -> None:
        self.pending: list = []

    class _Handle:
        def __init__(self, timer, fn) -> None:
            self.timer, self.fn, self.cancelled = timer, fn, False

        def cancel(self) -> None:
            self.cancelled = True
            if self in self.timer.pending:
                self.timer.pending.remove(self)

    def new_timeout(self, fn, delay_ms):
        h = self._Handle(self, fn)
        self.pending.append(h)
        return h

    def fire(self) -> int:
        due, self.pending = self.pending, []
        for h in due:
            if not h.cancelled:
                h.fn()
        return len(due)


class FakeLedger:
    """Entries in memory; ``fail`` (a probability or True) makes adds raise like a bookie failure."""

    def __init__(self, fail: float | bool = False, seed: int = 0) -> None:
        self.entries: list[bytes] = []
        self.fail = fail
        self.rng = random.Random(seed)
        self.ledger_id = 7

    def add_entry(self, data: bytes, num_messages: int = 1) -> Position:
        if self.fail is True or (self.fail and self.rng.random() < self.fail):
            raise OSError("bookie write failed")
        self.entries.append(bytes(data))
        return Position(self.ledger_id, len(self.entries) - 1)
