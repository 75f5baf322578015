"""BookKeeper entry logs and bookie entry digests: writer, reader, scanner, Arrow scan, corruption.

Byte layouts are checked against independent Python decoders (struct, zlib, hmac, crc32c) here; the
Java interop tests check the same files against BookKeeper itself.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import crc32c as crc32c_mod
import pulsarkit as pk
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulsarkit.bookkeeper import digest
from pulsarkit.bookkeeper import entrylog as el

# ------------------------------------------------------------------------------------------------
# helpers


def make_entry(lid: int, eid: int, size: int) -> bytes:
    """``[lid][eid]`` + 0xdd filler, like BookKeeper's EntryLogTestUtils.makeEntry."""
    return struct.pack(">qq", lid, eid) + b"\xdd" * max(0, size - 16)


def records_py(img: bytes, start: int = 1024) -> list[tuple[int, int, int, bytes]]:
    """Independent decoder of a clean default log: (offset, ledger, entry, data) up to the ledgers map."""
    out = []
    pos = start
    while pos + 4 <= len(img):
        (n,) = struct.unpack_from(">i", img, pos)
        if n <= 0:
            break
        lid, eid = struct.unpack_from(">qq", img, pos + 4)
        if lid == -1:
            break
        out.append((pos, lid, eid, img[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return out


def ledgers_map_py(img: bytes) -> dict[int, int]:
    _, _, off, count = struct.unpack_from(">4siqi", img, 0)
    out: dict[int, int] = {}
    pos = off
    while pos + 4 <= len(img):
        (n,) = struct.unpack_from(">i", img, pos)
        if n <= 0:
            break
        lid, eid, k = struct.unpack_from(">qqi", img, pos + 4)
        assert (lid, eid) == (-1, -2)
        assert n == 20 + 16 * k and k <= 10000
        for i in range(k):
            lg, sz = struct.unpack_from(">qq", img, pos + 24 + 16 * i)
            out[lg] = sz
        pos += 4 + n
    assert len(out) == count
    return out


def write_log(d: Path, entries: list[tuple[int, int, int]], **kw: object) -> list[int]:
    kw.setdefault("fsync", False)
    with el.EntryLogWriter(d, **kw) as w:  # type: ignore[arg-type]
        return [w.append(lid, make_entry(lid, eid, n)) for lid, eid, n in entries]


# ------------------------------------------------------------------------------------------------
# digests


PAYLOAD = b"\x0e\x01" + b"pulsar entry bytes" * 3


def _expected_digest(kind: str, header: bytes, payload: bytes, password: bytes) -> bytes:
    if kind == "CRC32C":
        return struct.pack(">I", crc32c_mod.crc32c(header + payload))
    if kind == "CRC32":
        return struct.pack(">q", zlib.crc32(header + payload))
    if kind == "MAC":
        key = hashlib.sha1(b"mac" + password).digest()
        return hmac.new(key, header + payload, hashlib.sha1).digest()
    return b""


@pytest.mark.parametrize("kind", digest.DIGEST_TYPES)
def test_pack_matches_an_independent_digest(kind: str) -> None:
    pw = b"secret"
    stored = digest.pack_entry(7, 3, PAYLOAD, last_add_confirmed=2, length=1000, digest_type=kind, password=pw)
    header = struct.pack(">qqqq", 7, 3, 2, 1000)
    n = digest.digest_length(kind)
    assert n == {"CRC32C": 4, "CRC32": 8, "MAC": 20, "DUMMY": 0}[kind]
    assert stored == header + _expected_digest(kind, header, PAYLOAD, pw) + PAYLOAD
    e = digest.unpack_entry(stored, kind, pw, ledger_id=7, entry_id=3)
    assert e == digest.BookieEntry(7, 3, 2, 1000, PAYLOAD)
    assert digest.unpack_entry(stored, kind, verify=False) == e


@pytest.mark.parametrize("kind", ["CRC32C", "CRC32", "MAC"])
def test_bad_digests_raise_typed_errors(kind: str) -> None:
    stored = bytearray(digest.pack_entry(1, 0, PAYLOAD, digest_type=kind, password=b"pw"))
    stored[-1] ^= 0x01
    with pytest.raises(el.DigestMismatchError) as ei:
        digest.unpack_entry(bytes(stored), kind, b"pw")
    err = ei.value
    assert isinstance(err, pk.ChecksumMismatchError) and isinstance(err, pk.PulsarkitError)
    assert isinstance(err, ValueError)
    assert err.offset == 32 and err.ledger_id == 1 and err.entry_id == 0
    assert len(err.stored) == digest.digest_length(kind) and err.stored != err.computed


def test_digest_id_checks_short_input_and_detection() -> None:
    stored = digest.pack_entry(5, 9, b"x", length=1)
    with pytest.raises(pk.CorruptEntryError) as ei:
        digest.unpack_entry(stored, ledger_id=6)
    assert ei.value.offset == 0
    with pytest.raises(pk.CorruptEntryError) as ei:
        digest.unpack_entry(stored, entry_id=8)
    assert ei.value.offset == 8
    with pytest.raises(pk.CorruptEntryError):
        digest.unpack_entry(stored[:35])
    mac = digest.pack_entry(5, 9, b"x", digest_type="MAC", password=b"a")
    with pytest.raises(el.DigestMismatchError):
        digest.unpack_entry(mac, "MAC", b"b")
    assert digest.detect_digest_type(stored) == "CRC32C"
    assert digest.detect_digest_type(digest.pack_entry(5, 9, b"x", digest_type="CRC32")) == "CRC32"
    assert digest.detect_digest_type(mac) is None
    assert digest.detect_digest_type(mac, b"a") == "MAC"
    with pytest.raises(pk.PulsarkitError):
        digest.digest_length("SHA256")
    assert digest.mac_key(b"pw") == hashlib.sha1(b"macpw").digest()
    assert digest.master_key(b"pw") == hashlib.sha1(b"ledgerpw").digest()


def test_packer_tracks_lac_and_length() -> None:
    p = digest.BookieEntryPacker(11)
    a, b, c = p.pack_many([b"aa", b"bbb", b"c"])
    got = [digest.unpack_entry(x, ledger_id=11) for x in (a, b, c)]
    assert [(g.entry_id, g.last_add_confirmed, g.length) for g in got] == [(0, -1, 2), (1, 0, 5), (2, 1, 6)]
    d = p.pack(b"dddd")
    assert digest.unpack_entry(d, verify=False)[:4] == (11, 3, 2, 10)


# ------------------------------------------------------------------------------------------------
# writer and reader


def test_layout_rotation_and_last_id(tmp_path: Path) -> None:
    entries = [(1, e, 100) for e in range(10)]
    with el.EntryLogWriter(tmp_path, log_size_limit=1024 + 3 * 104, fsync=False) as w:
        locs = [w.append(lid, make_entry(lid, eid, n)) for lid, eid, n in entries]
        assert w.rotated_log_ids == [0, 1, 2]
        assert w.current_log_id == 3
    assert sorted(os.listdir(tmp_path)) == ["0.log", "1.log", "2.log", "3.log", "lastId"]
    assert (tmp_path / "lastId").read_text() == "3\n"
    assert [el.split_location(x) for x in locs[:4]] == [(0, 1028), (0, 1132), (0, 1236), (1, 1028)]
    for log_id in range(4):
        img = (tmp_path / el.log_file_name(log_id)).read_bytes()
        fp, ver, off, _count = struct.unpack_from(">4siqi", img, 0)
        assert (fp, ver) == (b"BKLO", 1) and img[20:1024] == bytes(1004)
        recs = records_py(img)
        assert [(r[1], r[2]) for r in recs] == [(1, e) for e in range(log_id * 3, min(10, log_id * 3 + 3))]
        assert off == recs[-1][0] + 4 + 100  # the map follows the last record
        assert ledgers_map_py(img) == {1: 104 * len(recs)}
    r = el.EntryLogReader(tmp_path)
    assert r.log_ids() == [0, 1, 2, 3]
    for (lid, eid, n), loc in zip(entries, locs):
        assert r.read(loc, lid, eid) == make_entry(lid, eid, n)
    # A new writer never touches old logs.
    with el.EntryLogWriter(tmp_path, fsync=False) as w:
        assert el.split_location(w.append(2, make_entry(2, 0, 20)))[0] == 4


def test_unsealed_log_and_header_v0(tmp_path: Path) -> None:
    write_log(tmp_path / "a", [(1, 0, 30), (2, 0, 30)], seal_on_close=False)
    r = el.EntryLogReader(tmp_path / "a")
    h = r.header(0)
    assert (h.version, h.ledgers_map_offset, h.ledgers_count) == (1, 0, 0)
    m = r.metadata(0)
    assert not m.from_index and "no ledgers map" in m.fallback_reason
    assert m.ledgers == {1: 34, 2: 34}
    write_log(tmp_path / "b", [(1, 0, 30)], header_version=0)
    r = el.EntryLogReader(tmp_path / "b")
    assert r.header(0).version == 0
    m = r.metadata(0)
    assert not m.from_index and "version 0" in m.fallback_reason and m.ledgers == {1: 34}


def test_read_your_writes_and_errors(tmp_path: Path) -> None:
    w = el.EntryLogWriter(tmp_path, fsync=False, write_buffer_size=1 << 20)
    loc = w.append(3, make_entry(3, 0, 50))
    assert w.read(loc, 3, 0) == make_entry(3, 0, 50)  # still in the buffer
    with pytest.raises(pk.CorruptEntryError):
        w.read(loc, 3, 1)
    w.flush()
    assert el.EntryLogReader(tmp_path).read(loc) == make_entry(3, 0, 50)
    with pytest.raises(pk.PulsarkitError):
        w.append(3, make_entry(4, 0, 50))  # bytes must start with the ledger id
    with pytest.raises(pk.PulsarkitError):
        w.append(3, b"short")
    w.close()
    assert w.closed
    with pytest.raises(ValueError):
        w.append(3, make_entry(3, 1, 50))
    r = el.EntryLogReader(tmp_path)
    with pytest.raises(pk.CorruptEntryError) as ei:
        r.read(el.make_location(0, 1028), 3, 7)
    assert ei.value.offset == 1028
    with pytest.raises(pk.CorruptEntryError):
        r.read(el.make_location(0, 100))  # inside the header
    with pytest.raises(pk.CorruptEntryError):
        r.read(el.make_location(0, 10_000_000))  # past the end
    with pytest.raises(FileNotFoundError) as fe:
        r.read(el.make_location(9, 1028))
    assert fe.value.filename.endswith("9.log")


def test_single_file_reader_and_scan_records(tmp_path: Path) -> None:
    locs = write_log(tmp_path, [(1, 0, 40), (2, 0, 60), (1, 1, 20)])
    r = el.EntryLogReader(tmp_path / "0.log")
    assert r.log_ids() == [0]
    s = r.scan(0)
    recs = list(s)
    assert [(x.ledger_id, x.entry_id, x.size) for x in recs] == [(1, 0, 40), (2, 0, 60), (1, 1, 20)]
    assert [x.location for x in recs] == locs
    assert [x.offset for x in recs] == [1024, 1068, 1132]
    summary = s.summary
    assert summary.ok and summary.records == 3 and summary.format == "default"
    assert summary.ledgers_map_offset == 1156 and dict(summary.ledgers_map) == {1: 68, 2: 64}
    # A renamed copy needs its id.
    (tmp_path / "copy.bin").write_bytes((tmp_path / "0.log").read_bytes())
    with pytest.raises(pk.PulsarkitError):
        el.EntryLogReader(tmp_path / "copy.bin")
    assert el.EntryLogReader(tmp_path / "copy.bin", log_id=0).read(locs[1], 2, 0) == make_entry(2, 0, 60)
    # start/stop select a window of records.
    assert [x.entry_id for x in el.EntryLogReader(tmp_path).scan(0, start=1068, stop=1132)] == [0]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.tuples(st.integers(0, 3), st.integers(16, 600)), min_size=1, max_size=40),
    limit=st.integers(1100, 5000),
)
def test_writer_scan_round_trip(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[tuple[int, int]], limit: int
) -> None:
    d = tmp_path_factory.mktemp("rt")
    nxt = [0, 0, 0, 0]
    written = []
    with el.EntryLogWriter(d, log_size_limit=limit, fsync=False, write_buffer_size=512) as w:
        for lid, n in sizes:
            data = make_entry(lid, nxt[lid], n)
            nxt[lid] += 1
            written.append((w.append(lid, data), lid, data))
    r = el.EntryLogReader(d)
    scanned = []
    for log_id in r.log_ids():
        s = r.scan(log_id)
        scanned += [(x.location, x.ledger_id, x.data) for x in s]
        assert s.summary.ok
        m = r.metadata(log_id)
        assert m.from_index and m.total_size == sum(len(x[2]) + 4 for x in written if x[0] >> 32 == log_id)
    assert scanned == written


# ------------------------------------------------------------------------------------------------
# corruption


@pytest.fixture
def six(tmp_path: Path) -> tuple[Path, bytes]:
    """One unsealed log of six 50-byte entries of ledger 4: records at 1024 + 54k."""
    write_log(tmp_path, [(4, e, 50) for e in range(6)], seal_on_close=False)
    p = tmp_path / "0.log"
    return p, p.read_bytes()


def scan_file(p: Path, log_id: int = 0) -> tuple[list[el.LogRecord], el.ScanSummary]:
    s = el.EntryLogReader(p, log_id=log_id).scan(log_id)
    return list(s), s.summary


def test_truncated_tail(six: tuple[Path, bytes]) -> None:
    p, img = six
    p.write_bytes(img[:-10])
    recs, s = scan_file(p)
    assert [x.entry_id for x in recs] == [0, 1, 2, 3, 4]
    assert [(i.kind, i.offset, i.length) for i in s.issues] == [("torn_tail", 1024 + 5 * 54, 44)]
    assert "torn tail" in s.issues[0].message
    with pytest.raises(pk.CorruptEntryError) as ei:
        el.EntryLogReader(p).read(el.make_location(0, 1024 + 5 * 54 + 4), 4, 5)
    assert ei.value.offset == 1024 + 5 * 54
    # What BookKeeper's scan-based metadata reports for the same file.
    assert el.read_entry_log_metadata(p).ledgers == {4: 5 * 54}


def test_zeroed_and_short_headers(six: tuple[Path, bytes]) -> None:
    p, img = six
    p.write_bytes(bytes(1024) + img[1024:])
    recs, s = scan_file(p)
    assert len(recs) == 6, "a zeroed header must not hide entries"
    assert [(i.kind, i.offset) for i in s.issues] == [("bad_header", 0)]
    assert "zeroed" in s.issues[0].message
    p.write_bytes(img[:700])
    recs, s = scan_file(p)
    assert recs == [] and [(i.kind, i.offset) for i in s.issues] == [("truncated_header", 700)]
    p.write_bytes(b"BKLO")
    recs, s = scan_file(p)
    assert recs == [] and s.issues[0].kind == "truncated_header"


def test_lying_headers(tmp_path: Path) -> None:
    write_log(tmp_path, [(1, 0, 26), (2, 0, 26), (2, 1, 26)])
    p = tmp_path / "0.log"
    good = p.read_bytes()
    cases = {
        "zero ledgers": struct.pack(">qi", 1114, 0),
        "wrong count": struct.pack(">qi", 1114, 7),
        "map offset at an entry": struct.pack(">qi", 1054, 2),
        "map offset past the end": struct.pack(">qi", 1 << 40, 2),
    }
    for why, patch in cases.items():
        p.write_bytes(good[:8] + patch + good[20:])
        m = el.read_entry_log_metadata(p)
        assert not m.from_index, why
        assert m.fallback_reason, why
        assert m.ledgers == {1: 30, 2: 60}, why
        recs, s = scan_file(p)
        assert len(recs) == 3, why
        if why != "zero ledgers":
            assert s.issues and s.issues[0].kind == "bad_header", why


@pytest.mark.parametrize("bad_len", [3, -7, 0, 1_000_000_000])
def test_bad_length_is_reported_and_skipped_precisely(six: tuple[Path, bytes], bad_len: int) -> None:
    p, img = six
    off = 1024 + 2 * 54
    p.write_bytes(img[:off] + struct.pack(">i", bad_len) + img[off + 4 :])
    recs, s = scan_file(p)
    assert [x.entry_id for x in recs] == [0, 1, 3, 4, 5]
    assert [(i.kind, i.offset, i.length) for i in s.issues] == [("corrupt_record", off, 54)]


def test_zeroed_region_and_zero_tail(six: tuple[Path, bytes]) -> None:
    p, img = six
    p.write_bytes(img[:1078] + bytes(108) + img[1186:])
    recs, s = scan_file(p)
    assert [x.entry_id for x in recs] == [0, 3, 4, 5]
    assert [(i.kind, i.offset, i.length) for i in s.issues] == [("corrupt_record", 1078, 108)]
    p.write_bytes(img + bytes(4096))
    recs, s = scan_file(p)
    assert len(recs) == 6 and [(i.kind, i.offset, i.length) for i in s.issues] == [("zero_tail", len(img), 4096)]


def direct_image(entries: list[tuple[int, int, int]], with_map: bool, tail: int) -> tuple[bytes, list[int]]:
    """A file laid out as DirectEntryLogger writes it (4 KiB header + dummy record, 0xF0 padding)."""
    img = bytearray(b"BKLO" + struct.pack(">iqi", 1, 0, 0) + bytes(1004))
    img += struct.pack(">iq", 3068, -1) + bytes(4096 - 1024 - 12)
    locs, sizes = [], {}
    for lid, eid, n in entries:
        locs.append(len(img) + 4)
        img += struct.pack(">i", n) + make_entry(lid, eid, n)
        sizes[lid] = sizes.get(lid, 0) + n + 4
        img += b"\xf0" * (-len(img) % 4096)  # every entry flushed on its own
    if with_map:
        off = len(img)
        img += struct.pack(">iqqi", 20 + 16 * len(sizes), -1, -2, len(sizes))
        for lid, sz in sorted(sizes.items()):
            img += struct.pack(">qq", lid, sz)
        img += b"\xf0" * (-len(img) % 4096)
        img[8:20] = struct.pack(">qi", off, len(sizes))
    return bytes(img) + bytes(tail), locs


@pytest.mark.parametrize("with_map", [False, True])
def test_direct_entry_logger_layout(tmp_path: Path, with_map: bool) -> None:
    entries = [(1, 0, 100), (2, 0, 5000), (1, 1, 16)]
    img, locs = direct_image(entries, with_map, 64 << 10)
    p = tmp_path / "5.log"
    p.write_bytes(img)
    recs, s = scan_file(p, 5)
    assert s.format == "direct" and s.ok and s.zero_tail_offset is not None
    assert [(x.location & 0xFFFFFFFF, x.ledger_id, x.entry_id, x.data) for x in recs] == [
        (loc, lid, eid, make_entry(lid, eid, n)) for loc, (lid, eid, n) in zip(locs, entries)
    ]
    r = el.EntryLogReader(tmp_path)
    for loc, (lid, eid, n) in zip(locs, entries):
        assert r.read(el.make_location(5, loc), lid, eid) == make_entry(lid, eid, n)
    m = r.metadata(5)
    assert m.from_index == with_map and m.ledgers == {1: 124, 2: 5004}


# ------------------------------------------------------------------------------------------------
# crash safety of the writer


_CHILD = textwrap.dedent(
    """
    import sys, struct
    from pulsarkit.bookkeeper import digest
    from pulsarkit.bookkeeper import entrylog as el
    w = el.EntryLogWriter(sys.argv[1], log_size_limit=64 << 10, write_buffer_size=4096)
    p = digest.BookieEntryPacker(int(sys.argv[2]))
    i = 0
    while True:
        locs = w.append_many([(p.ledger_id, p.pack(b"m%06d" % (i + k) * 20)) for k in range(10)])
        i += 10
        if i % 30 == 0:
            w.flush()
            print(i, locs[-1], flush=True)
    """
)


def test_killed_writer_never_loses_flushed_entries(tmp_path: Path) -> None:
    """SIGKILL a writer at random points: every entry acknowledged by a flush is still readable and
    every log scans without error (a torn tail, if any, is reported)."""
    import random

    rnd = random.Random(1234)
    acked: dict[int, tuple[int, int]] = {}  # ledger -> (entries flushed, last location)
    for round_ in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(tmp_path), str(round_)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 30
        want = rnd.randint(1, 12)
        while len(lines) < want and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        time.sleep(rnd.random() * 0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert lines, "the writer never flushed"
        n, loc = map(int, lines[-1].split())
        acked[round_] = (n, loc)
    reader = el.EntryLogReader(tmp_path)
    found: dict[int, set[int]] = {}
    for log_id in reader.log_ids():
        s = reader.scan(log_id)
        for rec in s:
            e = digest.unpack_entry(rec.data, ledger_id=rec.ledger_id, entry_id=rec.entry_id)
            assert e.payload == b"m%06d" % rec.entry_id * 20
            found.setdefault(rec.ledger_id, set()).add(rec.entry_id)
        # A kill right after a rotation can leave the new log shorter than its header: reported, and
        # it holds nothing (nothing in it was ever acknowledged).
        allowed = ("torn_tail", "zero_tail") + (("truncated_header",) if s.summary.records == 0 else ())
        assert all(i.kind in allowed for i in s.summary.issues), s.summary.issues
    for lid, (n, loc) in acked.items():
        assert set(range(n)) <= found[lid], f"ledger {lid} lost flushed entries"
        assert digest.unpack_entry(reader.read(loc, lid, n - 1), verify=False).entry_id == n - 1


# ------------------------------------------------------------------------------------------------
# Arrow scan


def pulsar_entries(n: int) -> list[bytes]:
    md = pk.message_metadata("producer-a", 0, 1_700_000_000_000)
    out = []
    for i in range(n):
        md.sequence_id = i
        out.append(pk.encode_batch(md, [b"m%d-a" % i, b"m%d-b" % i], compression="LZ4"))
    return out


def test_scan_entry_logs_feeds_the_bulk_kernels(tmp_path: Path) -> None:
    entries = pulsar_entries(40)
    bookie = tmp_path / "bookie" / "current"
    with el.EntryLogWriter(bookie, log_size_limit=1024 + 20 * 200, fsync=False) as w:
        p = digest.BookieEntryPacker(77)
        locs = w.append_many((77, x) for x in p.pack_many(entries))
    scan = pk.bookkeeper.scan_entry_logs([tmp_path], batch_rows=7)
    batches = list(scan)
    assert batches and all(b.num_rows <= 7 for b in batches)
    assert all(b.schema == el.entry_log_schema() for b in batches)
    t = pa.Table.from_batches(batches)
    assert t.column("ledger_id").to_pylist() == [77] * 40
    assert t.column("entry_id").to_pylist() == list(range(40))
    assert t.column("location").to_pylist() == locs
    assert t.column("last_add_confirmed").to_pylist() == list(range(-1, 39))
    assert t.column("digest_ok").to_pylist() == [True] * 40
    assert t.column("payload").to_pylist() == entries
    assert t.column("issue").null_count == 40
    assert len(scan.summaries) == len({x >> 32 for x in locs}) and all(s.ok for s in scan.summaries)
    msgs = pk.bulk.explode_messages(t.column("payload").combine_chunks())
    assert msgs.num_rows == 80
    assert msgs.column("payload").to_pylist()[:4] == [b"m0-a", b"m0-b", b"m1-a", b"m1-b"]
    # Zero-copy payloads: views into the mapped files, same bytes, same kernels.
    views = pk.bookkeeper.scan_entry_logs(bookie, payload_type="binary_view").read_all()
    assert views.schema.field("payload").type == pa.binary_view()
    assert views.column("payload").to_pylist() == entries
    assert views.drop_columns("payload").equals(t.drop_columns("payload"))
    vmsgs = pk.bulk.explode_messages(views.column("payload").combine_chunks())
    assert vmsgs.column("payload").equals(msgs.column("payload"))
    with pytest.raises(ValueError):
        pk.bookkeeper.scan_entry_logs(bookie, payload_type="utf8")
    # Byte-bounded batches: each is cut at the first row that takes its payloads to 300 bytes.
    byte_batches = list(pk.bookkeeper.scan_entry_logs(bookie, batch_bytes=300))
    assert sum(b.num_rows for b in byte_batches) == 40 and len(byte_batches) > 1
    for b in byte_batches:
        lens = [len(x) for x in b.column("payload").to_pylist()]
        assert sum(lens[:-1]) < 300


def test_scan_default_batch_bytes_by_payload_type(tmp_path: Path) -> None:
    """Copying scans cut batches at 1 MiB of payloads by default (their output memory is reused while in
    cache), view scans at 8 MiB; the rows are the same either way."""
    p = digest.BookieEntryPacker(5)
    with el.EntryLogWriter(tmp_path, fsync=False, seal_on_close=False) as w:
        for _ in range(1200):
            w.append(5, p.pack(b"x" * 4096))  # 4.7 MiB of payloads
    copied = list(pk.bookkeeper.scan_entry_logs(tmp_path))
    views = list(pk.bookkeeper.scan_entry_logs(tmp_path, payload_type="binary_view"))
    assert [b.num_rows for b in copied] == [256, 256, 256, 256, 176]  # cut at the row reaching 1 MiB
    assert [b.num_rows for b in views] == [1200]
    assert pa.Table.from_batches(copied).column("payload").to_pylist() == [b"x" * 4096] * 1200
    explicit = list(pk.bookkeeper.scan_entry_logs(tmp_path, batch_bytes=8 << 20))
    assert [b.num_rows for b in explicit] == [1200]


def test_scan_reports_bad_digests_and_issue_rows(tmp_path: Path) -> None:
    p = digest.BookieEntryPacker(5)
    with el.EntryLogWriter(tmp_path, fsync=False, seal_on_close=False) as w:
        for i in range(10):
            w.append(5, p.pack(b"payload-%d" % i))
    f = tmp_path / "0.log"
    img = bytearray(f.read_bytes())
    rec = 4 + 32 + 4 + 9
    img[1024 + 3 * rec + 4 + 40] ^= 0xFF  # a payload byte of entry 3
    f.write_bytes(bytes(img[:-5]))  # and a torn tail in entry 9
    t = pk.bookkeeper.scan_entry_logs(f).read_all()
    rows = t.to_pylist()
    entries = [r for r in rows if r["issue"] is None]
    assert [r["entry_id"] for r in entries] == list(range(9))
    assert [r["entry_id"] for r in entries if not r["digest_ok"]] == [3]
    issues = [r for r in rows if r["issue"] is not None]
    assert [(r["issue"], r["offset"], r["ledger_id"]) for r in issues] == [("torn_tail", 1024 + 9 * rec, None)]
    assert "torn tail" in issues[0]["error"]
    without = pk.bookkeeper.scan_entry_logs(f, include_issues=False).read_all()
    assert without.num_rows == 9
    # Other digest types and auto-detection.
    mac = digest.BookieEntryPacker(6, "MAC", b"pw")
    d2 = tmp_path / "mac"
    with el.EntryLogWriter(d2, fsync=False) as w:
        for i in range(3):
            w.append(6, mac.pack(b"x%d" % i))
    assert pk.bookkeeper.scan_entry_logs(d2, "MAC", b"pw").read_all().column("digest_ok").to_pylist() == [True] * 3
    assert pk.bookkeeper.scan_entry_logs(d2, "MAC", b"no").read_all().column("digest_ok").to_pylist() == [False] * 3
    auto = pk.bookkeeper.scan_entry_logs([d2, f], "AUTO", b"pw", include_issues=False).read_all()
    assert set(auto.column("digest_type").to_pylist()) == {"MAC", "CRC32C"}
    dummy = pk.bookkeeper.scan_entry_logs(d2, "DUMMY").read_all()
    assert dummy.column("digest_ok").null_count == 3
    assert dummy.column("payload").to_pylist()[0] == mac_payload_with_digest(d2)


def mac_payload_with_digest(d: Path) -> bytes:
    """Read as DUMMY, the payload starts right after the 32-byte header, i.e. at the MAC digest."""
    rec = next(iter(el.EntryLogReader(d).scan(0)))
    return rec.data[32:]


def test_find_entry_logs(tmp_path: Path) -> None:
    for sub in ("a/current", "b/current"):
        write_log(tmp_path / sub, [(1, 0, 20)])
        write_log(tmp_path / sub, [(1, 1, 20)])
    (tmp_path / "a" / "current" / "notalog.log").write_bytes(b"x")
    found = el.find_entry_logs([tmp_path, tmp_path / "a" / "current" / "0.log"])
    assert [(p.relative_to(tmp_path).as_posix(), i) for p, i in found] == [
        ("a/current/0.log", 0),
        ("a/current/1.log", 1),
        ("b/current/0.log", 0),
        ("b/current/1.log", 1),
    ]
    with pytest.raises(FileNotFoundError):
        el.find_entry_logs([tmp_path / "missing"])
    with pytest.raises(ValueError):
        el.find_entry_logs([tmp_path / "a" / "current" / "lastId"])


def test_append_entries_takes_the_ledger_id_from_each_entry(tmp_path: Path) -> None:
    """``append_entries`` writes the same log as ``append_many`` with the pairs spelled out, and an
    entry too short to hold its ledger id is a typed error naming what it needs."""
    a_ids = digest.BookieEntryPacker(5).pack_many([b"a%d" % i for i in range(30)])
    b_ids = digest.BookieEntryPacker(9).pack_many([b"b%d" % i for i in range(30)])
    stored = [x for pair in zip(a_ids, b_ids) for x in pair]
    with el.EntryLogWriter(tmp_path / "one", log_size_limit=1024 + 25 * 40, fsync=False) as w:
        locs_one = w.append_entries(stored)
    with el.EntryLogWriter(tmp_path / "two", log_size_limit=1024 + 25 * 40, fsync=False) as w:
        locs_two = w.append_many([(int.from_bytes(x[:8], "big"), x) for x in stored])
    assert locs_one == locs_two and len({loc >> 32 for loc in locs_one}) > 1  # rotated like append_many
    logs = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert logs == sorted(p.name for p in (tmp_path / "two").iterdir())
    for name in logs:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    with el.EntryLogWriter(tmp_path / "three", fsync=False) as w, pytest.raises(pk.PulsarkitError, match="at least"):
        w.append_entries([stored[0], b"short"])
