"""Issue 21's property: over random target trees with planted symbolic links, hard links and foreign
files, after any sequence of export runs, interrupted runs and ``--force`` runs, no file outside OUT
and no foreign file inside OUT changed; every run either finishes or is refused with a typed error;
and once the links are gone, a run leaves each message exactly once in the files its marks list."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

import pulsarkit as pk
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import tree_digest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulsarkit import export as px
from pulsarkit.export.paths import JOURNAL_FILE

T0 = 1_700_000_000_000
ORDERS = "topic=persistent%3A%2F%2Fpublic%2Fdefault%2Forders"
#: where links and foreign files are planted: pulsarkit's names and names beside them
LINK_AT = [
    ORDERS,
    f"{ORDERS}/date=2023-11-14",
    f"{ORDERS}/date=2023-11-15",
    "topic=persistent%3A%2F%2Fpublic%2Fdefault%2Fevents",
    px.STAGING,
    px.LOCK_FILE,
    px.MARKS_FILE,
    JOURNAL_FILE,
]
FOREIGN_AT = [
    "notes.txt",
    "part-00000.parquet",
    f"{ORDERS}/date=2023-11-14/part-00000-theirs.parquet",
    f"{ORDERS}/date=2023-11-15/part-00001-theirs.parquet",
    "sub/part-00002.parquet",
]
#: what a link points at, beside OUT
TARGETS = ["sibling", "sibling/dir", "sibling/c.parquet"]

plant = st.one_of(
    st.tuples(st.just("link"), st.sampled_from(LINK_AT), st.sampled_from(TARGETS)),
    st.tuples(st.just("foreign"), st.sampled_from(FOREIGN_AT), st.binary(max_size=8)),
    st.tuples(st.just("hardlink"), st.sampled_from(FOREIGN_AT), st.sampled_from(["sibling/c.parquet"])),
)
step = st.one_of(
    st.tuples(st.sampled_from(["run", "force", "die-staging", "die-marks", "append", "unlink-links"])),
    st.tuples(st.just("plant"), plant),
)


def _digest(d: Path) -> dict[str, str]:
    return tree_digest(d)


def _append(root: Path, step: int) -> int:
    with pk.Store.open(root, sync=False) as store:
        for name in ("public/default/persistent/orders", "public/default/persistent/events"):
            ml = store.managed_ledger(name, pk.ManagedLedgerConfig(max_entries_per_ledger=2))
            for i in range(2):
                seq = step * 10 + i
                ml.add_entry(pk.encode_entry(pk.message_metadata("p", seq, T0 + seq * 43_200_000), b"%d" % seq))
    return 4


def _plant(out: Path, base: Path, kind: str, rel: str, arg: object) -> str | None:
    """Plants one thing unless the place is taken; returns the foreign file's path if it planted one."""
    p = out / rel
    with contextlib.suppress(OSError):  # a parent that is a file or a link: nothing planted there
        if os.path.lexists(p) or any(os.path.islink(q) for q in p.parents if out in q.parents):
            return None
        p.parent.mkdir(parents=True, exist_ok=True)
        if kind == "link":
            p.symlink_to(base / str(arg))
        elif kind == "hardlink":
            os.link(base / str(arg), p)
            return rel
        else:
            p.write_bytes(bytes(arg))  # type: ignore[arg-type]
            return rel
    return None


def _run(root: Path, out: Path, how: str) -> None:
    mp = pytest.MonkeyPatch()
    try:
        if how == "die-marks":
            mp.setattr(px.ParquetTarget, "write_marks_file", lambda self, doc: (_ for _ in ()).throw(KeyboardInterrupt))
        elif how == "die-staging":
            real = px.Target.write

            def die(self, batch):
                real(self, batch)
                raise KeyboardInterrupt

            mp.setattr(px.Target, "write", die)
        with contextlib.suppress(px.ExportRefused, KeyboardInterrupt):  # typed refusals and the kills only
            px.export(str(root), "parquet", str(out), force=how == "force", log=lambda m: None)
    finally:
        mp.undo()


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=6))
def test_nothing_outside_out_and_no_foreign_file_inside_changes(tmp_path_factory, steps):
    base = tmp_path_factory.mktemp("tree")
    root, out = base / "data", base / "out"
    (base / "sibling" / "dir").mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), base / "sibling" / "a.parquet")
    pq.write_table(pa.table({"x": [2]}), base / "sibling" / "c.parquet")
    (base / "sibling" / "dir" / "part-00000.parquet").write_bytes(b"theirs")
    total = _append(root, 0)
    out.mkdir()
    sibling = _digest(base / "sibling")
    foreign: dict[str, str] = {}
    appended = 1
    for s in steps:
        if s[0] == "plant":
            kind, rel, arg = s[1]
            planted = _plant(out, base, kind, rel, arg)
            if planted is not None:
                foreign[planted] = hashlib.sha256((out / planted).read_bytes()).hexdigest()
        elif s[0] == "append":
            total += _append(root, appended)
            appended += 1
        elif s[0] == "unlink-links":
            for p in [*out.rglob("*")]:
                if p.is_symlink():
                    p.unlink()
        else:
            _run(root, out, s[0])
        assert _digest(base / "sibling") == sibling, s
        for rel, digest in foreign.items():
            assert os.path.isfile(out / rel) and not os.path.islink(out / rel), rel
            assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == digest, rel

    # once the links are gone, a run finishes and its marks list each message exactly once
    for p in [*out.rglob("*")]:
        if p.is_symlink():
            p.unlink()
    px.export(str(root), "parquet", str(out), force=True, log=lambda m: None)
    assert _digest(base / "sibling") == sibling
    files = json.loads((out / px.MARKS_FILE).read_text())["files"]
    assert not set(files) & set(foreign)
    ids = [
        (f.split("/")[0], lid, eid)
        for f in files
        for lid, eid in zip(*(pq.read_table(out / f).column(c).to_pylist() for c in ("ledger_id", "entry_id")))
    ]
    assert len(ids) == len(set(ids)) == total
