"""The main job runs end to end (Arrow engine here; the Spark engine is what README's command runs)."""

import json
import os
import subprocess
import sys


def test_demo_arrow_engine(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pulsarkit.demo",
            "--engine",
            "arrow",
            "--entries",
            "120",
            "--data",
            str(tmp_path / "d"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["all_match"]
    assert set(t.rsplit("/", 1)[1] for t in s["topics"]) == {
        "orders",
        "payments",
        "clicks",
        "inventory",
        "audit-log",
    }
    assert any(t["ledgers_deleted"] for t in s["topics"].values())  # retention deleted something
    assert s["messages_of_deleted_ledgers_awaiting_gc"] > 0
    assert sum(t["publish"].get("resend_DUPLICATE", 0) for t in s["topics"].values()) > 0
    for t in s["topics"].values():
        assert "resend_OK" not in t["publish"]  # every resend was deduplicated
    assert all(r["duplicate_messages"] == 0 for r in s["audit"])


def _demo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pulsarkit.demo", "--engine", "arrow", "--entries", "20", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_demo_never_deletes_what_it_did_not_make(tmp_path):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("keep me")
    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    link = tmp_path / "link"
    link.symlink_to(user)
    afile = tmp_path / "afile"
    afile.write_text("a file")
    for target in (user, link, afile):
        r = _demo("--data", str(target), "--overwrite")
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.count("\n") == 1 and "error:" in r.stderr
    assert (user / "notes.txt").read_text() == "keep me" and sorted(p.name for p in user.iterdir()) == ["notes.txt"]
    assert afile.read_text() == "a file" and outside.read_text() == "outside" and link.is_symlink()


def test_demo_replaces_its_own_directory_only_with_overwrite(tmp_path):
    d = tmp_path / "d"
    assert _demo("--data", str(d), "--json").returncode == 0
    assert (d / ".pulsarkit-demo").is_file() and (d / "metadata").is_dir()
    assert oct(d.stat().st_mode & 0o777) == "0o700"
    r = _demo("--data", str(d))
    assert r.returncode == 2 and "--overwrite" in r.stderr
    r = _demo("--data", str(d), "--overwrite", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["all_match"]


def test_demo_overwrite_never_removes_a_file_it_did_not_write(tmp_path):
    """Issue 21 item 3: a file a user added inside an earlier demo directory survives --overwrite,
    which then removes nothing; an unfinished run (marker without its file list) is refused too."""
    d = tmp_path / "d"
    assert _demo("--data", str(d), "--json").returncode == 0
    marker = (d / ".pulsarkit-demo").read_text().splitlines()
    assert "files:" in marker and "metadata/CURRENT" in marker
    (d / "bookie" / "notes.txt").write_text("mine")
    before = sorted(str(p.relative_to(d)) for p in d.rglob("*"))
    r = _demo("--data", str(d), "--overwrite", "--json")
    assert r.returncode == 2 and "bookie/notes.txt" in r.stderr and r.stderr.count("\n") == 1
    assert sorted(str(p.relative_to(d)) for p in d.rglob("*")) == before
    (d / "bookie" / "notes.txt").unlink()
    r = _demo("--data", str(d), "--overwrite", "--json")
    assert r.returncode == 0, r.stderr
    (d / ".pulsarkit-demo").write_text("made by python -m pulsarkit.demo\n")  # as a run killed mid-way leaves it
    r = _demo("--data", str(d), "--overwrite", "--json")
    assert r.returncode == 2 and "did not finish" in r.stderr and (d / "metadata").is_dir()


def test_demo_without_data_leaves_no_directory(tmp_path):
    env_tmp = tmp_path / "tmp"
    env_tmp.mkdir()
    r = subprocess.run(
        [sys.executable, "-m", "pulsarkit.demo", "--engine", "arrow", "--entries", "20", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(env_tmp)},
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["all_match"]
    assert list(env_tmp.iterdir()) == []


def test_demo_overwrite_deletes_nothing_outside_its_directory_and_its_data_is_private(tmp_path):
    """Issue 21 (the same output rules for the demo): a marker whose file list names paths outside the
    directory (``..``, absolute), or a listed file replaced by a link to a file elsewhere, is refused and
    nothing outside changes; every file the demo writes is private (0600, directories 0700)."""
    d = tmp_path / "d"
    assert _demo("--data", str(d), "--json").returncode == 0
    modes = {p.relative_to(d): p.stat().st_mode & 0o777 for p in d.rglob("*")}
    assert all(m & 0o077 == 0 for m in modes.values()), {str(p): oct(m) for p, m in modes.items() if m & 0o077}
    outside = tmp_path / "outside.txt"
    marker = d / ".pulsarkit-demo"
    good = marker.read_text()
    for planted in ("../outside.txt", str(outside)):
        outside.write_text("outside")
        marker.write_text(good + planted + "\n")
        r = _demo("--data", str(d), "--overwrite", "--json")
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "error:" in r.stderr, r.stderr
        assert outside.read_text() == "outside"
    marker.write_text(good)
    listed = d / "metadata" / "CURRENT"
    listed.unlink()
    listed.symlink_to(outside)
    r = _demo("--data", str(d), "--overwrite", "--json")
    assert r.returncode == 2 and ("symbolic link" in r.stderr or "not a regular file" in r.stderr), r.stderr
    assert outside.read_text() == "outside" and listed.is_symlink()
