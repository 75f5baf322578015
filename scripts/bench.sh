#!/usr/bin/env bash
# Runs every benchmark and regenerates the figures in bench/RESULTS.md:
#   1. pytest-benchmark (bench/): pulsarkit against Python baselines, timed in the same session;
#   2. criterion (rust/benches/kernels.rs): the Rust kernels on their own;
#   3. pulsarkit against the Java implementations (bench/java_compare.py, JMH in bench/java): its table goes to
#      target/bench/java_compare.md (figures quoted by hand in RESULTS.md); skipped without java and mvn, or with
#      BENCH_JAVA=0. BENCH_JAVA_ARGS passes options (e.g. "--rounds 3").
# Usage: scripts/bench.sh [--no-criterion] [extra pytest args...]   (BENCH_PATHS="bench/test_x.py ..." to narrow)
# BENCH_TIMER picks the pytest timer (default: process CPU time, so other jobs on a shared machine do
# not count against either side; use time.perf_counter for wall clock).
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate

CRITERION=1
if [ "${1:-}" = "--no-criterion" ]; then CRITERION=0; shift; fi
TIMER=${BENCH_TIMER:-time.process_time}
TARGET=$(cargo metadata --format-version 1 --no-deps --manifest-path rust/Cargo.toml \
  | python -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
OUT="$TARGET/bench"
mkdir -p "$OUT"
LOAD=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")

# The native module must match the sources being measured.
maturin develop --release --quiet

read -r -a PATHS <<< "${BENCH_PATHS:-bench}"
PYTEST=(python -m pytest "${PATHS[@]}" -p no:cacheprovider -q --benchmark-enable "--benchmark-timer=$TIMER"
        "--benchmark-json=$OUT/pytest-benchmark.json" "--bench-summary=$OUT/ratios.json" "$@")
echo "+ ${PYTEST[*]}"
STATUS=0
"${PYTEST[@]}" || STATUS=$?  # still run criterion and write the report; fail at the end

CARGO=(cargo bench --manifest-path rust/Cargo.toml --bench kernels -- --warm-up-time 0.5 --measurement-time 2)
if [ "$CRITERION" = 1 ]; then
  rm -rf "$TARGET/criterion"  # only this run's figures go into the report
  echo "+ ${CARGO[*]}"
  "${CARGO[@]}" | tee "$OUT/criterion.txt"
fi

CRIT_DIR="$TARGET/criterion"
[ "$CRITERION" = 1 ] || CRIT_DIR="$OUT/criterion-skipped"  # never report an older run's figures
python bench/report.py --summary "$OUT/ratios.json" --criterion "$CRIT_DIR" \
  --command "${PYTEST[*]} ; ${CARGO[*]}" --load "$LOAD" --out bench/RESULTS.md

echo
echo "== pulsarkit vs the Java implementations (bench/java_compare.py)"
if [ "${BENCH_JAVA:-1}" = 0 ]; then
  echo "SKIPPED: BENCH_JAVA=0"
elif ! command -v java > /dev/null || ! command -v mvn > /dev/null; then
  echo "SKIPPED: java and mvn are needed (a JDK 17+ and Maven) to compare with Pulsar's and BookKeeper's Java code"
else
  read -r -a JAVA_ARGS <<< "${BENCH_JAVA_ARGS:-}"
  echo "+ python bench/java_compare.py ${JAVA_ARGS[*]}"
  python bench/java_compare.py "${JAVA_ARGS[@]}" || STATUS=$?
fi
exit "$STATUS"
