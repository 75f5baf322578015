"""The Parquet commit point is durable in order: every data file the marks file lists, and every directory entry
naming one (a partition directory made, its parent), synced before the marks file is written; an upsert's replaced
files deleted only after it. Else a power loss could leave durable marks listing missing or empty files, which the
next run trusts."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pulsarkit as pk
from pulsarkit import export as px

ORDERS = "public/default/persistent/orders"
T0 = 1_700_000_000_000
HALF_DAY = 43_200_000


def _write(root: Path, step: int) -> None:
    with pk.Store.open(root, sync=False) as store:
        ml = store.managed_ledger(ORDERS, pk.ManagedLedgerConfig(max_entries_per_ledger=2))
        for i in range(3):  # keyed, half a day apart: several date directories, each run some new
            seq = step * 10 + i
            md = pk.message_metadata("prod", seq, T0 + seq * HALF_DAY, partition_key=f"k{i}")
            ml.add_entry(pk.encode_entry(md, b"%d" % seq))


def _inode(p: Path) -> tuple[int, int]:
    st = os.stat(p)
    return st.st_dev, st.st_ino


def _record(monkeypatch, out: Path) -> list[tuple[str, object]]:
    """Every fsync (of a file or a directory, by inode), every data file renamed into OUT or deleted from it, and
    the marks file's write, in order."""
    events: list[tuple[str, object]] = []
    real_fsync, real_replace, real_unlink = os.fsync, os.replace, os.unlink
    real_marks = px.ParquetTarget.write_marks_file

    def fsync(fd):
        st = os.fstat(fd)
        events.append(("dir" if stat.S_ISDIR(st.st_mode) else "file", (st.st_dev, st.st_ino)))
        real_fsync(fd)

    def data_file(path) -> bool:
        p = Path(path)
        return p.suffix == ".parquet" and out in p.parents and px.STAGING not in p.relative_to(out).parts

    def replace(src, dst, **kw):
        real_replace(src, dst, **kw)
        if data_file(dst):
            events.append(("replace", str(dst)))

    def unlink(path, **kw):
        if data_file(path):
            events.append(("unlink", str(path)))
        real_unlink(path, **kw)

    def marks(self, doc):
        events.append(("marks", None))
        real_marks(self, doc)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(px.ParquetTarget, "write_marks_file", marks)
    return events


def _dirs(out: Path) -> set[Path]:
    return {p for p in out.rglob("*") if p.is_dir() and px.STAGING not in p.relative_to(out).parts}


def test_every_committed_file_and_its_directories_are_synced_before_the_marks_then_old_files_go(tmp_path, monkeypatch):
    root, out = tmp_path / "data", tmp_path / "out"
    events = _record(monkeypatch, out)
    old: set[str] = set()
    for step in range(2):
        _write(root, step)
        dirs_before = _dirs(out) if out.exists() else set()
        events.clear()
        s = px.export(str(root), "parquet", str(out), mode="upsert", log=lambda m: None)
        assert s.files and s.rows == 3
        at_marks = events.index(("marks", None))
        last_rename = max(i for i, (kind, _) in enumerate(events) if kind == "replace")
        assert last_rename < at_marks
        files_synced = {k for kind, k in events[:at_marks] if kind == "file"}
        # a directory's entries synced once they are all there: after the last rename, before the marks
        dirs_synced = {k for kind, k in events[last_rename:at_marks] if kind == "dir"}
        for f in s.files:
            p = out / f
            assert _inode(p) in files_synced, f"{f}: its data not synced before the marks file listed it"
            assert _inode(p.parent) in dirs_synced, f"{p.parent}: its new entry not synced before the marks"
            d = p.parent
            while d != out:  # each directory made by this run: its name in its parent synced too
                if d not in dirs_before:
                    assert _inode(d.parent) in dirs_synced, f"{d}: made, but {d.parent} not synced before the marks"
                d = d.parent
        removed = {str(Path(p).relative_to(out)) for kind, p in events if kind == "unlink"}
        assert removed == old  # the snapshot replaced: every file of the last run, none of this one's
        assert all(i > at_marks for i, (kind, _) in enumerate(events) if kind == "unlink")
        old = set(s.files)
    assert old and all((out / f).exists() for f in old)
