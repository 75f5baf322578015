#!/usr/bin/env bash
# Fuzzes every parser of the core.
#
#   scripts/fuzz.sh [seconds-per-target] [--libfuzzer] [--targets a,b]
#
# 1. Always: the stable, bounded mutation fuzzer (rust/tests/fuzz_bounded.rs) in a release build that
#    keeps overflow checks and debug assertions (an overflow is a finding). Each target of
#    `pulsarkit::fuzz::targets()` runs for `seconds` (default 20; 16 targets, so about 6 minutes; CI runs
#    10), seeded from valid entries, batches, codec streams, BEM-prefixed entries, frame streams, entry
#    logs and bookie entries. Any panic fails with the target and the input hex
#    (the input is also saved under target/fuzz-driver/tmp/fuzz-failures/). CI runs this.
# 2. With --libfuzzer, when a nightly toolchain and cargo-fuzz are installed: the cargo-fuzz targets
#    in rust/fuzz for the same time each, starting from the same seeds. Otherwise it says why it skips.
#
# Reproduce a failure:  PULSARKIT_FUZZ_REPLAY=<target>:<absolute path> scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."

secs=20
libfuzzer=0
targets=""
while [ $# -gt 0 ]; do
    case "$1" in
        --libfuzzer) libfuzzer=1 ;;
        --targets) targets="$2"; shift ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) secs="$1" ;;
    esac
    shift
done

export PULSARKIT_FUZZ_SECONDS="$secs"
[ -n "$targets" ] && export PULSARKIT_FUZZ_TARGETS="$targets"

# Release optimisation with overflow checks and debug assertions on; no LTO, many codegen units
# (build time matters more than the last few percent of speed). Its own target dir, so these
# flags never invalidate the normal release build.
export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true
export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
echo "== bounded mutation fuzzer: ${secs}s per target =="
cargo test --manifest-path rust/Cargo.toml --features fuzzing --release --target-dir target/fuzz-driver \
    --test fuzz_bounded -- --nocapture --test-threads 1

[ "$libfuzzer" = 1 ] || exit 0

echo "== libFuzzer targets (cargo-fuzz): ${secs}s per target =="
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "skipping libFuzzer targets: no nightly toolchain (rustup toolchain install nightly)"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "skipping libFuzzer targets: cargo-fuzz is not installed (cargo install cargo-fuzz)"
    exit 0
fi

corpus="$PWD/rust/fuzz/corpus"
# Seed corpora: the driver writes its seeds and runs them once (0 seconds of mutation).
PULSARKIT_FUZZ_SECONDS=0 PULSARKIT_FUZZ_WRITE_CORPUS="$corpus" \
    cargo test --manifest-path rust/Cargo.toml --features fuzzing --release --target-dir target/fuzz-driver \
    --test fuzz_bounded -q -- --test-threads 1 >/dev/null

unset CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS
unset CARGO_PROFILE_RELEASE_LTO CARGO_PROFILE_RELEASE_CODEGEN_UNITS
cd rust
summary=""
status=0
for t in $(cargo +nightly fuzz list); do
    if [ -n "$targets" ] && ! printf ',%s,' "$targets" | grep -q ",$t,"; then
        continue
    fi
    mkdir -p "$corpus/$t"
    log=$(mktemp)
    # -rss_limit_mb and -malloc_limit_mb mirror the stable driver's 64 MiB single-allocation ceiling.
    if cargo +nightly fuzz run "$t" "$corpus/$t" -- \
        -max_total_time="$secs" -max_len=1048576 -malloc_limit_mb=64 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1; then
        result=ok
    else
        result=FAILED
        status=1
        tail -40 "$log"
    fi
    runs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -1)
    persec=$(grep -E '^stat::average_exec_per_sec' "$log" | awk '{print $2}' | tail -1)
    summary+=$(printf '%-18s %10s %10s  %s' "$t" "${runs:-?}" "${persec:-?}" "$result")$'\n'
    rm -f "$log"
done
printf '%-18s %10s %10s\n%s' "target" "execs" "execs/s" "$summary"
exit $status
