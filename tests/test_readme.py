"""Every code block of README.md runs here, as a user would paste it, and asserts what it shows.

The blocks run in one scratch directory, in README order except that blocks creating data
(``pk.Store.open``) run first, since the sections a user reads first point at data they already
have. Shell blocks run with the test interpreter's ``bin/`` first on PATH. The block with the two
top-level commands is the one exception for ``./scripts/test.sh`` (it is this suite); its
``./scripts/demo.sh`` runs in ``test_the_demo_command``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
BLOCKS = [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", README, re.S)]
TWO_COMMANDS = "./scripts/demo.sh     # the main job on an embedded default\n./scripts/test.sh"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = ""
    return env


def _python(code: str, cwd: Path) -> str:
    r = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=600, env=_env())
    assert r.returncode == 0, f"README block failed:\n{code}\n--- stderr:\n{r.stderr[-3000:]}"
    return r.stdout


def _shell(code: str, cwd: Path) -> None:
    for line in code.splitlines():
        cmd = line.split("  #")[0].strip()
        if not cmd or cmd.startswith(("pip install", "maturin build")):
            continue  # building and installing is what the wheel smoke test in scripts/test.sh proves
        r = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", cmd],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=600,
            env=_env(),
        )
        assert r.returncode == 0, f"README command failed: {cmd}\n{r.stderr[-3000:]}"


def test_readme_has_the_blocks_this_test_knows() -> None:
    langs = [lang for lang, _ in BLOCKS]
    assert langs.count("python") >= 5 and langs.count("bash") >= 3
    assert any(TWO_COMMANDS in code for _, code in BLOCKS)


def test_the_readme_builds_the_wheel_as_the_smoke_test_does() -> None:
    """The install section's build command is the one scripts/wheel_smoke.sh runs (and checks for
    manylinux_2_17), so the skipped lines above are proven there."""
    (readme,) = [
        ln.split("  #")[0].strip() for _, c in BLOCKS for ln in c.splitlines() if ln.startswith("maturin build")
    ]
    smoke = (REPO / "scripts" / "wheel_smoke.sh").read_text()
    (line,) = [ln.strip() for ln in smoke.splitlines() if ln.strip().startswith("maturin build")]
    assert line.split("--out")[0] == readme.split("--out")[0]
    assert "pulsarkit install" not in README and "pip install pulsarkit " not in README


def test_every_block_runs(tmp_path) -> None:
    spark_blocks = [c for lang, c in BLOCKS if lang == "python" and "local_session" in c]
    python = [c for lang, c in BLOCKS if lang == "python" and c not in spark_blocks]
    python.sort(key=lambda c: "pk.Store.open(" not in c)  # stable: data-creating blocks first
    for code in python:
        _python(code, tmp_path)
    for lang, code in BLOCKS:
        if lang == "bash" and TWO_COMMANDS not in code:
            _shell(code, tmp_path)
    assert (tmp_path / "orders.jsonl").read_text().count("\n") == 10  # 5 entries of 2 messages
    assert (tmp_path / "entries.parquet").stat().st_size > 0


@pytest.mark.spark
def test_the_spark_script_runs(tmp_path) -> None:
    for code in (c for lang, c in BLOCKS if lang == "python" and 'pk.Store.open("data")' in c):
        _python(code, tmp_path)
    (spark,) = [c for lang, c in BLOCKS if lang == "python" and "local_session" in c]
    out = _python(spark, tmp_path)
    # the job counts what `pulsarkit messages` shows: topic data only, never cursor or schema entries
    r = subprocess.run(
        ["pulsarkit", "messages", "data", "--format", "jsonl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    expected = len(r.stdout.splitlines())
    assert expected > 0 and f"{expected} messages" in out.splitlines()


@pytest.mark.spark
def test_the_demo_command() -> None:
    """``./scripts/demo.sh`` exactly as the README gives it (bootstrap is a no-op once built)."""
    r = subprocess.run(["./scripts/demo.sh", "--json"], cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout)["all_match"]
