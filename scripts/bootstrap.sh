#!/usr/bin/env bash
# Creates .venv, installs the Python dependencies and builds the native module (release).
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt
maturin develop --release --quiet
