import os
import shutil

import pytest

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
