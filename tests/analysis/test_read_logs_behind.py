"""The entry logs' accounting read on a thread while a directory opens (``scan.bookie_dir.LogsBehind``): the
same ``LogRead`` per log as reading them in place, an unreadable log an issue as before, the same opened
directory either way, every log read on the thread, and the thread stopped when the open fails."""

from __future__ import annotations

import threading

import pytest
from datadir_fixtures import build
from pulsarkit.scan import bookie_dir
from pulsarkit.scan.datadir import DataDirError, open_data_dir


def _same(a: bookie_dir.LogRead, b: bookie_dir.LogRead) -> None:
    assert (a.log_id, a.empty, a.issues) == (b.log_id, b.empty, b.issues)
    if a.metadata is None or b.metadata is None:
        assert a.metadata is b.metadata is None
    else:
        assert (a.metadata.ledgers, a.metadata.total_size, a.metadata.remaining_size) == (
            b.metadata.ledgers,
            b.metadata.total_size,
            b.metadata.remaining_size,
        )


def _counting(monkeypatch) -> list[str]:
    """The threads ``read_log`` runs on."""
    threads: list[str] = []
    real = bookie_dir.read_log

    def counted(reader, log_id):
        threads.append(threading.current_thread().name)
        return real(reader, log_id)

    monkeypatch.setattr(bookie_dir, "read_log", counted)
    return threads


def test_the_thread_reads_what_opening_reads(tmp_path):
    root = tmp_path / "data"
    build(root)
    currents = [root / "bookie" / "current"]
    # a second log cut in the middle of a record (no ledgers map: scanned, a torn tail) and a third of junk
    whole = (currents[0] / "0.log").read_bytes()
    (currents[0] / "1.log").write_bytes(whole[: len(whole) // 2 + 7])
    (currents[0] / "2.log").write_bytes(b"\xff" * 3000)
    missing = tmp_path / "no-such" / "current"
    got = bookie_dir.LogsBehind([*currents, missing, currents[0]]).wait()
    assert set(got) == {str(c.resolve()) for c in currents}  # one it cannot list: left out; twice: once
    for cur in currents:
        reader = bookie_dir.entrylog.EntryLogReader(str(cur))
        direct = {i: bookie_dir.read_log(reader, i) for i in reader.log_ids()}
        mine = got[str(cur.resolve())]
        assert sorted(mine) == sorted(direct) == [0, 1, 2]
        assert mine[1].issues and (mine[2].issues or mine[2].metadata is None)
        for i in direct:
            _same(mine[i], direct[i])


def test_a_directory_opens_the_same_with_or_without_the_thread(tmp_path, monkeypatch):
    root = tmp_path / "data"
    build(root)
    (root / "bookie" / "current" / "2.log").write_bytes(b"\xff" * 3000)  # an issue at opening
    threads = _counting(monkeypatch)
    with open_data_dir(root) as dd:
        threaded = (dd.entry_logs(), list(dd.issues), dd.ledgers_table())
    assert threads and set(threads) == {"pulsarkit-entry-logs"}  # no BookieDir read a log again
    # as when the reads are given (Spark's driver): here none, so each BookieDir reads its logs itself
    threads.clear()
    monkeypatch.setattr(bookie_dir.LogsBehind, "wait", lambda self: {})
    with open_data_dir(root) as dd:
        inline = (dd.entry_logs(), list(dd.issues), dd.ledgers_table())
    assert threads.count("MainThread") == threads.count("pulsarkit-entry-logs") == 2  # each log, the junk one too
    assert threaded[0] == inline[0] and threaded[0]
    assert threaded[1] == inline[1] and any("2.log" in (i.path or "") for i in inline[1])
    assert threaded[2].equals(inline[2])


def test_a_failed_open_stops_the_thread(tmp_path, monkeypatch):
    root = tmp_path / "data"
    build(root)
    made: list[bookie_dir.LogsBehind] = []
    real_init = bookie_dir.LogsBehind.__init__

    def init(self, currents):
        real_init(self, currents)
        made.append(self)

    def fail(self):
        raise DataDirError("the metadata store is unreadable")

    monkeypatch.setattr(bookie_dir.LogsBehind, "__init__", init)
    monkeypatch.setattr("pulsarkit.scan.datadir.DataDir._load_metadata", fail)
    with pytest.raises(DataDirError, match="unreadable"):
        open_data_dir(root)
    (behind,) = made
    assert behind._stop.is_set() and not behind._thread.is_alive()
