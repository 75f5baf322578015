"""Many bookies (issue 14): one metadata store and three bookie directories written with pulsarkit's own
writers (ensemble 3, write quorum 2, ack quorum 2; one ledger with an ensemble change), then each
entry read once from the replica its write set chooses, and the problems made on purpose reported:
a flipped byte (divergent), a missing copy (under-replicated), an extra copy (unexpected replica), an
entry on no bookie (unreadable). A single bookie reads as before."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pulsarkit as pk
import pyarrow.parquet as pq
import pytest
from datadir_fixtures import (
    BOOKIE_IDS,
    ORDERS,
    _journal,
    build_bookies,
    build_cluster_source,
    direct_write_set,
    write_cookie,
)
from hypothesis import given
from hypothesis import strategies as st
from pulsarkit.analysis.messages import read_messages
from pulsarkit.bookkeeper.ledger_storage import DbLedgerStorage
from pulsarkit.cli import main
from pulsarkit.proto import LedgerMetadataFormat
from pulsarkit.scan.bookie_dir import read_cookie
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.scan.records import DataDirError
from pulsarkit.scan.replicas import Layout, replica_report, write_set

TOPIC = ORDERS
A, B, C = IDS = BOOKIE_IDS


# ------------------------------------------------------------------------------ the cluster


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> dict:
    """A topic written by pulsarkit's managed ledger on one bookie; a pristine copy of it; and the
    metadata store rewritten as a three-bookie cluster would have it (tests/datadir_fixtures.py)."""
    return build_cluster_source(tmp_path_factory.mktemp("replicas"))


def _flip(d: Path, loc: int) -> None:
    """Flips the last byte of the record at ``loc`` (its payload's last byte)."""
    path = d / "current" / f"{loc >> 32:x}.log"
    pos = loc & 0xFFFFFFFF
    with open(path, "r+b") as f:
        f.seek(pos - 4)
        size = int.from_bytes(f.read(4), "big")
        f.seek(pos + size - 1)
        b = f.read(1)
        f.seek(pos + size - 1)
        f.write(bytes([b[0] ^ 0x5A]))


def _payloads(dd) -> list[bytes]:
    return [base64.b64decode(r["payload_b64"]) for r in read_messages(dd, TOPIC)]


def _open(source: dict, dirs: list[Path], **kw):
    return open_data_dir(metadata_dir=source["root"] / "src" / "metadata", ledger_dirs=dirs, **kw)


# ------------------------------------------------------------------------------ tests


def test_every_message_read_once_from_its_write_set(source, tmp_path):
    dirs, _ = build_bookies(source, tmp_path)
    dd = _open(source, dirs)
    assert dd.replicas is not None and [b.bookie_id for b in dd.replicas.bookies] == list(IDS)
    assert _payloads(dd) == source["sent"]
    assert dd.issues == []
    for lid in source["ledgers"]:
        led = dd.ledgers[lid]
        assert led.entries_on_bookie == led.entries == led.metadata_last_entry_id + 1  # not doubled
    rep = replica_report(dd)
    assert rep.problems == [] and rep.ok
    two_segments = source["ledgers"][1]
    for s in rep.ledgers:
        segs = source["segments"][s["ledger_id"]]
        expect: dict[str, int] = {}
        for e in range(s["entries"]):
            first = direct_write_set(segs, 2, e)[0]
            expect[first] = expect.get(first, 0) + 1
        assert s["read_from"] == dict(sorted(expect.items()))
        assert s["copies"] == 2 * s["entries"] and s["below_ack_quorum"] == 0
        assert (s["ensemble_size"], s["write_quorum"], s["ack_quorum"]) == (3, 2, 2)
        assert len(s["ensembles"]) == (2 if s["ledger_id"] == two_segments else 1)
    assert rep.problems_table().num_rows == 0 and rep.ledgers_table().num_rows == len(rep.ledgers)


def test_flipped_byte_is_read_from_the_other_replica_and_reported_divergent(source, tmp_path):
    dirs, locs = build_bookies(source, tmp_path)
    lid = source["ledgers"][1]  # after its ensemble change, entry 4's write set is [C, B]
    eid = 4
    ws = direct_write_set(source["segments"][lid], 2, eid)
    assert ws == [C, B]
    _flip(dirs[IDS.index(ws[0])], locs[(ws[0], lid, eid)])
    dd = _open(source, dirs)
    assert _payloads(dd) == source["sent"]
    bad = [i for i in dd.issues if i.kind == "bad_replica"]
    assert [(i.ledger_id, i.entry_id) for i in bad] == [(lid, eid)] and f"read from bookie {B}" in bad[0].message
    assert dd.where(lid, eid)[0].startswith(str(dirs[IDS.index(B)]))  # the copy read, not the damaged one
    rep = replica_report(dd)
    assert [(p["ledger_id"], p["entry_id"], p["kind"]) for p in rep.problems] == [(lid, eid, "divergent")]
    p = rep.problems[0]
    assert p["bookies"] == ws and p["verifies"] == [B] and p["read_from"] == B
    assert "digest" in p["evidence"].lower() and f"{B}: verifies" in p["evidence"]
    s = next(s for s in rep.ledgers if s["ledger_id"] == lid)
    assert s["divergent"] == 1 and s["below_ack_quorum"] == 1


def test_missing_copy_is_under_replicated(source, tmp_path):
    lid = source["ledgers"][0]
    dirs, _ = build_bookies(source, tmp_path, skip={(B, lid, None)})
    dd = _open(source, dirs)
    assert _payloads(dd) == source["sent"]
    rep = replica_report(dd)
    entries = dd.ledgers[lid].entries
    expect = [e for e in range(entries) if B in direct_write_set(source["segments"][lid], 2, e)]
    assert {p["kind"] for p in rep.problems} == {"under_replicated"}
    assert [(p["ledger_id"], p["entry_id"]) for p in rep.problems] == [(lid, e) for e in expect]
    assert all(p["bookies"] == [B] and p["read_from"] != B for p in rep.problems)
    s = next(s for s in rep.ledgers if s["ledger_id"] == lid)
    assert s["under_replicated"] == len(expect) == s["below_ack_quorum"]


def test_extra_copy_is_an_unexpected_replica(source, tmp_path):
    lid = source["ledgers"][2]
    dirs, _ = build_bookies(source, tmp_path, extra={(C, lid, 0)})  # entry 0's write set is [A, B]
    dd = _open(source, dirs)
    assert _payloads(dd) == source["sent"]  # read once, not twice
    assert dd.ledgers[lid].entries_on_bookie == dd.ledgers[lid].entries
    rep = replica_report(dd)
    assert [(p["ledger_id"], p["entry_id"], p["kind"], p["bookies"]) for p in rep.problems] == [
        (lid, 0, "unexpected_replica", [C])
    ]
    assert rep.problems[0]["read_from"] == A and "segment(s) [0]" in rep.problems[0]["evidence"]


def test_entry_on_no_bookie_is_unreadable_and_reported(source, tmp_path):
    lid = source["ledgers"][0]
    dirs, _ = build_bookies(source, tmp_path, skip={(A, lid, 1), (B, lid, 1), (C, lid, 1)})
    dd = _open(source, dirs)
    got = dict(dd.entries(lid))
    assert isinstance(got[1], DataDirError) and "on no given bookie" in str(got[1])
    assert [(i.kind, i.entry_id) for i in dd.issues] == [("unreadable_entry", 1)]
    rep = replica_report(dd)
    kinds = {(p["entry_id"], p["kind"]) for p in rep.problems}
    assert kinds == {(1, "under_replicated"), (1, "unreadable")}
    assert next(p for p in rep.problems if p["kind"] == "under_replicated")["bookies"] == [B, C]


def test_single_bookie_reads_as_before(source):
    single = source["root"] / "single"
    dd = open_data_dir(single)
    assert dd.replicas is None and dd.bookie_ids == [None]
    assert _payloads(dd) == source["sent"]
    with pytest.raises(DataDirError, match="no cookie"):
        replica_report(dd)
    named = open_data_dir(single, bookies={"127.0.0.1:3181": [single / "bookie"]})
    assert named.replicas is None  # one bookie: the single-bookie path
    assert named.ledgers_table().equals(dd.ledgers_table())
    rep = replica_report(named)
    assert rep.ok and all(s["read_from"] == {"127.0.0.1:3181": s["entries"]} for s in rep.ledgers)


def test_directories_without_cookies_are_named_by_a_mapping(source, tmp_path):
    dirs, _ = build_bookies(source, tmp_path, cookies=False)
    mapping = {b: [d] for b, d in zip(IDS, dirs, strict=True)}
    dd = open_data_dir(metadata_dir=source["root"] / "src" / "metadata", bookies=mapping)
    assert dd.replicas is not None and _payloads(dd) == source["sent"] and replica_report(dd).ok
    write_cookie(dirs[0], A)
    write_cookie(dirs[1], B)
    with pytest.raises(DataDirError, match=f"{dirs[2]}.*bookies="):
        _open(source, dirs)


def test_cookie_formats(tmp_path):
    d = tmp_path / "bk"
    (d / "current").mkdir(parents=True)
    assert read_cookie(d) is None
    write_cookie(d, A)
    c = read_cookie(d)
    assert (c.layout_version, c.bookie_id, c.ledger_dirs) == (5, A, f"1\t{d}")
    (d / "current" / "VERSION").write_text("3\nhost-b:3181\n/j\n1\t/l\n")
    assert read_cookie(d / "current").bookie_id == "host-b:3181"
    (d / "current" / "VERSION").write_text("hello\n")
    with pytest.raises(DataDirError, match="not a bookie cookie"):
        read_cookie(d)


def test_cli(source, tmp_path, capsys):
    dirs, locs = build_bookies(source, tmp_path)
    lid = source["ledgers"][0]
    _flip(dirs[0], locs[(A, lid, 0)])
    md = str(source["root"] / "src" / "metadata")
    args = ["replicas", "--metadata-dir", md, *(x for d in dirs for x in ("--bookie", str(d)))]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "divergent" in out and "3 bookie(s)" in out and "1 problem(s)" in out
    assert main([*args, "--strict"]) == 3
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(r["ledger_id"], r["entry_id"], r["kind"], r["read_from"]) for r in rows] == [(lid, 0, "divergent", B)]
    assert main([*args, "--json", "--view", "ledgers"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert sum(r["divergent"] for r in rows) == 1 and all(isinstance(r["read_from"], dict) for r in rows)
    out = tmp_path / "p.parquet"
    assert main([*args, "--parquet", str(out)]) == 0
    assert pq.read_table(out).num_rows == 1
    named = [
        "replicas",
        "--metadata-dir",
        md,
        *(x for b, d in zip(IDS, dirs, strict=True) for x in ("--bookie", f"{b}={d}")),
    ]
    capsys.readouterr()
    assert main(named) == 0 and "1 problem(s)" in capsys.readouterr().out


def test_cli_bookie_dir_with_its_journal_apart(source, tmp_path, capsys):
    """A production bookie keeps ``journal/`` beside ``ledgers/`` (Pulsar's ``data/bookkeeper``); one killed
    before it flushed holds its acknowledged copies in that journal alone (seen on the real cluster of
    tests/interop/cluster). ``--bookie DIR`` reads both: nothing is under-replicated; given its ledger
    directory alone, the journal's copies are missed and reported under-replicated."""
    lid = source["ledgers"][0]
    dirs, _ = build_bookies(source, tmp_path / "b", skip={(B, lid, None)})
    src = DbLedgerStorage([source["root"] / "src" / "bookie"], read_only=True)
    seg = source["segments"][lid]
    held = [e for e in src.entry_ids(lid) if B in direct_write_set(seg, 2, e)]
    records = [src.read_entry(lid, e) for e in held]
    src.close()
    bk = tmp_path / "bookie-b"
    bk.mkdir()
    shutil.move(dirs[1], bk / "ledgers")
    (bk / "journal" / "current").mkdir(parents=True)
    shutil.copy(bk / "ledgers" / "current" / "VERSION", bk / "journal" / "current" / "VERSION")
    _journal(bk / "journal" / "current" / "1a0.txn", records)
    md = str(source["root"] / "src" / "metadata")

    def problems(b_dir: Path) -> list[tuple]:
        args = ["replicas", "--metadata-dir", md, "--json"]
        assert main([*args, *(x for d in (dirs[0], b_dir, dirs[2]) for x in ("--bookie", str(d)))]) == 0
        rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        return [(r["ledger_id"], r["entry_id"], r["kind"], r["bookies"]) for r in rows]

    assert held and problems(bk) == []
    assert problems(bk / "ledgers") == [(lid, e, "under_replicated", [B]) for e in held]


# ------------------------------------------------------------------------------ write sets


@given(
    st.integers(1, 12).flatmap(
        lambda e: st.tuples(
            st.just(e),
            st.integers(1, e),
            st.lists(st.integers(0, 2**40), min_size=0, max_size=4),
            st.integers(0, 2**40 + 10),
        )
    )
)
def test_write_set_is_the_round_robin_rule(args):
    e, qw, firsts, entry = args
    firsts = [0] + sorted(firsts)  # equal first ids allowed: the later segment replaces the earlier
    segments = [(f, [f"b{i}-{k}" for k in range(e)]) for i, f in enumerate(firsts)]
    md = LedgerMetadataFormat(ensembleSize=e, quorumSize=qw, ackQuorumSize=1, length=0, state=3)
    for f, members in segments:
        s = md.segment.add()
        s.firstEntryId = f
        s.ensembleMember.extend(members)
    lay = Layout.of(md)
    ws = lay.write_set(entry)
    assert ws == direct_write_set(segments, qw, entry)
    assert write_set(entry, e, qw) == [(entry + k) % e for k in range(qw)]
    assert len(set(ws)) == qw


def test_layout_refuses_metadata_that_cannot_place_entries():
    md = LedgerMetadataFormat(ensembleSize=2, quorumSize=3, ackQuorumSize=2, length=0, state=3)
    md.segment.add(firstEntryId=0, ensembleMember=[A, B])
    with pytest.raises(DataDirError, match="cannot be placed"):
        Layout.of(md)


def test_forged_last_entry_is_one_unreadable_row_not_one_per_claimed_id(source, tmp_path):
    """A ledger whose metadata claims lastEntryId 4·10^9 (issue 21, item 5): the report and the read
    finish, sized by what the bookies hold; the run no bookie holds is one row and one issue, counted
    by its entries."""
    lid = source["ledgers"][0]
    dirs, _ = build_bookies(source, tmp_path)
    meta = tmp_path / "metadata"
    shutil.copytree(source["root"] / "src" / "metadata", meta)
    md = pk.metadata.MetadataStore(meta)
    lmd, _ = md.ledger_metadata(lid)
    assert lmd.state == LedgerMetadataFormat.CLOSED
    held = lmd.lastEntryId
    lmd.lastEntryId = 4_000_000_000
    md.put_ledger_metadata(lid, lmd)
    md.close()
    for p in meta.rglob("LOCK"):
        p.unlink()
    dd = open_data_dir(metadata_dir=meta, ledger_dirs=dirs)
    assert _payloads(dd) == source["sent"]
    gap = [i for i in dd.issues if i.ledger_id == lid]
    assert [(i.kind, i.entry_id, i.count) for i in gap] == [("unreadable_entry", held + 1, 4_000_000_000 - held)]
    rep = replica_report(dd)
    assert [(p["entry_id"], p["kind"]) for p in rep.problems] == [(held + 1, "unreadable")]
    assert f"entries {held + 1}..4000000000" in rep.problems[0]["evidence"]
    row = next(r for r in rep.ledgers if r["ledger_id"] == lid)
    assert row["unreadable"] == row["below_ack_quorum"] == 4_000_000_000 - held


def test_a_directory_given_twice_is_read_once_and_named(source, tmp_path):
    dirs, _ = build_bookies(source, tmp_path)
    dd = _open(source, [*dirs, dirs[1] / "current"])
    assert _payloads(dd) == source["sent"]
    assert [(i.kind, i.path) for i in dd.issues] == [("directory_given_twice", str(dirs[1] / "current"))]
    assert str(dirs[1]) in dd.issues[0].message
    assert [b.bookie_id for b in dd.replicas.bookies] == list(IDS)
    with pytest.raises(DataDirError, match="directory_given_twice"):
        _open(source, [*dirs, dirs[1]], strict=True)


def test_a_bookie_of_another_cluster_is_named_and_not_read(source, tmp_path):
    """Cookies carry the cluster's instanceId (``/ledgers/INSTANCEID``): a bookie directory from an unrelated
    cluster is not read (its ledger ids are another cluster's); the replicas of the others still give all."""
    dirs, _ = build_bookies(source, tmp_path)
    md = shutil.copytree(source["root"] / "src" / "metadata", tmp_path / "metadata")
    with pk.metadata.MetadataStore(md) as store:
        store.put("/ledgers/INSTANCEID", b"817f8adb-dbf6-414f-a6df-a08796f47e30")

    def opened(**kw):
        return open_data_dir(metadata_dir=md, ledger_dirs=dirs, **kw)

    assert opened().issues == []  # write_cookie's instanceId is this cluster's
    cookie = dirs[2] / "current" / "VERSION"
    cookie.write_text(cookie.read_text().replace("817f8adb", "00000000"))
    dd = opened()
    assert [(i.kind, i.path) for i in dd.issues if i.kind == "foreign_bookie"] == [("foreign_bookie", str(cookie))]
    assert C in dd.issues[0].message and "00000000-dbf6" in dd.issues[0].message
    assert _payloads(dd) == source["sent"]  # write quorum 2: every entry has a copy on A or B
    assert [b.bookie_id for b in dd.replicas.bookies] == [A, B]
    with pytest.raises(DataDirError, match="foreign_bookie"):
        opened(strict=True)


def test_bookie_roots_with_journal_and_ledgers_subdirectories(source, tmp_path, capsys):
    """``--bookie DIR``: a production bookie's directory with ``journal/`` and ``ledgers/`` under it (the
    default layout of ``data/bookkeeper``); each part told by what it holds, or by its name when empty."""
    from pulsarkit.scan.bookie_dir import bookie_parts

    dirs, _ = build_bookies(source, tmp_path / "flat")
    roots = []
    for bid, d in zip(IDS, dirs, strict=True):
        root = tmp_path / "bookies" / d.name
        shutil.copytree(d, root / "ledgers")
        (root / "journal" / "current").mkdir(parents=True)
        write_cookie(root / "journal", bid)
        roots.append(root)
    assert bookie_parts(roots[0]) == ([roots[0] / "ledgers"], [roots[0] / "journal"])
    (roots[0] / "journal" / "current" / "19a0b1c2d3e.txn").write_bytes(b"")
    shutil.move(roots[0] / "journal", roots[0] / "j0")  # told by its *.txn, whatever its name
    assert bookie_parts(roots[0]) == ([roots[0] / "ledgers"], [roots[0] / "j0"])
    assert bookie_parts(dirs[0]) == ([dirs[0]], [dirs[0]])
    with pytest.raises(DataDirError, match="no bookie ledger directory under it"):
        bookie_parts(tmp_path)
    md = str(source["root"] / "src" / "metadata")
    assert main(["messages", "--metadata-dir", md, *(x for d in dirs for x in ("--ledger-dir", str(d)))]) == 0
    want = capsys.readouterr().out
    assert main(["messages", "--metadata-dir", md, *(x for r in roots for x in ("--bookie", str(r)))]) == 0
    assert capsys.readouterr().out == want and want.count("\n") > len(source["sent"])
    assert main(["replicas", "--metadata-dir", md, *(x for r in roots for x in ("--bookie", str(r)))]) == 0
    assert "3 bookie(s)" in capsys.readouterr().out


def test_cli_names_a_bookie_that_was_not_given(source, tmp_path, capsys):
    dirs, _ = build_bookies(source, tmp_path)
    md = str(source["root"] / "src" / "metadata")
    assert main(["replicas", "--metadata-dir", md, "--bookie", str(dirs[0]), "--bookie", str(dirs[1])]) == 0
    out = capsys.readouterr().out
    n = len(source["ledgers"])
    assert f"not given: bookie {C}, in the ensembles of {n} ledger(s); its copies were not checked" in out
    assert main(["replicas", "--metadata-dir", md, *(x for d in dirs for x in ("--bookie", str(d)))]) == 0
    assert "not given" not in capsys.readouterr().out


def test_open_ledger_striped_over_bookies_not_given_is_read_to_its_last_held_entry(tmp_path):
    """An OPEN ledger of ensemble 3, write quorum 2, with one bookie's directory alone: the entries that
    bookie lacks are the others' share of the stripe, not the ledger's end (BookKeeper's recovery would ask
    them too). The entries it holds after the gap are read, and the gap and the bookies missing are said."""
    from pulsarkit.metadata.store import MetadataStore

    src = build_cluster_source(tmp_path / "c")
    dirs, _ = build_bookies(src, tmp_path / "bks")
    last = src["ledgers"][-1]
    with MetadataStore(tmp_path / "c" / "src" / "metadata") as ms:
        md, st_ = ms.ledger_metadata(last)
        md.state = LedgerMetadataFormat.OPEN
        md.ClearField("lastEntryId")
        ms.put_ledger_metadata(last, md, expected_version=st_.version)
    full = _open(src, dirs)
    assert len(list(read_messages(full, TOPIC))) == len(src["sent"]) and full.issues == []
    one = _open(src, dirs[:1])
    held = one.held_entries(last)
    gaps = [e for e in range(held[-1]) if e not in held]
    assert gaps and one.ledgers[last].last_entry_id == held[-1]  # not cut at the first gap
    ids = [r["message_id"] for r in read_messages(one, TOPIC) if r["message_id"]["ledger_id"] == last]
    assert sorted(i["entry_id"] for i in ids) == held
    (said,) = [i for i in one.issues if i.kind == "open_ledger_end_unknown"]
    assert said.ledger_id == last and said.entry_id == gaps[0] and B in said.message and C in said.message
    assert {i.entry_id for i in one.issues if i.kind == "unreadable_entry" and i.ledger_id == last} == set(gaps)
