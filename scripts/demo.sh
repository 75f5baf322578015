#!/usr/bin/env bash
# The main job on an embedded default, from a fresh machine: installs, builds, runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# Build and install chatter goes to stderr: with --json, stdout holds only the JSON summary.
./scripts/bootstrap.sh >&2
. .venv/bin/activate
exec python -m pulsarkit.demo "$@"
