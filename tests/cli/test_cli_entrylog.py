"""``pulsarkit readlog`` and ``pulsarkit readlogmetadata`` over files and directories."""

from __future__ import annotations

import importlib.metadata
import json
import struct
import subprocess
import sys
from pathlib import Path

import pulsarkit as pk
import pyarrow.parquet as pq
import pytest
from pulsarkit.bookkeeper import digest
from pulsarkit.bookkeeper import entrylog as el
from pulsarkit.cli import main


@pytest.fixture
def bookie(tmp_path: Path) -> tuple[Path, list[tuple[int, int, int]]]:
    """A bookie data dir with two ledger dirs; returns it and (ledger, entry, location) per entry."""
    out = []
    md = pk.message_metadata("cli-producer", 0, 1_700_000_000_000)
    for d, lids in (("ledgers-a/current", (1, 2)), ("ledgers-b/current", (3,))):
        with el.EntryLogWriter(tmp_path / "bookie" / d, log_size_limit=2048, fsync=False) as w:
            for lid in lids:
                p = digest.BookieEntryPacker(lid)
                for i in range(6):
                    md.sequence_id = 100 * lid + i
                    md.publish_time = 1_700_000_000_000 + i
                    e = pk.encode_batch(md, [b"a", b"b", b"c"][: 1 + i % 3])
                    out.append((lid, i, w.append(lid, p.pack(e))))
    return tmp_path / "bookie", out


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    o = capsys.readouterr()
    return code, o.out, o.err


def test_readlog_json_over_directories(capsys: pytest.CaptureFixture[str], bookie: tuple[Path, list]) -> None:
    root, entries = bookie
    code, out, err = run(capsys, "readlog", str(root), "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert all(r["type"] == "entry" for r in rows)
    assert sorted((r["ledger_id"], r["entry_id"], r["location"]) for r in rows) == sorted(entries)
    for r in rows:
        assert {
            "log_id",
            "offset",
            "ledger_id",
            "entry_id",
            "size",
            "last_add_confirmed",
            "digest_ok",
        } <= r.keys()
        assert r["offset"] == (r["location"] & 0xFFFFFFFF) - 4 and r["log_id"] == r["location"] >> 32
        assert r["digest_ok"] is True and r["path"].endswith(el.log_file_name(r["log_id"]))
    # Filters, as BookKeeper's -l/-e/-sp/-ep.
    code, out, _ = run(capsys, "readlog", str(root), "--json", "-l", "2", "-e", "3")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["ledger_id"], r["entry_id"]) for r in rows] == [(2, 3)]
    one = root / "ledgers-a" / "current" / "0.log"
    code, out, _ = run(capsys, "readlog", str(one), "--json", "-sp", "1100", "-ep", "1300")
    offs = [json.loads(line)["offset"] for line in out.splitlines()]
    all_offs = [r.offset for r in el.EntryLogReader(one).scan(0)]
    sizes = {r.offset: r.size for r in el.EntryLogReader(one).scan(0)}
    assert offs == [o for o in all_offs if o <= 1300 and o + sizes[o] + 3 >= 1100] and offs


def test_readlog_decode_and_human_output(capsys: pytest.CaptureFixture[str], bookie: tuple[Path, list]) -> None:
    root, _ = bookie
    log = root / "ledgers-b" / "current"
    code, out, _ = run(capsys, "readlog", str(log), "--json", "--decode", "-m")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["sequence_id"] for r in rows] == [300 + i for i in range(6)]
    assert [r["num_messages"] for r in rows] == [1 + i % 3 for i in range(6)]
    assert all(r["producer_name"] == "cli-producer" and r["decode_error"] is None for r in rows)
    assert [r["publish_time"] for r in rows] == [1_700_000_000_000 + i for i in range(6)]
    assert pk.Entry.parse(bytes.fromhex(rows[0]["payload_hex"])).metadata.sequence_id == 300
    code, out, _ = run(capsys, "readlog", str(log), "--decode", "-m")
    assert code == 0
    assert "--------- Lid=3, Eid=0, ByteOffset=1024, EntrySize=" in out
    assert "LastConfirmed:  -1" in out and "Digest:         CRC32C ok" in out
    assert "Producer:       cli-producer  SequenceId: 300  NumMessages: 1" in out
    assert "PublishTime:    1700000000000 (2023-11-14T22:13:20.000Z)" in out
    assert "Data:           " in out


