#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what it needs, builds, then runs
# Rust tests, the bounded fuzz run, the benchmark smoke run and pytest (unit, property,
# interop with the real pulsar-client and the Java libraries, Spark).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
. .venv/bin/activate
echo "== cargo test"
cargo test --manifest-path rust/Cargo.toml --quiet 2>&1 | grep -E "^(test result|error|failures|---- )|panicked" || true
cargo test --manifest-path rust/Cargo.toml --quiet >/dev/null 2>&1 || { cargo test --manifest-path rust/Cargo.toml; exit 1; }
if [ -x scripts/fuzz.sh ]; then
  echo "== fuzz (bounded)"
  scripts/fuzz.sh "${PULSARKIT_FUZZ_SECONDS:-10}"
fi
if [ -d bench ]; then
  echo "== benchmarks (smoke: each benchmark once, results checked)"
  python -m pytest bench -q -p no:cacheprovider --timeout=600
fi
echo "== pytest"
exec python -m pytest tests -q -p no:cacheprovider --timeout=900 "$@"
