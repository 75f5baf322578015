"""``pulsarkit report``: one self-contained HTML page on where a data directory's disk goes.

Plots are inline SVG drawn here (no plotting dependency, no script, nothing fetched): usage of each
entry log (live and dead bytes), live and dead bytes by owner and dead bytes by the reason they stay,
the orphan ledgers, the fsck verdict, and the what-if timeline of the bytes on each bookie. Every
figure comes from the same functions as ``du``, ``orphans``, ``fsck`` and ``whatif``.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from ..scan.datadir import DataDir
from .fsck import fsck
from .orphans import disk_usage_rows, find_orphans
from .whatif import WhatIf, compaction_to_target, simulate

_LIVE, _DEAD = "#3a7d44", "#c8553d"


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _bars(rows: list[tuple[str, int, int]], width: int = 640) -> str:
    """Horizontal stacked bars: (label, live, dead) each."""
    if not rows:
        return "<p>none</p>"
    top = max(live + dead for _, live, dead in rows) or 1
    h, label_w = 18, 170
    out = [f'<svg width="{width + label_w + 120}" height="{len(rows) * (h + 4) + 4}" role="img">']
    for i, (label, live, dead) in enumerate(rows):
        y = 2 + i * (h + 4)
        lw, dw = live / top * width, dead / top * width
        out.append(f'<text x="0" y="{y + 13}" font-size="12">{html.escape(label)}</text>')
        out.append(f'<rect x="{label_w}" y="{y}" width="{lw:.1f}" height="{h}" fill="{_LIVE}"/>')
        out.append(f'<rect x="{label_w + lw:.1f}" y="{y}" width="{dw:.1f}" height="{h}" fill="{_DEAD}"/>')
        out.append(
            f'<text x="{label_w + lw + dw + 4:.1f}" y="{y + 13}" font-size="11">{_fmt(live)} / {_fmt(dead)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _timeline(result: dict[str, Any], width: int = 720, height: int = 220) -> str:
    """A step line per bookie: bytes in entry logs over the simulated hours."""
    summary = result["summary"]["bookies"]
    horizon = result["settings"]["horizon_hours"] or 1
    top = max((b["bytes_before"] for b in summary.values()), default=0) or 1
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    out = [f'<svg width="{width + 90}" height="{height + 40}" role="img">']
    out.append(f'<line x1="60" y1="{height}" x2="{width + 60}" y2="{height}" stroke="#888"/>')
    out.append(f'<text x="60" y="{height + 16}" font-size="11">0 h</text>')
    out.append(f'<text x="{width + 30}" y="{height + 16}" font-size="11">{horizon:g} h</text>')
    out.append(f'<text x="0" y="12" font-size="11">{_fmt(top)}</text>')
    for k, (bookie, b) in enumerate(sorted(summary.items())):
        level, pts = b["bytes_before"], []
        x: Callable[[float], float] = lambda hours: 60 + hours / horizon * width  # noqa: E731
        y: Callable[[float], float] = lambda v: height - v / top * (height - 20)  # noqa: E731
        pts.append((x(0), y(level)))
        for r in result["timeline"]:
            if r.get("bookie") == bookie and "disk" in r:
                pts.append((x(r["hours"]), y(level)))
                level = r["disk"]
                pts.append((x(r["hours"]), y(level)))
        pts.append((x(horizon), y(level)))
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in pts)
        c = colours[k % len(colours)]
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{path}"/>')
        out.append(f'<text x="70" y="{30 + 14 * k}" font-size="11" fill="{c}">{html.escape(bookie)}</text>')
    out.append("</svg>")
    return "".join(out)


def _table(rows: list[dict[str, Any]], cols: list[str], limit: int = 200) -> str:
    if not rows:
        return "<p>none</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols) + "</tr>" for r in rows[:limit]
    )
    more = f"<p>{len(rows) - limit} more rows not shown</p>" if len(rows) > limit else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def build_report(dd: DataDir, whatif: WhatIf | None = None, target_bytes: int | None = None) -> str:
    """The HTML page (a string) for one data directory."""
    rows = list(disk_usage_rows(dd))
    per_log: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    by_owner: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_reason: dict[str, int] = defaultdict(int)
    for r in rows:
        per_log[r["log_id"]][0 if r["live"] else 1] += r["bytes"]
        by_owner[r["owner_class"]][0 if r["live"] else 1] += r["bytes"]
        if not r["live"]:
            by_reason[r["reason"].split(":")[0]] += r["bytes"]
    live = sum(v[0] for v in per_log.values())
    dead = sum(v[1] for v in per_log.values())
    orphans = [f.__dict__ for f in find_orphans(dd)]
    checks = fsck(dd)
    severities = {s: sum(c["severity"] == s for c in checks) for s in ("error", "warning", "info")}
    sim = simulate(dd, whatif)
    st = sim["settings"]
    settings = json.dumps({k: st[k] for k in ("horizon_hours", "assume_loaded", "config_files")})
    setting_rows = [
        {"setting": name, "value": st["gc"][name] if name in st["gc"] else st[name], "source": src}
        for name, src in st["sources"].items()
    ]
    topic_rows = [
        {
            "topic": ml,
            "retention": f"{p['retention_time_minutes']} min / {p['retention_size_mb']} MB",
            "retention source": p["retention_source"],
            "ttl": f"{p['ttl_seconds']} s",
            "ttl source": p["ttl_source"],
        }
        for ml, p in sim["topics"].items()
    ]
    parts = [
        "<!doctype html><meta charset='utf-8'><title>pulsarkit report</title>",
        "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}"
        "h2{margin-top:1.6em}</style>",
        f"<h1>pulsarkit report: {html.escape(str(dd.metadata_dir.parent))}</h1>",
        f"<p>{len(per_log)} entry logs on {len(dd.bookie_current_dirs())} bookie director"
        f"{'y' if len(dd.bookie_current_dirs()) == 1 else 'ies'}: <b>{_fmt(live)}</b> live, "
        f"<b>{_fmt(dead)}</b> dead. {len(orphans)} orphan ledgers. fsck: {severities['error']} errors, "
        f"{severities['warning']} warnings.</p>",
        f"<p><span style='color:{_LIVE}'>&#9632; live</span> <span style='color:{_DEAD}'>&#9632; dead</span></p>",
        "<h2>Entry logs</h2>",
        _bars([(f"{lid:x}.log", v[0], v[1]) for lid, v in sorted(per_log.items())]),
        "<h2>By owner</h2>",
        _bars([(k, v[0], v[1]) for k, v in sorted(by_owner.items())]),
        "<h2>Why dead bytes are still on disk</h2>",
        _table(
            [{"reason": k, "bytes": _fmt(v)} for k, v in sorted(by_reason.items(), key=lambda x: -x[1])],
            ["reason", "bytes"],
        ),
        "<h2>Orphan ledgers</h2>",
        _table(orphans, ["ledger_id", "category", "verdict", "owner", "bytes_on_bookie", "evidence"]),
        "<h2>What if</h2>",
        f"<p>Settings: <code>{html.escape(settings)}</code></p>",
        _table(setting_rows, ["setting", "value", "source"]),
        _table(topic_rows, ["topic", "retention", "retention source", "ttl", "ttl source"]),
        "".join(f"<p>Note: {html.escape(n)}</p>" for n in st["notes"]),
        _timeline(sim),
        _table(
            [
                {"bookie": b, "before": _fmt(v["bytes_before"]), "after": _fmt(v["bytes_after"])}
                for b, v in sim["summary"]["bookies"].items()
            ],
            ["bookie", "before", "after"],
        ),
        f"<p>{sim['summary']['ledgers_deleted']} ledgers deleted, {sim['summary']['logs_removed']} logs removed, "
        f"{sim['summary']['logs_compacted']} compacted; {_fmt(sim['summary']['bytes_written_by_compaction'])} "
        "written by compaction.</p>",
        _table(sim["timeline"], ["hours", "event", "topic", "ledger_id", "bookie", "log_id", "bytes_reclaimed"]),
    ]
    if target_bytes is not None:
        t = compaction_to_target(dd, target_bytes)
        parts += [
            f"<h2>Compacting to {_fmt(target_bytes)}</h2>",
            f"<p>{'Reachable' if t['reachable'] else 'Not reachable by compaction alone'}: "
            f"{_fmt(t['bytes_now'])} now, {_fmt(t['bytes_after'])} after compacting {len(t['logs'])} logs; "
            f"needs {_fmt(t['headroom_bytes'])} free while it runs.</p>",
            _table(t["logs"], ["bookie", "log_id", "total", "live", "dead", "usage"]),
        ]
    parts.append("<h2>fsck</h2>")
    parts.append(
        _table([c for c in checks if c["severity"] != "info"], ["severity", "check", "path", "offset", "message"])
    )
    return "\n".join(parts)
