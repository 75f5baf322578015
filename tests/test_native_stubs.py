"""The native module's type stubs (``_native.pyi``) cover every native name, and agree with it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pulsarkit._native as native

REPO = Path(__file__).resolve().parents[1]
STUB = REPO / "python" / "pulsarkit" / "_native.pyi"


def _stubbed() -> set[str]:
    names: set[str] = set()
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_every_native_name_is_stubbed() -> None:
    runtime = {n for n in dir(native) if not n.startswith("_") or n == "__version__"}
    missing = sorted(runtime - _stubbed())
    assert not missing, f"native names without a stub: {missing}"


def test_stubtest_agrees_with_the_module() -> None:
    """mypy's stubtest: every signature, default and attribute of the stub matches the runtime."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy.stubtest",
            "pulsarkit._native",
            "--ignore-disjoint-bases",
            "--allowlist",
            str(REPO / "tests" / "stubtest_allowlist.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
