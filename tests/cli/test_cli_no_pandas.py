"""The ``pulsarkit`` program runs its Arrow-only commands without pandas: pyarrow would import it whole
(0.25-0.3 s, issue 24) the first time it is handed Python values. The output is the same either way."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest
from pulsarkit.cli import build_parser, main
from pulsarkit.cli.command import _needs_pandas

pytest.importorskip("pandas", reason="without pandas installed there is nothing to keep out")


def _program(*argv: str) -> tuple[str, list[str]]:
    """stdout of ``python -m pulsarkit ARGV`` and the modules it imported (-X importtime)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPROFILEIMPORTTIME"}
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pulsarkit", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    mods = [ln.rsplit("|", 1)[1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time:") and "|" in ln]
    return r.stdout, mods


def _pandas_loaded(mods: list[str]) -> bool:
    """pandas was loaded: its own modules ran (a refused attempt is listed as ``pandas`` alone)."""
    return any(m.startswith("pandas.") for m in mods)


def test_messages_runs_without_pandas_and_prints_the_same(synthetic, capsys):
    root, _ = synthetic
    argv = ["messages", str(root), "--topic", "orders", "--format", "jsonl"]
    out, mods = _program(*argv)
    assert "pyarrow" in mods and not _pandas_loaded(mods)
    assert main(argv) == 0  # in this process, where pandas may be loaded
    assert out == capsys.readouterr().out and out.count("\n") > 10


def test_a_local_parquet_export_runs_without_pandas(synthetic, tmp_path):
    root, _ = synthetic
    out, mods = _program("export", str(root), "--to", "parquet", str(tmp_path / "out"), "--engine", "local")
    assert not _pandas_loaded(mods)
    assert list((tmp_path / "out").rglob("*.parquet"))


@pytest.mark.parametrize(
    ("argv", "needs"),
    [
        (["messages", "d"], False),
        (["sql", "d", "SELECT 1"], False),
        (["export", "d", "--to", "parquet", "o", "--engine", "local"], False),
        (["export", "d", "--to", "parquet", "o"], True),  # auto may choose Spark
        (["export", "d", "--to", "parquet", "o", "--engine", "spark"], True),
        (["export", "d", "--to", "delta", "o", "--engine", "local"], True),
    ],
)
def test_only_an_export_through_spark_or_a_table_library_may_load_pandas(argv, needs):
    args = build_parser().parse_args(argv)
    assert isinstance(args, argparse.Namespace) and _needs_pandas(args) is needs
