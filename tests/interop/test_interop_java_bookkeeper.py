"""Interop with BookKeeper's own Java code (bookkeeper-server from Maven Central):

* entry logs written by pulsarkit are read by Java's DefaultEntryLogger (readEntry with id checks,
  scanEntryLog, getEntryLogMetadata and the ledgers map alone);
* logs written by Java's DefaultEntryLogger and DirectEntryLogger (O_DIRECT via native-io, on a
  disk-backed directory under the repository's target/) are read by pulsarkit record for record;
* bookie entries packed by pulsarkit verify in Java's DigestManager and vice versa, byte for byte,
  for CRC32C, CRC32, MAC and DUMMY.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pulsarkit as pk
import pytest
from oracle import REPO, TESTS, JavaError, JavaOracle
from pulsarkit.bookkeeper import digest
from pulsarkit.bookkeeper import entrylog as el

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def bk() -> Iterator[JavaOracle]:
    with JavaOracle(TESTS / "java" / "bookkeeper-oracle", "org.apache.bookkeeper.bookie.Oracle") as o:
        yield o


@pytest.fixture
def ledger_dir() -> Iterator[Path]:
    """A ledger directory on disk (O_DIRECT needs a real file system, not tmpfs); logs go in current/."""
    base = REPO / "target" / "interop-bookkeeper"
    base.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(dir=base))
    (d / "current").mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def pulsar_payloads(n: int, seed: int = 0) -> list[bytes]:
    """Pulsar entries as a broker stores them: batches, a codec, some with broker entry metadata."""
    md = pk.message_metadata(f"producer-{seed}", 0, 1_700_000_000_000 + seed)
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        md.sequence_id = i
        body = rnd.randbytes(200 + i * 37 % 1000)  # incompressible, so entries span several logs
        e = pk.encode_batch(md, [b"%d-%d-" % (seed, i) + body, b"tail"], compression="ZSTD")
        if i % 3 == 0:
            e = pk.add_broker_entry_metadata(e, broker_timestamp=1_700_000_000_500 + i, index=i)
        out.append(e)
    return out


def stored_entries(ledgers: dict[int, int]) -> list[tuple[int, int, bytes]]:
    """(ledger, entry, stored bytes) interleaved across ledgers, as a bookie receives them."""
    packers = {lid: digest.BookieEntryPacker(lid) for lid in ledgers}
    payloads = {lid: pulsar_payloads(n, lid) for lid, n in ledgers.items()}
    out = []
    for i in range(max(ledgers.values())):
        for lid, n in ledgers.items():
            if i < n:
                out.append((lid, i, packers[lid].pack(payloads[lid][i])))
    return out


def java_meta(m: dict) -> dict:
    return {
        "total": m["totalSize"],
        "remaining": m["remainingSize"],
        "ledgers": {int(k): v for k, v in m["ledgers"].items()},
    }


def py_meta(m: el.EntryLogMetadata) -> dict:
    return {"total": m.total_size, "remaining": m.remaining_size, "ledgers": m.ledgers}


def test_oracle_is_bookkeeper(bk: JavaOracle) -> None:
    info = bk.call("info")
    assert "bookkeeper-server-4.17" in info["jar"]


# ------------------------------------------------------------------------------------------------
# pulsarkit writes, Java reads


@pytest.mark.parametrize("seal_on_close", [True, False])
def test_java_reads_pulsarkit_entry_logs(bk: JavaOracle, ledger_dir: Path, seal_on_close: bool) -> None:
    entries = stored_entries({3: 25, 10: 12, 1 << 40: 8})
    cur = ledger_dir / "current"
    with el.EntryLogWriter(cur, log_size_limit=8 << 10, seal_on_close=seal_on_close, write_buffer_size=4096) as w:
        locs = [w.append(lid, data) for lid, _, data in entries]
        rotated = list(w.rotated_log_ids)
    log_ids = el.EntryLogReader(cur).log_ids()
    assert len(log_ids) >= 3 and rotated == log_ids[:-1]
    before = sorted(os.listdir(cur))

    reads = [{"ledger": lid, "entry": eid, "location": loc} for (lid, eid, _), loc in zip(entries, locs)]
    got = bk.call("defaultRead", dir=str(ledger_dir), reads=reads)
    assert [bytes.fromhex(g["data"]) for g in got] == [data for _, _, data in entries]
    # Java's id check rejects a location that holds another entry, as ours does.
    wrong = bk.call("defaultRead", dir=str(ledger_dir), reads=[{"ledger": 3, "entry": 1, "location": locs[0]}])
    assert "error" in wrong[0]
    with pytest.raises(pk.CorruptEntryError):
        el.EntryLogReader(cur).read(locs[0], 3, 1)

    reader = el.EntryLogReader(cur)
    for log_id in log_ids:
        java_recs = bk.call("defaultScan", dir=str(ledger_dir), logId=log_id)
        ours = [(r.ledger_id, r.offset, r.data) for r in reader.scan(log_id)]
        assert [(r["ledger"], r["offset"], bytes.fromhex(r["data"])) for r in java_recs] == ours
        jm = bk.call("defaultMetadata", dir=str(ledger_dir), logId=log_id)
        m = reader.metadata(log_id)
        assert java_meta(jm["metadata"]) == py_meta(m)
        sealed = log_id in rotated or seal_on_close
        assert m.from_index == sealed
        if sealed:
            # Java reads pulsarkit's ledgers map itself, without falling back to a scan.
            assert jm["fromIndex"] is not None, jm.get("indexError")
            assert java_meta(jm["fromIndex"]) == py_meta(m)
        else:
            assert jm["fromIndex"] is None
    assert sorted(os.listdir(cur)) == before, "reading must not change the directory"


# ------------------------------------------------------------------------------------------------
# Java writes, pulsarkit reads


def test_pulsarkit_reads_java_default_entry_logs(bk: JavaOracle, ledger_dir: Path) -> None:
    entries = stored_entries({7: 30, 8: 20})
    res = bk.call(
        "defaultWrite",
        dir=str(ledger_dir),
        logSizeLimit=6 << 10,
        entries=[{"ledger": lid, "data": data} for lid, _, data in entries],
        rollover=True,
    )
    locs = res["locations"]
    cur = ledger_dir / "current"
    reader = el.EntryLogReader(cur)
    log_ids = reader.log_ids()
    assert len(log_ids) >= 3
    assert (cur / "lastId").read_text() == f"{log_ids[-1]:x}\n"
    for (lid, eid, data), loc in zip(entries, locs):
        assert reader.read(loc, lid, eid) == data
        e = digest.unpack_entry(data, ledger_id=lid, entry_id=eid)
        assert pk.Entry.parse(e.payload).metadata.producer_name == f"producer-{lid}"
    # Every log Java rotated has a ledgers map in its header; the last, empty one has none.
    by_log: dict[int, list[int]] = {}
    for loc in locs:
        by_log.setdefault(loc >> 32, []).append(loc)
    for log_id in log_ids:
        h = reader.header(log_id)
        assert h.fingerprint_ok and h.version == 1 and h.format == "default"
        s = reader.scan(log_id)
        recs = list(s)
        assert s.summary.ok, s.summary.issues
        assert [r.location for r in recs] == by_log.get(log_id, [])
        java_recs = bk.call("defaultScan", dir=str(ledger_dir), logId=log_id)
        assert [(r["ledger"], r["offset"]) for r in java_recs] == [(r.ledger_id, r.offset) for r in recs]
        m = reader.metadata(log_id)
        jm = bk.call("defaultMetadata", dir=str(ledger_dir), logId=log_id)
        assert py_meta(m) == java_meta(jm["metadata"])
        if recs:
            assert m.from_index and h.ledgers_map_offset > 0
    # The Arrow scan sees the same entries and verifies every digest.
    t = pk.bookkeeper.scan_entry_logs(cur).read_all()
    assert t.column("location").to_pylist() == locs
    assert t.column("digest_ok").to_pylist() == [True] * len(locs)
    assert t.column("payload").to_pylist() == [digest.unpack_entry(d, verify=False).payload for _, _, d in entries]


def test_truncated_java_log_same_records_plus_report(bk: JavaOracle, ledger_dir: Path) -> None:
    entries = stored_entries({5: 12})
    bk.call("defaultWrite", dir=str(ledger_dir), entries=[{"ledger": lid, "data": d} for lid, _, d in entries])
    f = ledger_dir / "current" / "0.log"
    img = f.read_bytes()
    f.write_bytes(img[:-10])
    java_recs = bk.call("defaultScan", dir=str(ledger_dir), logId=0)
    s = el.EntryLogReader(f).scan(0)
    ours = list(s)
    assert [(r["ledger"], r["offset"]) for r in java_recs] == [(r.ledger_id, r.offset) for r in ours]
    assert len(ours) == 11
    assert [(i.kind, i.offset) for i in s.summary.issues] == [("torn_tail", ours[-1].offset + 4 + ours[-1].size)]
    jm = bk.call("defaultMetadata", dir=str(ledger_dir), logId=0)
    assert java_meta(jm["metadata"]) == py_meta(el.read_entry_log_metadata(f))


@pytest.mark.parametrize("close", [True, False])
def test_pulsarkit_reads_java_direct_entry_logs(bk: JavaOracle, ledger_dir: Path, close: bool) -> None:
    entries = stored_entries({21: 40, 22: 15})
    res = bk.call(
        "directWrite",
        dir=str(ledger_dir),
        maxFileSize=16 << 10,
        entries=[{"ledger": lid, "data": data} for lid, _, data in entries],
        close=close,
    )
    locs = res["locations"]
    cur = ledger_dir / "current"
    reader = el.EntryLogReader(cur)
    log_ids = reader.log_ids()
    assert len(log_ids) >= 2
    by_log: dict[int, list[tuple[int, int, int, bytes]]] = {}
    for (lid, eid, data), loc in zip(entries, locs):
        assert reader.read(loc, lid, eid) == data
        by_log.setdefault(loc >> 32, []).append((loc, lid, eid, data))
    for log_id in log_ids:
        img_head = (cur / el.log_file_name(log_id)).read_bytes()[:4096]
        assert img_head[:4] == b"BKLO" and struct.unpack_from(">iq", img_head, 1024) == (3068, -1)
        s = reader.scan(log_id)
        recs = [(r.location, r.ledger_id, r.entry_id, r.data) for r in s]
        assert recs == by_log.get(log_id, [])
        assert s.summary.format == "direct"
        assert s.summary.ok, s.summary.issues
        m = reader.metadata(log_id)
        want: dict[int, int] = {}
        for _, lid, _, data in recs:
            want[lid] = want.get(lid, 0) + len(data) + 4
        assert m.ledgers == want
        # Rotated logs, and with close() the last one too, carry the ledgers map.
        if close or log_id != log_ids[-1]:
            assert m.from_index, m.fallback_reason
    t = pk.bookkeeper.scan_entry_logs(cur).read_all()
    assert sorted(t.column("location").to_pylist()) == sorted(locs)
    assert all(t.column("digest_ok").to_pylist())


# ------------------------------------------------------------------------------------------------
# Digests


@pytest.mark.parametrize("kind", ["CRC32C", "CRC32", "MAC", "DUMMY"])
def test_digests_cross_verify(bk: JavaOracle, kind: str) -> None:
    pw = b"pulsar-secret"
    payloads = pulsar_payloads(6, 4) + [b"", b"\x00" * 3000]
    packer = digest.BookieEntryPacker(99, kind, pw, next_entry_id=5, last_add_confirmed=4, length=123)
    ours = packer.pack_many(payloads)
    lac, length = 4, 123
    java_entries = []
    for i, p in enumerate(payloads):
        length += len(p)
        java_entries.append({"entry": 5 + i, "lac": lac, "length": length, "payload": p})
        lac = 5 + i
    theirs = [bytes.fromhex(h) for h in bk.call("digestPack", type=kind, password=pw, ledger=99, entries=java_entries)]
    assert theirs == ours, "pulsarkit packs byte-identical stored entries"
    verdicts = bk.call(
        "digestVerify",
        type=kind,
        password=pw,
        ledger=99,
        items=[{"entry": 5 + i, "data": d} for i, d in enumerate(ours)],
    )
    assert [v["ok"] for v in verdicts] == [True] * len(ours)
    assert [bytes.fromhex(v["payload"]) for v in verdicts] == payloads
    for i, d in enumerate(theirs):
        assert digest.unpack_entry(d, kind, pw, ledger_id=99, entry_id=5 + i).payload == payloads[i]
    if kind == "DUMMY":
        return
    bad = bytearray(ours[0])
    bad[-1] ^= 0x10
    v = bk.call("digestVerify", type=kind, password=pw, ledger=99, items=[{"entry": 5, "data": bytes(bad)}])
    assert not v[0]["ok"] and v[0]["error"].endswith("BKDigestMatchException")
    with pytest.raises(el.DigestMismatchError):
        digest.unpack_entry(bytes(bad), kind, pw)
    if kind == "MAC":
        v = bk.call("digestVerify", type=kind, password=b"wrong", ledger=99, items=[{"entry": 5, "data": ours[0]}])
        assert not v[0]["ok"]


def test_oracle_reports_java_errors(bk: JavaOracle) -> None:
    with pytest.raises(JavaError):
        bk.call("noSuchOp")
