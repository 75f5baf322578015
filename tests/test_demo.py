"""The main job runs end to end (Arrow engine here; the Spark engine is what README's command runs)."""

import json
import subprocess
import sys


def test_demo_arrow_engine(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pulsarkit.demo", "--engine", "arrow", "--entries", "120",
                          "--data", str(tmp_path / "d"), "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["all_match"]
    assert set(t.rsplit("/", 1)[1] for t in s["topics"]) == {"orders", "payments", "clicks", "inventory", "audit-log"}
    assert any(t["ledgers_deleted"] for t in s["topics"].values())  # retention deleted something
    assert s["messages_of_deleted_ledgers_awaiting_gc"] > 0
    assert sum(t["publish"].get("resend_DUPLICATE", 0) for t in s["topics"].values()) > 0
    for t in s["topics"].values():
        assert "resend_OK" not in t["publish"]  # every resend was deduplicated
    assert all(r["duplicate_messages"] == 0 for r in s["audit"])
