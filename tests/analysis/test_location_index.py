"""A bookie's ``locations`` index read by ledger (:class:`pulsarkit.scan.bookie_dir.LocationIndex`): what a
lookup reads, what iterating sees, keys that are not ledger + entry, and a table file found damaged at a
lookup rather than at open."""

from __future__ import annotations

import glob
import struct
import tempfile
from pathlib import Path

import pytest
from pulsarkit.bookkeeper import key_value_storage as kv
from pulsarkit.scan.bookie_dir import LocationIndex
from pulsarkit.scan.records import DataDirError, Issue

KEY = struct.Struct(">qq")
LONG = struct.Struct(">q")


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def _index(path: Path, pairs: dict[bytes, bytes]) -> None:
    db = kv.open_writable(str(path), sync=False)
    for k, v in pairs.items():
        db[k] = v
    db.flush()
    db.close()


def _open(path: Path, on_damage=None) -> LocationIndex:
    return LocationIndex(
        path, kv.ReadOnlyCopy(path, error=DataDirError, what="locations index"), on_damage or (lambda i: {})
    )


def test_a_ledger_is_its_key_range(tmp_path, private_tmp):
    pairs = {KEY.pack(lid, eid): LONG.pack(lid << 32 | eid) for lid in (0, 1, 5, 255, 256) for eid in range(3)}
    pairs[KEY.pack(7, -1)] = LONG.pack(1)  # a negative entry id sorts after the others, still ledger 7's
    pairs[KEY.pack(9, 0)] = b"short"  # not a location: ledger 9 holds nothing
    pairs[LONG.pack(8)] = LONG.pack(1)  # not ledger + entry
    pairs[KEY.pack(-3, 0)] = LONG.pack(2)  # a negative ledger id sorts last
    _index(tmp_path / "locations", pairs)
    index = _open(tmp_path / "locations")
    assert list(index) == [0, 1, 5, 7, 255, 256, -3] and index.lookups == []
    assert index[5] == {0: 5 << 32, 1: 5 << 32 | 1, 2: 5 << 32 | 2}
    assert index[7] == {-1: 1} and index[-3] == {0: 2}
    assert 9 not in index and 8 not in index and index.get(9) is None and index.get(2, {}) == {}
    assert index[5] is index[5] and index.lookups == [5, 7, -3]  # cached
    index.close()
    assert list(private_tmp.iterdir()) == []
    assert index[255] == {e: 255 << 32 | e for e in range(3)}  # after close: a new copy
    assert dict(index.items()) == {lid: {e: lid << 32 | e for e in range(3)} for lid in (0, 1, 5, 255, 256)} | {
        7: {-1: 1},
        -3: {0: 2},
    }
    assert index.full_reads == 1 and index.lookups == [5, 7, -3, 255]
    index.close()
    assert list(private_tmp.iterdir()) == []


def test_a_table_file_damaged_under_one_ledger_is_found_at_its_lookup(tmp_path):
    per = 20_000
    _index(tmp_path / "locations", {KEY.pack(lid, e): LONG.pack(e) for lid in range(3) for e in range(per)})
    (sst,) = glob.glob(str(tmp_path / "locations" / "*.sst"))
    b = bytearray(Path(sst).read_bytes())
    for i in range(len(b) // 6, len(b) // 6 + 64):  # inside ledger 0's keys, not where a ledger starts
        b[i] ^= 0xFF
    Path(sst).write_bytes(bytes(b))
    met: list[Issue] = []
    scanned = {0: {0: 7}, 1: {0: 8}}

    def on_damage(issue: Issue) -> dict[int, dict[int, int]]:
        met.append(issue)
        return scanned

    index = _open(tmp_path / "locations", on_damage)
    assert list(index) == [0, 1, 2] and not met
    assert len(index[2]) == per and not met
    assert index[0] == {0: 7}  # what on_damage rebuilt, from then on for every ledger
    assert [i.kind for i in met] == ["unreadable_index"] and "Corruption" in met[0].message
    assert list(index) == [0, 1] and 2 not in index and index[1] == {0: 8}
    index.close()


def test_a_ledgers_locations_decoded_column_wise_equal_the_pairs_decoded_one_by_one():
    import struct

    from pulsarkit.scan.bookie_dir import _ledger_locations, _locations

    keys = [struct.pack(">qq", 7, e) for e in (0, 1, 5, 1 << 40)]
    values = [struct.pack(">q", v) for v in (1 << 32 | 1024, 1 << 32 | 2048, -1, (3 << 32) | 99)]
    want = _locations(list(zip(keys, values, strict=True)))[7]
    assert (
        _ledger_locations(7, keys, values)
        == want
        == {0: 1 << 32 | 1024, 1: 1 << 32 | 2048, 5: -1, 1 << 40: 3 << 32 | 99}
    )
    # a key or value of another length (not a location) is skipped, as one by one
    odd_keys, odd_values = [*keys, struct.pack(">qqb", 7, 9, 0)], [*values, b"\0" * 8]
    assert _ledger_locations(7, odd_keys, odd_values) == want
    assert _ledger_locations(7, [], []) == {}
