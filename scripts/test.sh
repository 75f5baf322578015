#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what it needs, builds, then runs
# Rust tests, the wheel smoke test (clean venv), the bounded fuzz run, the benchmark smoke run and
# pytest (unit, property, interop with the real pulsar-client, the Java libraries and a real Pulsar
# standalone, Spark).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
. .venv/bin/activate
echo "== cargo test"
mkdir -p target/bench
if ! cargo test --manifest-path rust/Cargo.toml --features fuzzing --quiet > target/cargo-test.log 2>&1; then
  cat target/cargo-test.log
  exit 1
fi
grep -E "^test result" target/cargo-test.log | sed 's/^/  rust: /' 
echo "== wheel: release build, clean-venv install and use (scripts/wheel_smoke.sh)"
./scripts/wheel_smoke.sh
if [ -x scripts/fuzz.sh ]; then
  echo "== fuzz (bounded)"
  scripts/fuzz.sh "${PULSARKIT_FUZZ_SECONDS:-10}"
fi
if [ -d bench ]; then
  echo "== benchmarks (smoke: each benchmark once, results checked)"
  python -m pytest bench -q -p no:cacheprovider --timeout=600
  echo "== benchmark regression check (a quick measured subset; warns on a ratio drop > 30%, never fails)"
  python -m pytest bench/test_bench_codec.py bench/test_bench_bulk.py -q -p no:cacheprovider --timeout=600 \
    --benchmark-enable --bench-summary=target/bench/ci-ratios.json > target/bench-ci.log 2>&1 || { cat target/bench-ci.log; exit 1; }
  python bench/regression.py target/bench/ci-ratios.json --baseline bench/baseline-ratios.json
fi
echo "== pytest (the Java harnesses and the Pulsar standalone build with Maven: the first run downloads about 330 MB)"
exec python -m pytest tests -q -p no:cacheprovider --timeout=900 "$@"
