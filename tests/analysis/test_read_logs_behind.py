"""The entry logs' accounting read on a thread while a directory opens (``scan.bookie_dir.read_logs_behind``):
the same ``LogRead`` per log as reading them in place, an unreadable log an issue as before, and the same
opened directory either way."""

from __future__ import annotations

from datadir_fixtures import build
from pulsarkit.scan import bookie_dir
from pulsarkit.scan.datadir import open_data_dir


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


def test_the_thread_reads_what_opening_reads(tmp_path):
    root = tmp_path / "data"
    build(root)
    currents = [root / "bookie" / "current"]
    # a second log cut in the middle of a record (no ledgers map: scanned, a torn tail) and a third of junk
    whole = (currents[0] / "0.log").read_bytes()
    (currents[0] / "1.log").write_bytes(whole[: len(whole) // 2 + 7])
    (currents[0] / "2.log").write_bytes(b"\xff" * 3000)
    missing = tmp_path / "no-such" / "current"
    got = bookie_dir.read_logs_behind([*currents, missing])()
    assert set(got) == {str(c.resolve()) for c in currents}  # a directory it cannot list: left out
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
    with open_data_dir(root) as dd:
        threaded = (dd.entry_logs(), list(dd.issues), dd.ledgers_table())
    # as Spark's driver opens it: the reads given (here: none, so each BookieDir reads its logs itself)
    monkeypatch.setattr("pulsarkit.scan.datadir.read_logs_behind", lambda currents: lambda: {})
    with open_data_dir(root) as dd:
        inline = (dd.entry_logs(), list(dd.issues), dd.ledgers_table())
    assert threaded[0] == inline[0] and threaded[0]
    assert threaded[1] == inline[1] and any(i.kind == "unreadable_entry_log" or "2.log" in i.path for i in inline[1])
    assert threaded[2].equals(inline[2])
