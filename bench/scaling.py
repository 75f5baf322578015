"""Scaling curves (issue 15): throughput of the bulk kernels at 1x, 10x and 100x input, so a reader sees
how cost grows, and the verified entry-log scan with one and two threads (the kernels are single-threaded
and release the GIL: parallelism is one call per log on a thread pool, as the Spark reader does).

    python bench/scaling.py [--base-mb 10] [--out bench/scaling]    # writes scaling.json and scaling.svg

Each point is the best of three runs (process CPU time is not used: threads must count as wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import pulsarkit as pk
import pyarrow as pa
from pulsarkit import bulk
from pulsarkit.bookkeeper import EntryLogWriter, pack_entry
from pulsarkit.bookkeeper.entrylog import find_entry_logs, scan_entry_logs


def _best(fn, rounds: int = 3) -> float:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def _logs(root: str, nbytes: int, entry: int = 16 << 10, log_size: int = 64 << 20) -> list[tuple[str, int]]:
    os.makedirs(root, exist_ok=True)
    payload = random.Random(1).randbytes(entry)
    with EntryLogWriter(root, log_size_limit=log_size) as w:
        for i in range(max(1, nbytes // entry)):
            lid, eid = 1 + i % 8, i // 8
            w.append(lid, pack_entry(lid, eid, payload, last_add_confirmed=eid - 1, length=(eid + 1) * entry))
        w.flush()
    return list(find_entry_logs([root]))


def scan(logs: list[tuple[str, int]], threads: int) -> int:
    def one(log: tuple[str, int]) -> int:
        return sum(b.num_rows for b in scan_entry_logs([log], "CRC32C", payload_type="binary_view"))

    if threads == 1:
        return sum(one(x) for x in logs)
    with ThreadPoolExecutor(threads) as ex:
        return sum(ex.map(one, logs))


def _entries(n: int, batch: int) -> pa.Array:
    md = pk.message_metadata("p", 0, 1_700_000_000_000)
    if batch == 1:
        e = pk.encode_entry(md, b"x" * 100)
    else:
        e = pk.encode_batch(md, [b"m%03d" % i for i in range(batch)])
    return pa.array([e] * n, pa.binary())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--base-mb", type=float, default=10.0)
    p.add_argument("--out", default="bench/scaling")
    a = p.parse_args()
    points: list[dict] = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        for k in (1, 10, 100):
            nbytes = int(a.base_mb * k * (1 << 20))
            logs = _logs(os.path.join(tmp, f"x{k}"), nbytes)
            size = sum(os.path.getsize(path) for path, _ in logs)
            for threads in (1, 2):
                s = _best(lambda: scan(logs, threads))  # noqa: B023
                points.append(
                    {
                        "kernel": f"scan_entry_logs, CRC32C verified, {threads} thread(s)",
                        "scale": k,
                        "items": size,
                        "unit": "bytes",
                        "seconds": s,
                        "per_second": size / s,
                    }
                )
        for k in (1, 10, 100):
            n = 10_000 * k
            arr = _entries(n, 1)
            s = _best(lambda: bulk.decode_metadata(arr))  # noqa: B023
            points.append(
                {
                    "kernel": "decode_metadata, 1 message per entry",
                    "scale": k,
                    "items": n,
                    "unit": "entries",
                    "seconds": s,
                    "per_second": n / s,
                }
            )
            arr = _entries(n // 10, 100)
            s = _best(lambda: bulk.explode_messages(arr))  # noqa: B023
            points.append(
                {
                    "kernel": "explode_messages, batches of 100 small messages",
                    "scale": k,
                    "items": n * 10,
                    "unit": "messages",
                    "seconds": s,
                    "per_second": n * 10 / s,
                }
            )
    with open(a.out + ".json", "w") as f:
        json.dump({"base_mb": a.base_mb, "points": points}, f, indent=1)
    with open(a.out + ".svg", "w") as f:
        f.write(svg(points))
    for pt in points:
        print(
            f"{pt['kernel']:<52} x{pt['scale']:<4} {pt['items']:>12} {pt['unit']:<8} "
            f"{pt['seconds'] * 1e3:9.1f} ms  {pt['per_second']:.3g}/s"
        )


def svg(points: list[dict]) -> str:
    """One panel per kernel: throughput (relative to its 1x point) at 1x, 10x and 100x."""
    kernels = list(dict.fromkeys(p["kernel"] for p in points))
    w, h, pad = 300, 160, 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{len(kernels) * (w + pad) + pad}" height="{h + 90}">']
    for i, k in enumerate(kernels):
        pts = [p for p in points if p["kernel"] == k]
        base = pts[0]["per_second"]
        x0 = pad + i * (w + pad)
        out.append(f'<rect x="{x0}" y="20" width="{w}" height="{h}" fill="none" stroke="#999"/>')
        out.append(f'<text x="{x0}" y="14" font-size="10">{k}</text>')
        top = max(1.5, max(p["per_second"] / base for p in pts) * 1.1)
        coords = []
        for j, p in enumerate(pts):
            x = x0 + 20 + j * (w - 40) / max(1, len(pts) - 1)
            y = 20 + h - (p["per_second"] / base) / top * h
            coords.append(f"{x:.1f},{y:.1f}")
            out.append(f'<text x="{x - 10:.1f}" y="{h + 36}" font-size="10">x{p["scale"]}</text>')
            out.append(f'<text x="{x - 14:.1f}" y="{y - 4:.1f}" font-size="9">{p["per_second"]:.3g}/s</text>')
        out.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{" ".join(coords)}"/>')
        out.append(f'<text x="{x0}" y="{h + 54}" font-size="10">throughput relative to x1 (1.0 = flat)</text>')
    out.append("</svg>")
    return "".join(out)


if __name__ == "__main__":
    main()
