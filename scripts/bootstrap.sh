#!/usr/bin/env bash
# Creates .venv, installs the Python dependencies and builds the native module (release).
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet "maturin>=1.7,<2" -e ".[test]" --no-build-isolation 2>/dev/null || true
python -m pip install --quiet "maturin>=1.7,<2" "protobuf>=5.26" "pyarrow>=15" pytest hypothesis pytest-benchmark \
  pytest-timeout crc32c "pulsar-client>=3.5" "pyspark>=4.0" "rich>=13"
maturin develop --release --quiet 2>&1 | grep -v "^$" | tail -3
