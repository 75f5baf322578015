"""The command line as a careful Unix tool: a bad input is one line on stderr and a non-zero exit,
never a traceback; an output path that is a user's file, an input of the same run, or a link to a
file elsewhere is never written (refused, or replaced only with --overwrite for a plain file)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pulsarkit as pk
import pytest
from pulsarkit.bookkeeper import BookieEntryPacker, EntryLogWriter, key_value_storage

TOPIC = "persistent://public/default/orders"


def cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pulsarkit", *argv], capture_output=True, text=True, timeout=120)


def assert_one_line_error(r: subprocess.CompletedProcess, command: str) -> None:
    assert r.returncode not in (0,), r
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pulsarkit {command}: error: "), r.stderr


@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bad")
    (root / "empty").mkdir()
    (root / "afile").write_text("not pulsar data")
    db = key_value_storage.open_writable(str(root / "rocks"))
    db.put(b"k", b"v")
    db.close()
    (root / "00a.log").write_bytes(b"BKLO" + bytes(100))  # zero-padded: a RocksDB WAL name, not a bookie's
    return {
        "nonexistent": root / "nope",
        "empty dir": root / "empty",
        "file instead of a dir": root / "afile",
        "RocksDB dir by mistake": root / "rocks",
        "non-canonical log name": root / "00a.log",
    }


COMMANDS = [
    ("readlog",),
    ("readlogmetadata",),
    ("ledgers",),
    ("topics",),
    ("messages",),
    ("backlog", "{}", TOPIC, "sub"),
    ("transactions",),
    ("compacted", "{}", TOPIC),
    ("last-message-id", "{}", TOPIC),
    ("orphans",),
    ("du",),
    ("fsck",),
    ("readjournal",),
]


@pytest.mark.parametrize(
    "case",
    ["nonexistent", "empty dir", "file instead of a dir", "RocksDB dir by mistake", "non-canonical log name"],
)
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_bad_input_is_one_line_and_a_nonzero_exit(bad_inputs, command, case) -> None:
    path = str(bad_inputs[case])
    argv = [a.format(path) for a in command] if "{}" in command else [*command, path]
    r = cli(*argv)
    assert_one_line_error(r, command[0])
    assert r.stdout == ""


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_unreadable_dir_is_one_line(tmp_path, command) -> None:
    """A chmod 000 directory. Root reads it anyway, so as root the command runs as ``nobody``."""
    d = tmp_path / "locked"
    d.mkdir()
    (d / "0.log").write_bytes(b"x")
    d.chmod(0)
    as_nobody = {"user": 65534, "group": 65534, "extra_groups": []} if os.geteuid() == 0 else {}
    if as_nobody:
        try:
            probe = subprocess.run([sys.executable, "-c", "import pulsarkit"], capture_output=True, **as_nobody)
            why = probe.stderr[-200:] if probe.returncode else None
        except PermissionError as e:
            why = str(e)
        if why is not None:
            pytest.skip(f"running as root, and nobody cannot run this interpreter: {why!r}")
    try:
        argv = [a.format(d) for a in command] if "{}" in command else [*command, str(d)]
        r = subprocess.run(
            [sys.executable, "-m", "pulsarkit", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            **as_nobody,
        )
        assert_one_line_error(r, command[0])
    finally:
        d.chmod(0o700)


def test_help_documents_the_exit_codes() -> None:
    r = cli("--help")
    assert r.returncode == 0
    for code in ("0", "1", "2", "3"):
        assert f"  {code} " in r.stdout, r.stdout


# ------------------------------------------------------------------------------------------- outputs


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A small pulsarkit data directory (metadata + bookie) with one topic and a subscription."""
    root = tmp_path_factory.mktemp("data")
    with pk.Store.open(root / "d", sync=False) as store:
        ml = store.managed_ledger("public/default/persistent/orders")
        for i in range(5):
            ml.add_entry(pk.encode_entry(pk.message_metadata("p", i, 1_700_000_000_000 + i), b"m%d" % i))
        ml.open_cursor("sub", initial_position="earliest")
    logs = root / "logs" / "current"
    with EntryLogWriter(logs, fsync=False) as w:
        p = BookieEntryPacker(7)
        for i in range(3):
            w.append(7, p.pack(pk.encode_entry(pk.message_metadata("p", i, 1), b"x")))
    return root


