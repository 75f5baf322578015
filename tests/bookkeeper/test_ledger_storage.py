"""Bookie ledger storage: DbLedgerStorage layout and key/value encoding, entry digests, reads,
deletes, fencing, multiple ledger directories, crash-tail recovery and read-only opening."""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import zlib

import crc32c as crc32c_ref
import pulsarkit as pk
import pytest
import rocksdict
from pulsarkit.bookkeeper import DbLedgerStorage, master_key, pack_entry, unpack_entry
from pulsarkit.proto import LedgerData


def _raw_db(path: str) -> dict[bytes, bytes]:
    """Every key/value of a RocksDB directory, read from a copy so the original stays untouched."""
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp()
    shutil.copytree(path, os.path.join(tmp, "db"), ignore=shutil.ignore_patterns("LOCK"))
    db = rocksdict.Rdict(
        os.path.join(tmp, "db"),
        rocksdict.Options(raw_mode=True),
        access_type=rocksdict.AccessType.read_only(),
    )
    try:
        return {bytes(k): bytes(v) for k, v in db.items()}
    finally:
        db.close()
        shutil.rmtree(tmp)


def _fill(b: DbLedgerStorage, lid: int, n: int, size: int = 50, digest: str = "CRC32C") -> list[bytes]:
    b.create_ledger(lid)
    payloads, total = [], 0
    for e in range(n):
        p = bytes([lid % 256, e % 256]) * (size // 2)
        total += len(p)
        b.add_entry(pack_entry(lid, e, p, last_add_confirmed=e - 1, length=total, digest_type=digest))
        payloads.append(p)
    return payloads


# ------------------------------------------------------------------------------- entry digests


@pytest.mark.parametrize("digest", ["CRC32C", "CRC32", "MAC", "DUMMY"])
def test_pack_entry_layout_and_digest(digest: str) -> None:
    payload = b"pulsar entry bytes"
    data = pack_entry(7, 3, payload, last_add_confirmed=2, length=100, digest_type=digest, password=b"pw")
    header = struct.pack(">qqqq", 7, 3, 2, 100)
    assert data.startswith(header) and data.endswith(payload)
    if digest == "CRC32C":
        expect = struct.pack(">I", crc32c_ref.crc32c(header + payload))
    elif digest == "CRC32":
        expect = struct.pack(">q", zlib.crc32(header + payload))
    elif digest == "MAC":
        expect = hmac.new(hashlib.sha1(b"macpw").digest(), header + payload, hashlib.sha1).digest()
    else:
        expect = b""
    assert data[32 : len(data) - len(payload)] == expect
    e = unpack_entry(data, digest, b"pw", ledger_id=7, entry_id=3)
    assert (e.ledger_id, e.entry_id, e.last_add_confirmed, e.length, e.payload) == (7, 3, 2, 100, payload)


def test_digest_mismatch_and_wrong_ids_are_typed_errors() -> None:
    data = bytearray(pack_entry(1, 0, b"abc", last_add_confirmed=-1, length=3))
    data[-1] ^= 1
    with pytest.raises(pk.ChecksumMismatchError):
        unpack_entry(bytes(data))
    assert unpack_entry(bytes(data), verify=False).payload == b"abb"
    with pytest.raises(pk.ChecksumMismatchError):
        unpack_entry(
            pack_entry(1, 0, b"abc", last_add_confirmed=-1, length=3, digest_type="MAC", password=b"a"),
            "MAC",
            b"b",
        )
    with pytest.raises(pk.CorruptEntryError):
        unpack_entry(pack_entry(1, 0, b"abc", last_add_confirmed=-1, length=3), ledger_id=2)
    with pytest.raises(pk.CorruptEntryError):
        unpack_entry(b"\0" * 20)
    with pytest.raises(pk.PulsarkitError):
        unpack_entry(pack_entry(1, 0, b"abc", last_add_confirmed=-1, length=3), "SHA256")


def test_master_key_is_sha1_of_ledger_and_password() -> None:
    assert master_key(b"") == hashlib.sha1(b"ledger").digest()
    assert master_key(b"secret") == hashlib.sha1(b"ledgersecret").digest()


# ------------------------------------------------------------------------- layout on disk


def test_layout_matches_db_ledger_storage(tmp_path) -> None:
    b = DbLedgerStorage(tmp_path / "bk")
    payloads = _fill(b, 5, 10)
    b.flush()
    cur = tmp_path / "bk" / "current"
    assert sorted(p.name for p in cur.iterdir()) == ["0.log", "lastId", "ledgers", "locations"]
    assert (cur / "lastId").read_text() == "0\n"
    log = (cur / "0.log").read_bytes()
    assert log[:4] == b"BKLO" and struct.unpack(">iqi", log[4:20]) == (1, 0, 0) and log[20:1024] == bytes(1004)
    b.close()

    locations = _raw_db(str(cur / "locations"))
    assert len(locations) == 10
    offset = 1024
    for e in range(10):
        key = struct.pack(">qq", 5, e)
        loc = struct.unpack(">Q", locations[key])[0]
        assert loc >> 32 == 0 and loc & 0xFFFFFFFF == offset + 4
        n = struct.unpack(">i", log[offset : offset + 4])[0]
        stored = log[offset + 4 : offset + 4 + n]
        assert unpack_entry(stored, ledger_id=5, entry_id=e).payload == payloads[e]
        offset += 4 + n
    assert offset == len(log)
    # keys sort numerically because they are big-endian
    assert list(locations) == sorted(locations)

    ledgers = _raw_db(str(cur / "ledgers"))
    assert list(ledgers) == [struct.pack(">q", 5)]
    ld = LedgerData.FromString(ledgers[struct.pack(">q", 5)])
    assert ld.exists and not ld.fenced and ld.masterKey == hashlib.sha1(b"ledger").digest()


def test_reads_from_write_cache_then_from_entry_log(tmp_path) -> None:
    with DbLedgerStorage(tmp_path / "bk") as b:
        payloads = _fill(b, 3, 5)
        assert b.location(3, 0) == 0  # not indexed before the checkpoint
        assert unpack_entry(b.read_entry(3, 4)).payload == payloads[4]
        assert b.last_entry_id(3) == 4
        assert b.flush() == 5
        assert b.location(3, 0) == 1028
        assert unpack_entry(b.read_entry(3, 2)).payload == payloads[2]
        eid, data = b.read_last(3)
        assert eid == 4 and unpack_entry(data).entry_id == 4
        assert unpack_entry(b.read_entry(3, -1)).entry_id == 4
        assert b.entry_ids(3) == [0, 1, 2, 3, 4]
        assert [e for e, _ in b.entries(3, 1, 2)] == [1, 2]
        b.create_ledger(9)
        assert b.read_last(9) is None and b.last_entry_id(9) == -1
        assert b.ledgers() == [3, 9]


def test_missing_things_raise_typed_errors(tmp_path) -> None:
    with DbLedgerStorage(tmp_path / "bk") as b:
        _fill(b, 1, 2)
        b.flush()
        with pytest.raises(pk.LedgerNotFoundError):
            b.read_entry(2, 0)
        with pytest.raises(KeyError):  # the not-found errors are also KeyErrors
            b.read_entry(1, 7)
        with pytest.raises(pk.EntryNotFoundError):
            b.read_entry(1, 7)
        with pytest.raises(pk.LedgerNotFoundError):
            b.add_entry(pack_entry(4, 0, b"x", last_add_confirmed=-1, length=1))
        with pytest.raises(pk.CorruptEntryError):
            b.add_entry(b"short")
        with pytest.raises(pk.LedgerNotFoundError):
            b.read_entry(-5, 0)
    with pytest.raises(pk.BookieError):
        DbLedgerStorage([])
    with pytest.raises(pk.BookieError):
        DbLedgerStorage(tmp_path / "x", log_size_limit=(1 << 30) + 1)


def test_rotation_writes_ledgers_map_and_patches_header(tmp_path) -> None:
    with DbLedgerStorage(tmp_path / "bk", log_size_limit=2048) as b:
        _fill(b, 1, 12, size=100)
        _fill(b, 2, 12, size=100)
        b.flush()
        cur = tmp_path / "bk" / "current"
        logs = sorted(int(p.stem, 16) for p in cur.glob("*.log"))
        assert len(logs) >= 3
        assert (cur / "lastId").read_text() == f"{logs[-1]:x}\n"
        for lid in (1, 2):
            for e in range(12):
                assert unpack_entry(b.read_entry(lid, e)).entry_id == e
    data = (cur / "0.log").read_bytes()
    map_offset, count = struct.unpack(">qi", data[8:20])
    assert map_offset > 1024 and count >= 1
    n, lid, eid, entries = struct.unpack(">iqqi", data[map_offset : map_offset + 24])
    assert (lid, eid, entries, n) == (-1, -2, count, 20 + 16 * count)
    sizes = dict(struct.unpack(">qq", data[map_offset + 24 + 16 * i : map_offset + 40 + 16 * i]) for i in range(count))
    # bytes per ledger = sum of (record length + 4), counted independently here
    pos, expect = 1024, {}
    while pos < map_offset:
        size = struct.unpack(">i", data[pos : pos + 4])[0]
        rec_lid = struct.unpack(">q", data[pos + 4 : pos + 12])[0]
        expect[rec_lid] = expect.get(rec_lid, 0) + size + 4
        pos += 4 + size
    assert sizes == expect
    assert map_offset + 4 + n == len(data)


def test_ledgers_spread_over_directories_by_id_modulo(tmp_path) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1", tmp_path / "d2"]
    with DbLedgerStorage(dirs) as b:
        for lid in range(6):
            _fill(b, lid, 2)
        b.flush()
        for lid in range(6):
            assert unpack_entry(b.read_last(lid)[1]).ledger_id == lid
    for i, d in enumerate(dirs):
        keys = _raw_db(str(d / "current" / "ledgers"))
        assert sorted(struct.unpack(">q", k)[0] for k in keys) == [i, i + 3]


def test_delete_ledger_drops_index_entries_at_checkpoint(tmp_path) -> None:
    with DbLedgerStorage(tmp_path / "bk") as b:
        _fill(b, 1, 3)
        keep = _fill(b, 2, 3)
        b.flush()
        b.delete_ledger(1)
        assert not b.ledger_exists(1) and b.ledgers() == [2]
        with pytest.raises(pk.LedgerNotFoundError):
            b.read_entry(1, 0)
        with pytest.raises(pk.LedgerNotFoundError):
            b.delete_ledger(1)
        b.flush()
        assert unpack_entry(b.read_entry(2, 2)).payload == keep[2]
    locations = _raw_db(str(tmp_path / "bk" / "current" / "locations"))
    assert sorted(struct.unpack(">qq", k) for k in locations) == [(2, 0), (2, 1), (2, 2)]
    # reopening does not bring the deleted ledger back
    with DbLedgerStorage(tmp_path / "bk") as b:
        assert b.ledgers() == [2] and b.recovery.clean


def test_fenced_ledger_refuses_adds(tmp_path) -> None:
    with DbLedgerStorage(tmp_path / "bk") as b:
        _fill(b, 1, 1)
        assert b.fence_ledger(1) is True
        assert b.fence_ledger(1) is False
        with pytest.raises(pk.BookieError, match="fenced"):
            b.add_entry(pack_entry(1, 1, b"x", last_add_confirmed=0, length=2))
        assert b.ledger_data(1).fenced


def test_lying_index_is_reported_not_followed(tmp_path) -> None:
    with DbLedgerStorage(tmp_path / "bk") as b:
        _fill(b, 1, 2)
        b.flush()
        d = b.dirs[0]
        # point entry 1 at entry 0's record: the ids at that offset do not match
        d.locations_db.put(struct.pack(">qq", 1, 1), struct.pack(">Q", b.location(1, 0)))
        with pytest.raises(pk.CorruptEntryError):
            b.read_entry(1, 1)
        d.locations_db.put(struct.pack(">qq", 1, 1), struct.pack(">Q", (7 << 32) | 1028))
        with pytest.raises(pk.EntryNotFoundError):
            b.read_entry(1, 1)


# ------------------------------------------------------------------------------ recovery


def test_reopen_reindexes_unindexed_records_and_reports_torn_tail(tmp_path) -> None:
    with DbLedgerStorage(tmp_path / "bk") as b:
        _fill(b, 4, 3)
        b.flush()
    log = tmp_path / "bk" / "current" / "0.log"
    size_before = log.stat().st_size
    complete = pack_entry(4, 3, b"written, never indexed", last_add_confirmed=2, length=999)
    torn = pack_entry(4, 4, b"cut short by a crash", last_add_confirmed=3, length=1999)
    with open(log, "ab") as f:
        f.write(struct.pack(">i", len(complete)) + complete)
        f.write(struct.pack(">i", len(torn)) + torn[:10])
    with DbLedgerStorage(tmp_path / "bk") as b:
        rep = b.recovery
        assert rep.reindexed == [(4, 3)] and rep.reindexed_entries == 1
        assert len(rep.torn_tails) == 1
        t = rep.torn_tails[0]
        assert (t.log_id, t.offset, t.length) == (0, size_before + 4 + len(complete), 14)
        assert unpack_entry(b.read_entry(4, 3)).payload == b"written, never indexed"
        assert b.last_entry_id(4) == 3
        # new writes go to a new log; the torn one is left as it is
        b.add_entry(pack_entry(4, 4, b"after", last_add_confirmed=3, length=2000))
        b.flush()
        assert b.location(4, 4) >> 32 == 1
    assert log.stat().st_size == size_before + 4 + len(complete) + 14
    with DbLedgerStorage(tmp_path / "bk") as b:
        assert b.recovery.reindexed_entries == 0
        assert [e for e, _ in b.entries(4)] == [0, 1, 2, 3, 4]


def test_records_of_deleted_ledgers_are_not_resurrected(tmp_path) -> None:
    with DbLedgerStorage(tmp_path / "bk") as b:
        _fill(b, 1, 2)
        _fill(b, 2, 2)
        b.flush()
        b.delete_ledger(1)
    with DbLedgerStorage(tmp_path / "bk") as b:
        assert b.ledgers() == [2] and b.recovery.reindexed_entries == 0


# --------------------------------------------------------------------------- read-only


def test_read_only_open_leaves_the_directory_untouched(tmp_path) -> None:
    with DbLedgerStorage(tmp_path / "bk") as b:
        payloads = _fill(b, 1, 4)
        b.flush()
    root = tmp_path / "bk"

    def snapshot() -> dict[str, tuple[int, bytes]]:
        return {str(p.relative_to(root)): (p.stat().st_size, p.read_bytes()) for p in root.rglob("*") if p.is_file()}

    before = snapshot()
    with DbLedgerStorage(root, read_only=True) as b:
        assert unpack_entry(b.read_entry(1, 3)).payload == payloads[3]
        assert b.ledgers() == [1]
        with pytest.raises(pk.BookieError):
            b.add_entry(pack_entry(1, 4, b"x", last_add_confirmed=3, length=1))
        with pytest.raises(pk.BookieError):
            b.delete_ledger(1)
        assert b.flush() == 0
    assert snapshot() == before
    with pytest.raises(pk.BookieError):
        DbLedgerStorage(tmp_path / "nothing-here", read_only=True)


# ------------------------------------------------------------------------ interop with Java


@pytest.mark.interop
def test_bookkeeper_reads_our_indexes_and_ledger_metadata(tmp_path) -> None:
    """BookKeeper's own KeyValueStorageRocksDB (rocksdbjni) opens the bookie's ledgers/ and
    locations/ indexes, and its LedgerMetadataSerDe parses the ledger metadata in our metadata store."""
    import shutil

    from oracle import TESTS, JavaOracle
    from pulsarkit.managed_ledger import ManagedLedgerConfig
    from pulsarkit.metadata import ledger_path, parse_ledger_metadata

    name = "public/default/persistent/interop"
    with pk.Store.open(tmp_path / "data") as s:
        ml = s.managed_ledger(name, ManagedLedgerConfig(max_entries_per_ledger=4, minimum_rollover_time_ms=0))
        for i in range(10):
            ml.add_entry(pk.encode_entry(pk.message_metadata("p", i, 1_700_000_000_000 + i), b"m%d" % i))
        counts = {li.ledger_id: li.entries for li in ml.ledgers()}
        ledger_ids = list(counts)
        assert list(counts.values()) == [4, 4, 2]
        ml.close()
        raw_md = {lid: s.metadata.get_data(ledger_path(lid)) for lid in ledger_ids}
    current = tmp_path / "data" / "bookie" / "current"
    base = tmp_path / "java-copy"
    for sub in ("ledgers", "locations"):
        shutil.copytree(current / sub, base / sub, ignore=shutil.ignore_patterns("LOCK"))
    ours_loc = _raw_db(str(current / "locations"))
    ours_led = _raw_db(str(current / "ledgers"))

    with JavaOracle(TESTS / "java" / "bookkeeper-oracle", "org.apache.bookkeeper.bookie.Oracle") as bk:
        floor_keys = [struct.pack(">qq", lid, 2**63 - 1) for lid in ledger_ids]
        loc = bk.call("dbIndexDump", basePath=str(base), sub="locations", floorKeys=floor_keys)
        assert [(bytes.fromhex(e["key"]), bytes.fromhex(e["value"])) for e in loc["entries"]] == sorted(
            ours_loc.items()
        )
        assert loc["count"] == 10
        # getFloor([lid, Long.MAX_VALUE]) finds each ledger's last entry, as DbLedgerStorage does
        assert [struct.unpack(">qq", bytes.fromhex(f)) for f in loc["floors"]] == [
            (lid, n - 1) for lid, n in counts.items()
        ]
        led = bk.call("dbIndexDump", basePath=str(base), sub="ledgers")
        assert {bytes.fromhex(e["key"]): bytes.fromhex(e["value"]) for e in led["entries"]} == ours_led
        for e in led["entries"]:
            assert e["exists"] and bytes.fromhex(e["masterKey"]) == hashlib.sha1(b"ledger").digest()

        for lid in ledger_ids:
            j = bk.call("ledgerMetadataParse", ledger=lid, data=raw_md[lid])
            ours = parse_ledger_metadata(raw_md[lid], lid)
            assert j["formatVersion"] == 3 and j["state"] == "CLOSED" and j["closed"]
            assert (j["lastEntryId"], j["length"]) == (ours.lastEntryId, ours.length)
            assert (j["ensembleSize"], j["writeQuorumSize"], j["ackQuorumSize"]) == (1, 1, 1)
            assert j["digestType"] == "CRC32C" and j["ensembles"] == {"0": ["127.0.0.1:3181"]}
            assert {k: bytes.fromhex(v) for k, v in j["customMetadata"].items()} == {
                "application": b"pulsar",
                "component": b"managed-ledger",
                "pulsar/managed-ledger": name.encode(),
            }
            assert j["ctime"] == ours.ctime > 0
            # Java's own serialization of the same metadata reads back equal (its map order aside)
            theirs = parse_ledger_metadata(bytes.fromhex(j["reserialized"]), lid)
            assert {e.key: e.value for e in theirs.customMetadata} == {e.key: e.value for e in ours.customMetadata}
            del theirs.customMetadata[:]
            del ours.customMetadata[:]
            assert theirs == ours
