"""Opening a RocksDB database pulsarkit must not touch: damage is an error naming where it is, never
a silently shorter read (issue 21 item 4: 400 flipped bytes in a metadata store's write-ahead log
made most topics vanish with exit 0)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import rocksdict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulsarkit.bookkeeper import key_value_storage as kv
from pulsarkit.errors import MetadataStoreError, PulsarkitError

N = 200


def _crashed_writer(path: Path, n: int = N) -> Path:
    """A database whose writes are all still in its write-ahead log: the writer exits without
    closing, as a killed broker leaves its metadata store."""
    code = (
        "import os, sys\n"
        "from pulsarkit.bookkeeper import key_value_storage as kv\n"
        "db = kv.open_writable(sys.argv[1])\n"
        f"for i in range({n}):\n"
        "    db[b'/k/%04d' % i] = b'v%d' % i * 20\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def wal_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _crashed_writer(tmp_path_factory.mktemp("kv") / "db")


def _wal(db: Path) -> Path:
    (log,) = glob.glob(str(db / "*.log"))
    return Path(log)


def _damaged_copy(src: Path, dst: Path, start: int, length: int) -> Path:
    shutil.copytree(src, dst)
    log = _wal(dst)
    b = bytearray(log.read_bytes())
    for i in range(start, min(start + length, len(b))):
        b[i] ^= 0xFF
    log.write_bytes(bytes(b))
    return dst


def _default_rocksdb_keys(db: Path, tmp: Path) -> int:
    """What RocksDB's default recovery (point in time) reads of the same copy."""
    copy = tmp / "default"
    shutil.copytree(db, copy)
    d = rocksdict.Rdict(str(copy), rocksdict.Options(raw_mode=True), access_type=rocksdict.AccessType.read_only())
    try:
        return sum(1 for _ in d.keys())
    finally:
        d.close()


def test_an_intact_write_ahead_log_is_read_whole(wal_db: Path) -> None:
    assert kv.wal_damage(str(_wal(wal_db))) is None
    assert [k for k, _ in kv.read_all(wal_db)] == [b"/k/%04d" % i for i in range(N)]


def test_flipped_bytes_in_the_write_ahead_log_are_an_error_with_the_offset(wal_db: Path, tmp_path: Path) -> None:
    bad = _damaged_copy(wal_db, tmp_path / "bad", 4000, 400)
    assert _default_rocksdb_keys(bad, tmp_path) < N  # what used to be read, silently
    damage = kv.wal_damage(str(_wal(bad)))
    assert damage is not None and 3900 <= damage.offset <= 4000 and damage.reason == "checksum mismatch"
    assert damage.records_after > 100  # intact records after the damage that a plain read drops
    with pytest.raises(MetadataStoreError, match=rf"damaged at offset {damage.offset} .*refusing") as e:
        kv.ReadOnlyCopy(bad, error=MetadataStoreError, what="metadata store")
    assert str(bad) in str(e.value) and "000" in str(e.value)
    assert sorted(os.listdir(bad)) == sorted(os.listdir(wal_db))  # the original is never opened


def test_a_torn_last_record_is_a_crashed_writer_not_damage(wal_db: Path, tmp_path: Path) -> None:
    torn = tmp_path / "torn"
    shutil.copytree(wal_db, torn)
    log = _wal(torn)
    log.write_bytes(log.read_bytes()[:-30])  # the last write cut short
    assert kv.wal_damage(str(log)) is None
    keys = [k for k, _ in kv.read_all(torn)]
    assert keys == [b"/k/%04d" % i for i in range(N - 1)]


def test_a_damaged_table_file_is_an_error_not_the_end_of_the_iteration(tmp_path: Path) -> None:
    db = kv.open_writable(str(tmp_path / "s"))
    for i in range(2000):
        db[b"/k/%05d" % i] = bytes([i % 251]) * 100
    db.flush()
    db.close()
    (sst,) = glob.glob(str(tmp_path / "s" / "*.sst"))
    b = bytearray(Path(sst).read_bytes())
    for i in range(len(b) // 3, len(b) // 3 + 100):
        b[i] ^= 0xFF
    Path(sst).write_bytes(bytes(b))
    with pytest.raises(PulsarkitError, match=r"cannot be read to its end: Corruption") as e:
        kv.read_all(tmp_path / "s")
    assert "pulsarkit-rocksdb-" not in str(e.value) and os.path.basename(sst) in str(e.value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    start=st.integers(0, 20_000),
    mode=st.sampled_from(["flip", "truncate", "zero"]),
    length=st.integers(1, 600),
    xor=st.integers(1, 255),
)
def test_any_damage_is_an_error_or_leaves_every_write_before_it(
    wal_db: Path, tmp_path: Path, start: int, mode: str, length: int, xor: int
) -> None:
    """Fuzz: mutated or truncated logs. Either a typed error, or every write whose record ends
    before the first changed byte is read back (only a torn tail may go); the scanner never raises."""
    buf = _wal(wal_db).read_bytes()
    start %= len(buf)
    # Each put of the crashed writer is one write batch in one full record, in key order.
    ends = [off + 7 + len(p) for off, _t, p, _r in kv._wal_records(buf) if p is not None]
    assert len(ends) == N
    d = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        shutil.copytree(wal_db, d / "db")
        b = bytearray(buf)
        if mode == "truncate":
            b = b[:start]
        else:
            for i in range(start, min(start + length, len(b))):
                b[i] = 0 if mode == "zero" else b[i] ^ xor
        _wal(d / "db").write_bytes(bytes(b))
        kv.wal_damage(str(_wal(d / "db")))
        try:
            keys = {k for k, _ in kv.read_all(d / "db")}
        except PulsarkitError:
            return
        assert {b"/k/%04d" % i for i, end in enumerate(ends) if end <= start} <= keys
        if mode != "truncate" and start + length < ends[-2]:
            # Damage with intact writes after it is never read past: only a torn tail may be dropped.
            assert {b"/k/%04d" % i for i in range(N - 1)} <= keys
    finally:
        shutil.rmtree(d)
