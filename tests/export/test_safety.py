"""Issue 21 items 1, 2, 7 and 10 for the export: nothing written or deleted outside OUT (planted links
in every target format, a foreign dataset with ``--force``), interrupted runs recovered from the run
journal with no flag (a first run killed between its data files and its marks, by SIGKILL too), a
concurrent run told the lock holder's pid, over-long topic names, private files, one-line refusals."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pulsarkit as pk
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import read_export, tree_digest
from pulsarkit import export as px
from pulsarkit.cli import main
from pulsarkit.export.paths import JOURNAL_FILE, NAME_MAX, UnsafePath

T0 = 1_700_000_000_000
HALF_DAY = 43_200_000
NEEDS = {"parquet": None, "delta": "deltalake", "iceberg": "pyiceberg"}
LONG = "public/default/persistent/" + "x" * 300


def _append(root: Path, step: int, names=("public/default/persistent/orders", "public/default/persistent/events")):
    with pk.Store.open(root, sync=False) as store:
        for name in names:
            ml = store.managed_ledger(name, pk.ManagedLedgerConfig(max_entries_per_ledger=2))
            for i in range(3):
                seq = step * 10 + i
                ml.add_entry(pk.encode_entry(pk.message_metadata("prod", seq, T0 + seq * HALF_DAY), b"%d" % seq))


def _needs(to: str) -> None:
    if NEEDS[to]:
        pytest.importorskip(NEEDS[to])


def _digest(d: Path) -> dict[str, str]:
    return tree_digest(d, inodes=True)


def _rows(to: str, out: Path) -> list[tuple]:
    t = read_export(to, out)
    return sorted(zip(*(t.column(c).to_pylist() for c in ("topic", "ledger_id", "entry_id", "payload"))))


def _export(root: Path, to: str, out: Path, **kw) -> px.ExportSummary:
    return px.export(str(root), to, str(out), log=lambda m: None, **kw)


def _theirs(tmp_path: Path) -> Path:
    """A directory beside OUT with files of someone else's, Parquet data among them."""
    theirs = tmp_path / "theirs"
    (theirs / "date=2023-11-14").mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), theirs / "date=2023-11-14" / "part-00000.parquet")
    (theirs / "part-00001.parquet").write_bytes(b"not mine")
    return theirs


# ------------------------------------------------------------------------- 1: planted links


@pytest.mark.parametrize("to", ["parquet", "delta", "iceberg"])
def test_a_planted_partition_link_is_refused_and_nothing_outside_changes(tmp_path, to):
    """The reproduction: a link planted as ``OUT/topic=...`` (Iceberg: ``OUT/data/topic=...``) in an
    existing export; the next run deleted the link target's part files and wrote there."""
    _needs(to)
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    _export(root, to, out)
    _append(root, 1, names=("public/default/persistent/orders", "public/default/persistent/new"))
    theirs = _theirs(tmp_path)
    before = _digest(tmp_path / "theirs")
    committed = _rows(to, out)
    parent = out / "data" if to == "iceberg" else out
    link = parent / "topic=persistent%3A%2F%2Fpublic%2Fdefault%2Fnew"
    link.symlink_to(theirs)
    with pytest.raises(UnsafePath, match="symbolic link") as e:
        _export(root, to, out)
    assert str(link) in str(e.value)
    assert _digest(theirs) == before
    link.unlink()
    assert _rows(to, out) == committed  # the refused run committed nothing
    assert _export(root, to, out).rows > 0 and _digest(theirs) == before


