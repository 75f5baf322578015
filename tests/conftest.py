import importlib
import os
import shutil
from types import ModuleType

import pulsarkit as pk
import pytest
from helpers import Clock

IN_CI = os.environ.get("CI") == "true"


def require_tool(name: str, why: str) -> str:
    """Path of a command-line tool; in CI a missing one fails, elsewhere the test skips visibly."""
    path = shutil.which(name)
    if path is None:
        msg = f"{name} not found on PATH: {why}"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def require_module(name: str, install: str) -> ModuleType:
    """An optional module the calling test module needs; in CI a missing one fails, elsewhere the whole
    module skips visibly, saying how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:  # pragma: no cover - depends on the environment
        if IN_CI:
            raise
        pytest.skip(f"{install.split()[-1]} is not installed ({install})", allow_module_level=True)


@pytest.fixture(scope="session")
def spark():
    require_tool("java", "the Spark tests run a local Spark session (a JVM)")
    try:
        import pyspark  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        if IN_CI:
            pytest.fail(f"pyspark is not installed: {e}")
        pytest.skip(f"pyspark is not installed: {e}")
    from pulsarkit.spark import local_session

    session = local_session(
        2,
        "pulsarkit-tests",
        conf={
            "spark.driver.memory": "512m",
            "spark.default.parallelism": "2",
            # Small Arrow batches: each partition then sends several batches, which exercises the
            # batch-relative entry_index of explode.
            "spark.sql.execution.arrow.maxRecordsPerBatch": "4",
            "spark.python.worker.reuse": "true",
        },
    )
    yield session
    session.stop()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path, clock):
    """An embedded store (managed-ledger factory) under a temporary directory, on the test clock."""
    s = pk.Store.open(tmp_path / "data", clock=clock)
    yield s
    s.close()


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """A synthetic Pulsar data directory (tests/datadir_fixtures.py) and what was written to it."""
    from datadir_fixtures import build_synthetic

    return build_synthetic(tmp_path_factory)