def _output_commands(data: Path, out: Path) -> list[tuple[list[str], Path]]:
    d = data / "d"
    logs = data / "logs"
    return [
        (["readlog", str(logs), "--parquet", str(out)], logs),
        (["readlogmetadata", str(logs), "--parquet", str(out)], logs),
        (["ledgers", str(d), "--format", "parquet", "-o", str(out)], d),
        (["messages", str(d), "--topic", TOPIC, "--format", "jsonl", "-o", str(out)], d),
        (["messages", str(d), "--topic", TOPIC, "--format", "parquet", "-o", str(out)], d),
        (["backlog", str(d), TOPIC, "sub", "--format", "jsonl", "-o", str(out)], d),
        (["compacted", str(d), TOPIC, "--format", "parquet", "-o", str(out)], d),
        (["transactions", str(d), "--parquet", str(out)], d),
        (["schemas", str(d), "--format", "parquet", "-o", str(out)], d),
        (["orphans", str(d), "--parquet", str(out)], d),
        (["orphans", str(d), "--plan", str(out)], d),
        (["du", str(d), "--parquet", str(out)], d),
        (["fsck", str(d), "--parquet", str(out)], d),
        (["report", str(d), "-o", str(out)], d),
        (["gc", str(d), "--plan", str(out)], d),
        (
            [
                "replicas",
                "--metadata-dir",
                str(d / "metadata"),
                "--bookie",
                f"127.0.0.1:3181={d / 'bookie'}",
                "--parquet",
                str(out),
            ],
            d,
        ),
    ]


#: every command that writes a file, as :func:`_output_commands` lists them
OUTPUTS = len(_output_commands(Path("data"), Path("out")))


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("index", range(OUTPUTS))
def test_outputs_never_overwrite_user_files_inputs_or_through_links(data, tmp_path, index) -> None:
    user = tmp_path / "user.txt"
    outside = tmp_path / "outside.txt"
    link = tmp_path / "link.parquet"
    before_inputs = _snapshot(data)
    for case in ("user file", "input file", "symlink"):
        user.write_text("the user's file")
        outside.write_text("a file elsewhere")
        if link.is_symlink():
            link.unlink()
        link.symlink_to(outside)
        argv, input_root = _output_commands(data, user)[index]
        input_file = next(p for p in sorted(input_root.rglob("*")) if p.is_file())
        target = {"user file": user, "input file": input_file, "symlink": link}[case]
        argv = [str(target) if a == str(user) else a for a in argv]
        for extra in ([], ["--overwrite"]):
            r = cli(*argv, *extra)
            if case == "user file" and extra:
                assert r.returncode == 0, r.stderr  # a plain file is replaced when asked to
                assert user.read_bytes() != b"the user's file"
                continue
            assert_one_line_error(r, argv[0])
            assert user.read_text() == "the user's file"
            assert outside.read_text() == "a file elsewhere" and link.is_symlink()
            assert _snapshot(data) == before_inputs
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary left behind


@pytest.mark.parametrize("index", range(OUTPUTS))
def test_outputs_are_private_new_files(data, tmp_path, index) -> None:
    """Issue 21 item 10: an output holds the data, so it is 0600 whatever the umask; nothing else is
    left beside it."""
    out = tmp_path / "out"
    argv, _ = _output_commands(data, out)[index]
    old = os.umask(0o022)
    try:
        r = cli(*argv)
    finally:
        os.umask(old)
    assert r.returncode in (0, 3), r.stderr  # 3: a data problem found (the entry logs' fsck), still written
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_failed_run_leaves_no_output_and_no_temporary(data, tmp_path) -> None:
    out = tmp_path / "out.parquet"
    r = cli("backlog", str(data / "d"), TOPIC, "no-such-subscription", "--format", "parquet", "-o", str(out))
    assert_one_line_error(r, "backlog")
    assert list(tmp_path.iterdir()) == []


