"""Where one topic's read goes, phase by phase (issue 24: "each miss with its profile and what bounds it"): the
steps of ``messages.messages_table`` / ``pulsarkit messages --format parquet`` done one after the other in
this process, each timed, the read under cProfile to split it into its native calls and the Python around them.

    python bench/profile_read_path.py DATA_DIR persistent://public/default/A [--prof out.prof]

Phases: imports (pulsarkit, its message reader and pyarrow.parquet), ``open_data_dir`` (the metadata store,
the bookies' location indexes, the journal), planning (``plan_data_dir``, with its metadata pass over the
topic's entries for transaction markers and chunks), the read (``read_partition``: entry reads and digest
checks, metadata decode, decompression and explode, the rows assembled in Python), and Arrow to Parquet
(``pq.ParquetWriter`` as ``messages --format parquet`` writes). The read's split comes from cProfile
(``tottime`` of each native call; the rest is Python), so its total is a little above the un-profiled read. Every
figure is this process's CPU time (``time.process_time``: user + system), not wall time, so that a loaded machine
does not inflate it; the read and the writer are single-threaded here.
"""

from __future__ import annotations

import time

T0 = time.process_time()
import argparse  # noqa: E402
import cProfile  # noqa: E402
import pstats  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import pulsarkit as pk  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from pulsarkit.analysis import messages  # noqa: E402
from pulsarkit.scan.plan import plan_data_dir  # noqa: E402
from pulsarkit.scan.read import read_partition  # noqa: E402
from pulsarkit.scan.schema import arrow_schema, message_fields  # noqa: E402

IMPORTS = time.process_time() - T0

#: native calls of the read, by what they do
NATIVE = {
    "read_payloads": "entry reads + digest checks (native)",
    "read": "entry reads + digest checks (native)",
    "bulk_decode_metadata": "metadata decode (native)",
    "bulk_explode_messages": "decompress + explode (native)",
    "bulk_assemble_messages": "metadata + decompress + explode + the rows' columns (native, one call per batch)",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("topic")
    ap.add_argument("--prof", default=None, help="also keep the read's cProfile stats here")
    a = ap.parse_args()
    phases: dict[str, float] = {"imports": IMPORTS}
    t = time.process_time()
    dd = pk.open_data_dir(a.data_dir)
    phases["open_data_dir"] = time.process_time() - t
    try:
        t = time.process_time()
        ml = dd.resolve(a.topic)
        scan = plan_data_dir(
            dd, str(dd.metadata_dir), topics=[ml], min_partitions=1, max_partition_bytes=1 << 62, metadata_pass="read"
        )  # as messages.message_batches plans (the pass left to the read, made there if it meets a transaction)
        phases["plan (incl. any metadata pass)"] = time.process_time() - t
        prof = cProfile.Profile(time.process_time)
        t = time.process_time()
        prof.enable()
        batches = [b for part in scan.partitions for b in read_partition(part, on_issue=messages._recorder(dd, ml))]
        prof.disable()
        read = time.process_time() - t
        st = pstats.Stats(prof)
        split: dict[str, float] = {}
        for (_, _, name), (_, _, tottime, _, _) in st.stats.items():  # type: ignore[attr-defined]
            if name.startswith("<method '") or name.startswith("<built-in method "):
                short = name.split("'")[1] if "'" in name else name.split()[-1].rstrip(">")
                short = short.rsplit(".", 1)[-1]
                if short in NATIVE:
                    split[NATIVE[short]] = split.get(NATIVE[short], 0.0) + tottime
        profiled_total = sum(v[2] for v in st.stats.values())  # type: ignore[attr-defined]
        for k, v in split.items():
            phases[f"read: {k}"] = v
        phases["read: Python around them (rows, Arrow assembly)"] = max(profiled_total - sum(split.values()), 0.0)
        if a.prof:
            st.dump_stats(a.prof)
        rows = sum(b.num_rows for b in batches)
        with tempfile.TemporaryDirectory() as tmp:
            t = time.process_time()
            with pq.ParquetWriter(f"{tmp}/m.parquet", arrow_schema(message_fields(False))) as w:
                for b in batches:
                    w.write_batch(b)
            phases["Arrow -> Parquet (ParquetWriter, defaults)"] = time.process_time() - t
    finally:
        dd.close()
    total = sum(phases.values())
    print(f"{a.topic}: {rows:,} messages; read {read:.3f} CPU s under cProfile")
    print("| phase | CPU s | share |")
    print("|---|---|---|")
    for k, v in phases.items():
        print(f"| {k} | {v:.3f} | {v / total:.0%} |")
    print(f"| total | {total:.3f} | |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