def test_readlog_reports_corruption(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = digest.BookieEntryPacker(9)
    with el.EntryLogWriter(tmp_path, fsync=False, seal_on_close=False) as w:
        for i in range(4):
            w.append(9, p.pack(b"payload-%d" % i))
    f = tmp_path / "0.log"
    img = bytearray(f.read_bytes())
    img[1024 + 4 + 40] ^= 1  # entry 0: bad digest
    f.write_bytes(bytes(img[:-3]))  # entry 3: torn
    code, out, _ = run(capsys, "readlog", str(f), "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["type"], r["entry_id"], r["digest_ok"]) for r in rows[:3]] == [
        ("entry", 0, False),
        ("entry", 1, True),
        ("entry", 2, True),
    ]
    assert rows[3]["type"] == "issue" and rows[3]["issue"] == "torn_tail" and rows[3]["offset"] == 1024 + 3 * 49
    code, out, _ = run(capsys, "readlog", str(f), "--strict")
    assert code == 3
    assert "Digest:         CRC32C MISMATCH" in out
    assert f"!!! torn_tail at offset {1024 + 3 * 49}" in out
    assert "End of entry log 0: 3 records, 1 issue(s)" in out


def test_readlog_parquet(capsys: pytest.CaptureFixture[str], bookie: tuple[Path, list], tmp_path: Path) -> None:
    root, entries = bookie
    out_file = tmp_path / "out.parquet"
    code, out, _ = run(capsys, "readlog", str(root), "--parquet", str(out_file), "--decode")
    assert code == 0 and out == ""
    t = pq.read_table(out_file)
    assert t.num_rows == len(entries)
    assert {
        "log_id",
        "offset",
        "ledger_id",
        "entry_id",
        "payload",
        "path",
        "sequence_id",
        "publish_time",
    } <= set(t.column_names)
    msgs = pk.bulk.explode_messages(t.column("payload").combine_chunks())
    assert msgs.num_rows == sum(1 + i % 3 for _, i, _ in entries)
    empty = tmp_path / "empty.parquet"
    assert run(capsys, "readlog", str(root), "-l", "12345", "--parquet", str(empty), "--no-payload")[0] == 0
    assert pq.read_table(empty).num_rows == 0


def test_readlogmetadata(capsys: pytest.CaptureFixture[str], bookie: tuple[Path, list], tmp_path: Path) -> None:
    root, _entries = bookie
    code, out, _ = run(capsys, "readlogmetadata", str(root), "--json")
    assert code == 0
    objs = [json.loads(line) for line in out.splitlines()]
    assert len(objs) == len(el.find_entry_logs(root))
    total = 0
    for o in objs:
        assert {"log_id", "total_size", "remaining_size", "ledgers"} <= o.keys()
        assert o["total_size"] == o["remaining_size"] == sum(o["ledgers"].values())
        assert o["from_index"] is True
        m = el.read_entry_log_metadata(o["path"], use_index=False)
        assert {int(k): v for k, v in o["ledgers"].items()} == m.ledgers
        total += o["total_size"]
    scanned = pk.bookkeeper.scan_entry_logs(root).read_all()
    assert total == sum(s + 4 for s in scanned.column("size").to_pylist())
    code, out, _ = run(capsys, "readlogmetadata", str(root / "ledgers-b"), "--no-index")
    assert "from scan (requested)" in out and "--------- Lid=3, TotalSizeOfEntriesOfLedger=" in out
    pf = tmp_path / "meta.parquet"
    assert run(capsys, "readlogmetadata", str(root), "--parquet", str(pf))[0] == 0
    t = pq.read_table(pf)
    assert sorted(set(t.column("ledger_id").to_pylist())) == [1, 2, 3]


def test_readlogmetadata_falls_back_on_a_lying_header(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with el.EntryLogWriter(tmp_path, fsync=False) as w:
        w.append(4, struct.pack(">qq", 4, 0) + b"x" * 30)
    f = tmp_path / "0.log"
    img = f.read_bytes()
    f.write_bytes(img[:16] + struct.pack(">i", 0) + img[20:])  # header says zero ledgers
    _code, out, _ = run(capsys, "readlogmetadata", str(f), "--json")
    o = json.loads(out)
    assert o["from_index"] is False and "0 ledgers" in o["fallback_reason"] and o["ledgers"] == {"4": 50}


def test_errors_usage_and_progress(capsys: pytest.CaptureFixture[str], bookie: tuple[Path, list]) -> None:
    root, entries = bookie
    code, _, err = run(capsys, "readlog", str(root / "missing"))
    assert code == 1 and "No such file or directory" in err
    assert run(capsys)[0] == 2
    with pytest.raises(SystemExit) as e:
        main(["readlog", str(root), "--json", "--parquet", "x.parquet"])
    assert e.value.code == 2
    capsys.readouterr()
    code, out, err = run(capsys, "readlog", str(root), "--json", "--progress")
    assert code == 0 and len(out.splitlines()) == len(entries)
    assert "readlog: 100.0%" in err


def test_console_script(bookie: tuple[Path, list]) -> None:
    root, _entries = bookie
    eps = importlib.metadata.entry_points(group="console_scripts")
    assert any(ep.name == "pulsarkit" and ep.value == "pulsarkit.__main__:main" for ep in eps)
    r = subprocess.run(
        [sys.executable, "-m", "pulsarkit.cli", "readlogmetadata", str(root), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert sum(len(json.loads(line)["ledgers"]) for line in r.stdout.splitlines()) >= 3


def test_mac_password_from_env_or_file_never_echoed(capsys, tmp_path, monkeypatch) -> None:
    """A MAC-digest ledger verifies with the password from --password-env or --password-file, so it
    need not appear on the command line; a wrong one is a digest problem, and the password never
    shows in any output."""
    secret = "s3cret-pw"
    logs = tmp_path / "bk" / "current"
    with el.EntryLogWriter(logs, fsync=False) as w:
        p = digest.BookieEntryPacker(9, "MAC", secret.encode())
        for i in range(3):
            w.append(9, p.pack(pk.encode_entry(pk.message_metadata("p", i, 1), b"x")))
    (tmp_path / "pw").write_text(secret + "\n")
    monkeypatch.setenv("PK_TEST_PW", secret)
    for opt in (["--password-env", "PK_TEST_PW"], ["--password-file", str(tmp_path / "pw")]):
        code, out, err = run(capsys, "readlog", str(logs), "--digest-type", "MAC", "--json", "--strict", *opt)
        assert code == 0, err
        rows = [json.loads(line) for line in out.splitlines()]
        assert len(rows) == 3 and all(r["digest_ok"] for r in rows)
        assert secret not in out + err
    monkeypatch.setenv("PK_TEST_PW", "wrong")
    code, out, err = run(
        capsys,
        "readlog",
        str(logs),
        "--digest-type",
        "MAC",
        "--json",
        "--strict",
        "--password-env",
        "PK_TEST_PW",
    )
    assert code == 3 and not any(json.loads(line)["digest_ok"] for line in out.splitlines())
    code, out, err = run(capsys, "readlog", str(logs), "--password-env", "PK_NOT_SET_ANYWHERE")
    assert code == 1 and "PK_NOT_SET_ANYWHERE is not set" in err


def test_human_output_ends_with_totals_across_files(capsys, bookie) -> None:
    root, entries = bookie
    code, out, _ = run(capsys, "readlog", str(root))
    logs = len(el.find_entry_logs(root))
    assert code == 0 and out.splitlines()[-1] == f"Total: {logs} entry log(s), {len(entries)} records, 0 issue(s)"
    code, out, _ = run(capsys, "readlogmetadata", str(root))
    assert code == 0 and out.splitlines()[-1].startswith(f"Total: {logs} entry log(s), total_size=")


def test_readlogmetadata_live_and_dead_bytes_from_the_metadata_store(capsys, tmp_path) -> None:
    """With --metadata-dir, each log's bytes split into ledgers the metadata still knows (live) and
    deleted ones (dead: what bookie GC reclaims)."""
    with pk.Store.open(tmp_path / "d", sync=False) as store:
        keep = store.managed_ledger("public/default/persistent/keep")
        drop = store.managed_ledger("public/default/persistent/drop")
        for i in range(5):
            keep.add_entry(pk.encode_entry(pk.message_metadata("p", i, 1), b"k" * 100))
            drop.add_entry(pk.encode_entry(pk.message_metadata("p", i, 1), b"d" * 300))
        dropped = drop.current_ledger_id
        store.flush()
        drop.close()
        store.delete_ledger(dropped)
    current, metadata = str(tmp_path / "d" / "bookie" / "current"), str(tmp_path / "d" / "metadata")
    code, out, _ = run(capsys, "readlogmetadata", current, "--metadata-dir", metadata, "--json")
    assert code == 0
    (obj,) = [json.loads(line) for line in out.splitlines()]
    sizes = {int(k): v for k, v in obj["ledgers"].items()}
    assert obj["dead_size"] == sizes[dropped] > 0
    assert obj["live_size"] == sum(v for k, v in sizes.items() if k != dropped) > 0
    code, out, _ = run(capsys, "readlogmetadata", current, "--metadata-dir", metadata)
    assert f"live={obj['live_size']} dead={obj['dead_size']}" in out.splitlines()[-1]


def test_an_unreadable_directory_says_so(capsys, caplog, bookie, monkeypatch) -> None:
    """A directory that cannot be listed (a chmod 000 one, as a user; simulated here, since root reads
    anything) is named as unreadable, not reported as holding no entry logs; one below the given
    directory is skipped with a warning, and the logs elsewhere still read."""
    import os

    root, entries = bookie
    real = os.scandir
    denied = {os.path.abspath(root), os.path.abspath(root / "ledgers-b")}

    def scandir(path="."):
        if os.path.abspath(path) in denied:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    for command in ("readlog", "readlogmetadata"):
        code, out, err = run(capsys, command, str(root))
        assert code != 0 and out == ""
        assert f"{root}: directory cannot be read: Permission denied" in err and "no entry logs" not in err
    denied.discard(os.path.abspath(root))
    caplog.set_level("WARNING", logger="pulsarkit")
    code, out, err = run(capsys, "readlog", str(root), "--json")
    assert code == 0
    assert {json.loads(line)["ledger_id"] for line in out.splitlines()} == {1, 2}  # ledgers-b's 3 unreadable
    assert "ledgers-b: directory cannot be read" in caplog.text + err


def test_readlogmetadata_names_the_preallocated_empty_log(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A bookie keeps its next entry log preallocated and empty (a real standalone's ``1.log``, 0 bytes): that is
    said, never "corrupt input", and ``--strict`` does not fail on it; a log cut inside its header still is damage."""
    with el.EntryLogWriter(tmp_path, fsync=False) as w:
        w.append(4, struct.pack(">qq", 4, 0) + b"x" * 30)
    (tmp_path / "1.log").write_bytes(b"")
    code, out, _ = run(capsys, "readlogmetadata", str(tmp_path), "--strict")
    assert code == 0 and "1.log" in out and "empty, the bookie's preallocated next log" in out
    assert "corrupt" not in out and "!!!" not in out
    code, out, _ = run(capsys, "readlogmetadata", str(tmp_path), "--json")
    empty = [json.loads(line) for line in out.splitlines() if json.loads(line)["log_id"] == 1]
    assert empty == [
        {
            "log_id": 1,
            "path": str(tmp_path / "1.log"),
            "total_size": 0,
            "remaining_size": 0,
            "usage": 0.0,
            "ledgers": {},
            "preallocated": True,
            "issues": [],
        }
    ]
    pf = tmp_path.parent / "meta.parquet"
    assert run(capsys, "readlogmetadata", str(tmp_path), "--parquet", str(pf))[0] == 0
    assert "preallocated, empty" in pq.read_table(pf).column("fallback_reason").to_pylist()
    (tmp_path / "1.log").write_bytes(b"BKLO\x00")  # cut inside the header: damage
    code, out, _ = run(capsys, "readlogmetadata", str(tmp_path), "--strict")
    assert code == 3 and "!!!" in out