def test_fifos_are_skipped_with_a_warning_and_never_read(tmp_path) -> None:
    """A FIFO named like an entry log would block a reader forever: in a directory it is skipped
    with a warning, given by name it is an error."""
    d = tmp_path / "bk" / "current"
    with EntryLogWriter(d, fsync=False) as w:
        w.append(3, BookieEntryPacker(3).pack(pk.encode_entry(pk.message_metadata("p", 0, 1), b"x")))
    os.mkfifo(d / "7.log")
    r = cli("readlog", str(d), "--json")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1
    assert r.stderr.strip() == f"pulsarkit readlog: warning: {d / '7.log'}: not a regular file, skipped"
    assert_one_line_error(cli("readlog", str(d / "7.log")), "readlog")


def test_an_output_that_appears_while_the_command_runs_is_never_replaced(tmp_path) -> None:
    """Without --overwrite the output is put in place by a hard link, which cannot replace a file (or a
    link) another process put there after the check; the temporary is written in a private directory."""
    from pulsarkit.cli.command import OutputRefused, output_file

    out = tmp_path / "out.json"
    outside = tmp_path / "outside"
    outside.write_text("theirs")
    for planted in ("file", "link"):
        with pytest.raises(OutputRefused, match="appeared while the command ran"):
            with output_file(str(out)) as dest:
                assert oct(os.stat(os.path.dirname(dest)).st_mode & 0o777) == "0o700"
                assert oct(os.stat(dest).st_mode & 0o777) == "0o600"
                Path(dest).write_text("ours")
                if planted == "file":
                    out.write_text("theirs")
                else:
                    out.symlink_to(outside)
        assert (out.read_text() if planted == "file" else outside.read_text()) == "theirs"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "outside"]
        out.unlink()
    with output_file(str(out)) as dest:
        Path(dest).write_text("ours")
    assert out.read_text() == "ours" and not out.is_symlink()


@pytest.mark.parametrize("overwrite", [True, False])
def test_an_output_is_synced_before_it_is_put_in_place_and_its_name_after(tmp_path, monkeypatch, overwrite) -> None:
    """A crash after the rename must not leave an empty file where a good one was (a reviewed plan replaced with
    --overwrite): the new content is fsynced before the rename (or link), the directory naming it after."""
    from pulsarkit.cli.command import output_file

    out = tmp_path / "plan.json"
    if overwrite:
        out.write_text("the reviewed plan")
    events: list[tuple[str, object]] = []
    real_fsync, real_replace, real_link = os.fsync, os.replace, os.link

    def fsync(fd):
        st = os.fstat(fd)
        events.append(("fsync", (st.st_dev, st.st_ino)))
        real_fsync(fd)

    def put(real):
        def put_in_place(src, dst, **kw):
            real(src, dst, **kw)
            events.append(("put", str(dst)))

        return put_in_place

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", put(real_replace))
    monkeypatch.setattr(os, "link", put(real_link))
    with output_file(str(out), overwrite=overwrite) as dest:
        Path(dest).write_text("the new plan")
        new = (os.stat(dest).st_dev, os.stat(dest).st_ino)
    at = events.index(("put", str(out)))
    assert ("fsync", new) in events[:at]
    assert ("fsync", (os.stat(tmp_path).st_dev, os.stat(tmp_path).st_ino)) in events[at + 1 :]
    assert out.read_text() == "the new plan"


def test_gc_refuses_to_execute_with_plan_and_fsck_says_when_it_exits_3(tmp_path, capsys):
    # `gc --execute --plan FILE` executed and silently wrote no plan; fsck exits 3 on an error without --strict,
    # which the exit codes' text gave to --strict alone
    from pulsarkit.cli import build_parser, main

    root = tmp_path / "d"
    with pk.Store.open(root) as store:
        store.managed_ledger("public/default/persistent/t").add_entry(
            pk.encode_entry(pk.message_metadata("p", 0, 1_700_000_000_000), b"v")
        )
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    rc = main(["gc", str(root), "--execute", "--plan", str(tmp_path / "plan.json")])
    err = capsys.readouterr().err
    assert rc == 1 and "--plan writes a dry run's plan for review" in err and "--from-plan" in err
    assert not (tmp_path / "plan.json").exists()
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()} == before
    text = " ".join(build_parser(["fsck"]).format_help().split())
    assert "exit 3 when it finds an error, --strict or not" in text
    assert (
        "3 the data has problems (scan issues, digest mismatches, unreadable parts): with --strict, and always" in text
    )
