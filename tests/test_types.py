"""The package type-checks: mypy with the configuration of pyproject.toml (``[tool.mypy]``), as ``mypy`` run from
the repository root checks it. The stubs of the native module are checked against it in test_native_stubs.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_mypy_is_clean() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert r.returncode == 0, f"mypy (exit {r.returncode}):\n{r.stdout[-8000:]}{r.stderr[-2000:]}"
