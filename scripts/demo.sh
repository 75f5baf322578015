#!/usr/bin/env bash
# The main job on an embedded default, from a fresh machine: installs, builds, runs.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
. .venv/bin/activate
exec python -m pulsarkit.demo "$@"