@pytest.mark.parametrize("name", [px.LOCK_FILE, px.STAGING, px.MARKS_FILE, JOURNAL_FILE])
def test_a_link_as_the_lock_staging_marks_or_journal_creates_nothing_outside(tmp_path, name):
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    _export(root, "parquet", out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("mine")
    target = elsewhere / "x" if name != px.STAGING else elsewhere
    before = _digest(elsewhere)
    if (out / name).exists():
        (out / name).unlink()
    (out / name).symlink_to(target)
    assert main(["export", str(root), "--to", "parquet", str(out)]) == 1
    assert _digest(elsewhere) == before
    assert not (elsewhere / "x").exists()


def test_cli_names_the_planted_link_in_one_line(tmp_path, capsys):
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    out.mkdir()
    (out / px.STAGING).symlink_to(tmp_path)
    assert main(["export", str(root), "--to", "parquet", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(out / px.STAGING) in err[0] and "symbolic link" in err[0]


# ------------------------------------------------------------------------- 2: --force and foreign files


def test_force_never_deletes_a_foreign_datasets_files(tmp_path, monkeypatch):
    """The reproduction: ``--force`` into a directory holding a foreign hive dataset removed its part
    files. Also after an interrupted run (whose recovery deletes only what its journal lists)."""
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    out.mkdir()
    topic_dir = out / "topic=persistent%3A%2F%2Fpublic%2Fdefault%2Forders" / "date=2023-11-14"
    topic_dir.mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), topic_dir / "part-00000-theirs.parquet")
    (out / "part-00000.parquet").write_bytes(b"theirs too")
    foreign = _digest(out)

    def die(self, doc):
        raise KeyboardInterrupt("killed between the data files and the marks file")

    monkeypatch.setattr(px.ParquetTarget, "write_marks_file", die)
    with pytest.raises(KeyboardInterrupt):
        _export(root, "parquet", out, force=True)
    monkeypatch.undo()
    assert json.loads((out / JOURNAL_FILE).read_text())["files"]  # what the next run undoes
    s = _export(root, "parquet", out, force=True)
    assert s.removed_leftovers and not any("theirs" in f for f in s.removed_leftovers)
    after = _digest(out)
    assert {k: v for k, v in after.items() if k in foreign} == foreign  # every foreign file as it was
    _append(root, 1)
    _export(root, "parquet", out, force=True)
    assert {k: v for k, v in _digest(out).items() if k in foreign} == foreign


def _staging_of_theirs(out: Path) -> Path:
    mine = out / px.STAGING / "mywork" / "precious.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("precious")
    return mine


@pytest.mark.parametrize("to", ["parquet", "delta", "iceberg"])
def test_a_staging_folder_of_someone_elses_makes_out_foreign_and_is_never_deleted(tmp_path, monkeypatch, to):
    """The reproduction: an OUT holding only a ``_staging/`` of the user's was written into without --force,
    and the run deleted the whole folder (``--force`` into a foreign directory too). It is foreign now, and a
    run removes only the ``_staging/<run>`` its journal names: when it commits, and when it died and the next
    run recovers it (a run that died keeps the folder foreign: its journal did not make it)."""
    _needs(to)
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    mine = _staging_of_theirs(out)
    assert main(["export", str(root), "--to", to, str(out)]) == 1
    assert mine.read_text() == "precious" and os.listdir(out) == [px.STAGING]

    _die_while_staging(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        _export(root, to, out, force=True)
    monkeypatch.undo()
    journal = json.loads((out / JOURNAL_FILE).read_text())
    assert journal["dirs"] == [f"{px.STAGING}/{journal['run']}"]  # the folder was there: not the run's
    assert (out / px.STAGING / journal["run"]).is_dir()
    with pytest.raises(px.ExportRefused, match="--force"):
        _export(root, to, out)
    assert _export(root, to, out, force=True).rows == 6
    assert mine.read_text() == "precious" and os.listdir(out / px.STAGING) == ["mywork"]
    _append(root, 1)
    assert _export(root, to, out).rows == 6  # an export now (its marks): its own runs go on without --force
    assert mine.read_text() == "precious" and os.listdir(out / px.STAGING) == ["mywork"]


def test_a_staging_folder_put_into_an_export_outlives_its_runs(tmp_path):
    """A committed export with a ``_staging`` someone made since, no journal naming it: runs leave it be."""
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    _export(root, "parquet", out)
    mine = _staging_of_theirs(out)
    _append(root, 1)
    assert _export(root, "parquet", out).rows == 6
    assert main(["export", str(root), "--to", "parquet", str(out)]) == 0
    assert mine.read_text() == "precious" and os.listdir(out / px.STAGING) == ["mywork"]


def test_a_run_removes_the_staging_folder_it_made(tmp_path, monkeypatch):
    """The folder a first run made is its own: gone after its commit, and after the recovery of a run that died."""
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)

    def die(self, doc):
        raise KeyboardInterrupt("killed between the data files and the marks file")

    monkeypatch.setattr(px.ParquetTarget, "write_marks_file", die)
    with pytest.raises(KeyboardInterrupt):
        _export(root, "parquet", out)
    monkeypatch.undo()
    journal = json.loads((out / JOURNAL_FILE).read_text())
    assert journal["dirs"][:2] == [px.STAGING, f"{px.STAGING}/{journal['run']}"]
    s = _export(root, "parquet", out)  # no --force: the journal shows the folder was the run's
    assert s.rows == 6 and s.removed_leftovers and not (out / px.STAGING).exists()


# ------------------------------------------------------------------------- 7: interrupted and concurrent runs


def _die_while_staging(monkeypatch):
    """The next run is killed while its rows are being staged, after files were written."""
    real = px.Target.write

    def write_then_die(self, batch):
        real(self, batch)
        raise KeyboardInterrupt("killed while staging")

    monkeypatch.setattr(px.Target, "write", write_then_die)


@pytest.mark.parametrize("to", ["parquet", "delta", "iceberg"])
def test_an_interrupted_first_export_is_recovered_without_a_flag(tmp_path, monkeypatch, to):
    """The reproduction: a first run that died made OUT look foreign ("pass --force") to every rerun."""
    _needs(to)
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    # dies while its rows are being staged, after files were written
    _die_while_staging(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        _export(root, to, out)
    monkeypatch.undo()
    assert (out / px.STAGING).exists() and (out / JOURNAL_FILE).exists()
    s = _export(root, to, out)
    assert s.rows == 6 and len(_rows(to, out)) == 6 and not (out / JOURNAL_FILE).exists()


def test_a_delta_first_run_killed_in_its_write_is_recovered_and_never_counted_twice(tmp_path, monkeypatch):
    pytest.importorskip("deltalake")
    import deltalake

    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    real = deltalake.write_deltalake

    def half(table_or_uri, data, **kw):  # the data files written, the commit never made
        d = Path(table_or_uri) / "topic=persistent%3A%2F%2Fpublic%2Fdefault%2Forders" / "date=2023-11-14"
        d.mkdir(parents=True)
        pq.write_table(data, d / "part-00001-half.parquet")
        (Path(table_or_uri) / "_delta_log").mkdir()
        raise KeyboardInterrupt("killed inside the Delta write")

    monkeypatch.setattr(deltalake, "write_deltalake", half)
    with pytest.raises(KeyboardInterrupt):
        _export(root, "delta", out)
    monkeypatch.setattr(deltalake, "write_deltalake", real)
    s = _export(root, "delta", out)
    assert any(f.endswith("part-00001-half.parquet") for f in s.removed_leftovers)
    assert len(_rows("delta", out)) == 6

    # the run's commit is made but the process dies before it drops its journal: committed, kept
    _append(root, 1)

    def commit_then_die(*a, **kw):
        real(*a, **kw)
        raise KeyboardInterrupt("killed after the commit")

    monkeypatch.setattr(deltalake, "write_deltalake", commit_then_die)
    with pytest.raises(KeyboardInterrupt):
        _export(root, "delta", out)
    monkeypatch.undo()
    assert (out / JOURNAL_FILE).exists()
    s = _export(root, "delta", out)
    assert s.rows == 0 and not s.removed_leftovers  # the commit stands: nothing removed, nothing again
    rows = _rows("delta", out)
    assert len(rows) == len(set(rows)) == 12


def test_a_first_export_killed_by_sigkill_between_data_and_marks(tmp_path):
    """A real kill -9 between the data files' renames and the marks file: the rerun (no flag) removes
    the journal's files and exports every message once."""
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    code = (
        "import os, signal, sys\n"
        "from pulsarkit import export as px\n"
        "px.ParquetTarget.write_marks_file = lambda self, doc: os.kill(os.getpid(), signal.SIGKILL)\n"
        "px.export(sys.argv[1], 'parquet', sys.argv[2], log=lambda m: None)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(root), str(out)], capture_output=True, timeout=120)
    assert r.returncode == -signal.SIGKILL
    journal = json.loads((out / JOURNAL_FILE).read_text())
    assert journal["files"] and all((out / f).is_file() for f in journal["files"])
    assert not (out / px.MARKS_FILE).exists()
    s = _export(root, "parquet", out)
    assert sorted(s.removed_leftovers) == sorted(journal["files"])
    rows = _rows("parquet", out)
    assert len(rows) == len(set(rows)) == 6 == s.rows


_HOLD = (
    "import fcntl, os, sys, time\n"
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "os.pwrite(fd, b'%d\\n' % os.getpid(), 0)\n"
    "print('held', flush=True)\n"
    "time.sleep(60)\n"
)


def test_a_concurrent_run_is_told_the_lock_holders_pid_and_a_dead_holders_lock_is_taken(tmp_path, capsys):
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(out / px.LOCK_FILE)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert main(["export", str(root), "--to", "parquet", str(out)]) == 1
        err = capsys.readouterr().err
        assert f"pid {holder.pid}" in err and "another pulsarkit export" in err and "--force" not in err
    finally:
        holder.kill()
        holder.wait()
    # the holder is dead, its pid still in the file: the lock is the kernel's, released; the run takes it
    assert (out / px.LOCK_FILE).read_text().strip() == str(holder.pid)
    assert main(["export", str(root), "--to", "parquet", str(out)]) == 0
    assert (out / px.LOCK_FILE).read_text() == ""  # released


def test_an_over_long_topic_name_gets_a_stable_short_directory(tmp_path):
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0, names=(LONG, "public/default/persistent/ok"))
    s = _export(root, "parquet", out)
    assert s.rows == 6
    topic = "persistent://" + LONG.replace("/persistent/", "/", 1)
    doc = json.loads((out / px.MARKS_FILE).read_text())
    (short,) = [d for d, t in doc["topic_dirs"].items() if t == topic]
    assert len(short.encode()) <= NAME_MAX and (out / short).is_dir()
    # a rerun maps the topic to the same directory; the files name their topic
    _append(root, 1, names=(LONG,))
    s = _export(root, "parquet", out)
    assert s.rows == 3 and sorted(p.name for p in out.glob("topic=*")) == sorted(
        {short, "topic=persistent%3A%2F%2Fpublic%2Fdefault%2Fok"}
    )
    for f in (out / short).rglob("*.parquet"):
        assert pq.read_schema(f).metadata[b"pulsarkit.topic"] == topic.encode()


@pytest.mark.parametrize("to", ["delta", "iceberg"])
def test_an_over_long_topic_name_is_left_out_with_a_warning_by_table_formats(tmp_path, to):
    """Their writers name partition directories in full: that topic is left out, named in a warning,
    its mark kept (a rerun warns again); every other topic is exported."""
    _needs(to)
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0, names=(LONG, "public/default/persistent/ok"))
    logged: list[str] = []
    s = px.export(str(root), to, str(out), log=logged.append)
    assert s.rows == 3 and {t for t, *_ in _rows(to, out)} == {"persistent://public/default/ok"}
    (w,) = [w for w in s.warnings if "x" * 200 in w]
    assert "not exported" in w and "--to parquet" in w and any(w in m for m in logged)
    assert list(s.topics) == ["persistent://public/default/ok"]
    again = px.export(str(root), to, str(out), log=lambda m: None)
    assert again.rows == 0 and any("x" * 200 in w for w in again.warnings)


# ------------------------------------------------------------------------- 10: private, one line


@pytest.mark.parametrize("to", ["parquet", "delta", "iceberg"])
def test_an_export_is_private(tmp_path, to):
    _needs(to)
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    _export(root, to, out)
    for base, dirs, files in os.walk(out):
        for n in dirs:
            assert stat.S_IMODE(os.stat(Path(base) / n).st_mode) == 0o700, Path(base) / n
        for n in files:
            assert stat.S_IMODE(os.stat(Path(base) / n).st_mode) == 0o600, Path(base) / n
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o700


def test_a_target_that_cannot_be_written_is_one_line(tmp_path, capsys):
    root = tmp_path / "data"
    _append(root, 0)
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.getuid() == 0:  # root writes through any mode: an immutable directory refuses even root
        if subprocess.run(["chattr", "+i", str(ro)], capture_output=True).returncode != 0:
            pytest.skip("running as root without chattr +i")
    else:
        os.chmod(ro, 0o555)
    try:
        for out in (ro / "out", ro):
            assert main(["export", str(root), "--to", "parquet", str(out)]) == 1
            lines = capsys.readouterr().err.strip().splitlines()
            assert len(lines) == 1 and "cannot export there" in lines[0] and str(ro) in lines[0], lines
            assert "permission denied" in lines[0]
    finally:
        if os.getuid() == 0:
            subprocess.run(["chattr", "-i", str(ro)], check=True)
        os.chmod(ro, 0o755)
    assert list(ro.iterdir()) == []


def _die_at_the_commit_point(monkeypatch, to: str, out: Path) -> None:
    """Makes the next run die after its commit wrote its files and before its commit point."""
    if to == "parquet":

        def die(self, doc):
            raise KeyboardInterrupt("killed before the marks file")

        monkeypatch.setattr(px.ParquetTarget, "write_marks_file", die)
    elif to == "delta":
        import deltalake

        def half(table_or_uri, data, **kw):  # files in an existing partition and a new one, no commit
            for d in (next(Path(table_or_uri).glob("topic=*/date=*")), Path(table_or_uri) / "topic=new" / "date=x"):
                d.mkdir(parents=True, exist_ok=True)
                pq.write_table(data, d / "part-00009-half.parquet")
            raise KeyboardInterrupt("killed inside the Delta write")

        monkeypatch.setattr(deltalake, "write_deltalake", half)
    else:
        from pyiceberg.catalog.sql import SqlCatalog

        write_metadata = SqlCatalog._write_metadata

        def die_md(*args, **kw):
            write_metadata(*args, **kw)
            raise KeyboardInterrupt("killed between the metadata JSON and the catalog's commit")

        monkeypatch.setattr(SqlCatalog, "_write_metadata", staticmethod(die_md))


@pytest.mark.parametrize("to", ["parquet", "delta", "iceberg"])
def test_recovery_deletes_only_what_the_interrupted_run_wrote(tmp_path, monkeypatch, to):
    """Not "every part file the marks do not list": a file a user put among the export's own survives."""
    _needs(to)
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    _export(root, to, out)
    partition = next((out / "data" if to == "iceberg" else out).glob("topic=*/date=*"))
    pq.write_table(pa.table({"x": [1]}), partition / "part-00000-users-own.parquet")
    (out / "_notes.txt").write_text("mine")
    mine = {k: v for k, v in _digest(out).items() if "users-own" in k or k == "_notes.txt"}
    committed = _rows(to, out) if to != "parquet" else None
    _append(root, 1)
    _die_at_the_commit_point(monkeypatch, to, out)
    with pytest.raises(KeyboardInterrupt):
        _export(root, to, out)
    monkeypatch.undo()
    if committed is not None:
        assert _rows(to, out) == committed  # nothing visible of the run that died
    s = _export(root, to, out)
    assert s.removed_leftovers and not any("users-own" in f for f in s.removed_leftovers)
    assert {k: v for k, v in _digest(out).items() if k in mine} == mine
    assert not any("half" in k or k.startswith("topic=new") for k in _digest(out))
    (partition / "part-00000-users-own.parquet").unlink()
    rows = _rows(to, out)
    assert len(rows) == len(set(rows)) == 12


@pytest.mark.parametrize("name", [px.LOCK_FILE, px.ICEBERG_CATALOG])
def test_a_hard_link_as_a_file_written_in_place_is_refused(tmp_path, name):
    """The lock (its pid) and the Iceberg catalog (SQLite pages) are written in place: another name of
    the same file would change too. (Data files are replaced and deleted: a hard link keeps its bytes.)"""
    to = "iceberg" if name == px.ICEBERG_CATALOG else "parquet"
    _needs(to)
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    _export(root, to, out)
    theirs = tmp_path / "theirs.bin"
    theirs.write_bytes(b"precious")
    (out / name).unlink()
    os.link(theirs, out / name)
    with pytest.raises(UnsafePath, match="hard link"):
        _export(root, to, out)
    assert theirs.read_bytes() == b"precious"


def test_a_foreign_file_where_a_data_file_goes_is_refused_and_kept(tmp_path, monkeypatch):
    """Refused before the run's journal lists the path (the next run deletes what the journal lists)."""
    from pulsarkit.export import run as run_mod

    root, out, scratch = tmp_path / "data", tmp_path / "out", tmp_path / "scratch"
    _append(root, 0)
    _export(root, "parquet", scratch)  # where this data's files go
    partitions = [d.relative_to(scratch) for d in scratch.glob("topic=*/date=*")]
    planted = [out / d / "part-r1-00000.parquet" for d in partitions]
    for f in planted:
        f.parent.mkdir(parents=True)
        f.write_bytes(b"theirs")
    monkeypatch.setattr(run_mod, "new_run_id", lambda: "r1")
    with pytest.raises(px.ExportRefused, match="never replaces a file it did not write"):
        _export(root, "parquet", out, force=True)
    monkeypatch.undo()
    assert all(f.read_bytes() == b"theirs" for f in planted)
    s = _export(root, "parquet", out, force=True)  # the next run removes nothing of theirs
    assert s.rows == 6 and all(f.read_bytes() == b"theirs" for f in planted)
