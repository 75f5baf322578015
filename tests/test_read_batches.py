"""How the reader cuts a partition's entries into batches (``scan.read._batches``): by entry count and bytes, one
entry at least, the entry that reaches the byte limit included, whatever the chunks the entries come in."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulsarkit.scan import read


def _by_entry(chunks: list[list[bytes | None]], batch_entries: int, batch_bytes: int) -> list[list[Any]]:
    """The cut made entry by entry, the oracle."""
    out, cur, size = [], [], 0
    for chunk in chunks:
        for d in chunk:
            if cur and (len(cur) >= max(batch_entries, 1) or size >= batch_bytes):
                out.append(cur)
                cur, size = [], 0
            cur.append(d)
            size += len(d) if d else 0
        if cur and (len(cur) >= batch_entries or size >= batch_bytes):
            out.append(cur)
            cur, size = [], 0
    if cur:
        out.append(cur)
    return out


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(st.lists(st.one_of(st.none(), st.binary(max_size=12)), min_size=1, max_size=9), max_size=6),
    batch_entries=st.integers(-1, 7),
    batch_bytes=st.integers(-1, 40),
)
def test_batches_cut_as_entry_by_entry(chunks, batch_entries: int, batch_bytes: int) -> None:
    def fake_chunks(part: Any, stats: Any, on_issue: Any) -> Any:
        k = 0
        for c in chunks:
            yield [7] * len(c), list(range(k, k + len(c))), list(c), [None if d is not None else "gap" for d in c]
            k += len(c)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(read, "_entry_chunks", fake_chunks)
        got = [list(b) for b in read._batches(None, batch_entries, batch_bytes)]  # type: ignore[arg-type]
    want = _by_entry(chunks, batch_entries, batch_bytes)
    assert [b[2] for b in got] == want
    flat = [d for c in chunks for d in c]
    assert [e for b in got for e in b[1]] == list(range(len(flat)))
    assert all(len(b[0]) == len(b[1]) == len(b[2]) == len(b[3]) for b in got)


@pytest.mark.parametrize(
    ("batch_entries", "batch_bytes", "sizes"), [(3, 100, [3, 3]), (100, 5, [2, 2, 2]), (0, 0, [1] * 6)]
)
def test_batches_examples(batch_entries: int, batch_bytes: int, sizes: list[int], monkeypatch) -> None:
    monkeypatch.setattr(read, "_entry_chunks", lambda *a: iter([([1] * 6, list(range(6)), [b"abc"] * 6, [None] * 6)]))
    assert [len(b[0]) for b in read._batches(None, batch_entries, batch_bytes)] == sizes  # type: ignore[arg-type]
