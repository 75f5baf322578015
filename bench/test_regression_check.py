"""The CI regression check warns on a drop of more than 30% and on nothing else (it never fails)."""

from __future__ import annotations

import json

import regression


def doc(**ratios):
    return {"ratios": [{"case": c, "baseline": "py", "ratio": v, "reference": False} for c, v in ratios.items()]}


def test_warns_only_on_a_large_drop(tmp_path, capsys):
    rows, warnings = regression.compare(doc(a=7.0, b=10.0, c=3.0), doc(a=10.0, b=10.0, d=1.0), 0.30)
    assert [r["case"] for r in rows] == ["a", "b"]  # c and d have nothing to compare with
    assert warnings == [] and abs(rows[0]["change"] + 0.3) < 1e-9  # exactly -30%: not more than the limit
    rows, warnings = regression.compare(doc(a=6.9), doc(a=10.0), 0.30)
    assert len(warnings) == 1 and "a vs py: 6.90x, was 10.00x" in warnings[0]
    cur, base = tmp_path / "cur.json", tmp_path / "base.json"
    cur.write_text(json.dumps(doc(a=1.0)))
    base.write_text(json.dumps(doc(a=10.0)))
    assert regression.main([str(cur), "--baseline", str(base)]) == 0  # a warning, never a failure
    assert "WARNING" in capsys.readouterr().out
    assert regression.main([str(cur), "--baseline", str(tmp_path / "missing.json")]) == 0
