"""Zero-copy strip: ``strip_broker_entry_metadata(arr, output="binary_view")`` over the same one million
1 KiB entries as test_bench_bulk.py, against the same per-entry Python loop."""

from __future__ import annotations

import pulsarkit as pk
import pyarrow as pa
import pytest
from test_bench_bulk import entries, strip_loop  # noqa: F401  (fixture reused)


@pytest.mark.parametrize("side", ["loop-pk-strip", "candidate"])
def test_strip_zero_copy(benchmark, ratios, entries, side):  # noqa: F811
    arr, items = entries
    benchmark.group = "strip 1M x 1 KiB, zero-copy"
    if side == "candidate":
        out = benchmark.pedantic(
            pk.bulk.strip_broker_entry_metadata, args=(arr, "binary_view"), rounds=5, warmup_rounds=1
        )
        got = out.column("entry")
        assert got.type == pa.binary_view() and out.column("error").null_count == len(arr)
        sample = list(range(0, len(items), 97))
        # pyarrow has no take kernel for binary_view; index the views directly.
        assert [got[i].as_py() for i in sample] == [pk.strip_broker_entry_metadata(items[i]) for i in sample]
        label = "pulsarkit.bulk.strip_broker_entry_metadata(arr, output='binary_view')"
    else:
        got = benchmark.pedantic(strip_loop, args=(items,), rounds=3, warmup_rounds=1)
        assert got[:100] == [pk.strip_broker_entry_metadata(b) for b in items[:100]]
        label = "loop: [pk.strip_broker_entry_metadata(b) for b in list_of_bytes]"
    ratios.add(
        benchmark,
        "strip 1M x 1 KiB (binary_view)",
        side,
        label,
        items=len(arr),
        unit="entry",
        nbytes=arr.nbytes,
    )
