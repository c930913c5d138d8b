#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ (one per parser of outside input, see
# harness/src/inputs.rs), each for SECONDS (default 60), and prints a table:
# executions, executions per second, corpus size, and how each ended.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     # every target when none is named
#
# Needs the nightly toolchain and cargo-fuzz (scripts/setup.sh --test installs
# it). Seeds are made afresh from the tree each time (fuzz/seeds/<target>/: the
# captures, scenarios, profiles, the filters and fault rules of the docs and
# tests, handshakes and agent messages made with the inputs' fixed key); what a
# target finds stays in fuzz/corpus/<target>/ for the next run. A crash, a
# hang (-timeout), an allocation over -malloc_limit_mb or a process over
# -rss_limit_mb fails the run, and its input is in fuzz/artifacts/<target>/:
# fix the parser, then keep the input in fuzz/regressions/<target>/, which
# tests/tests/fuzz_inputs.rs runs on every `cargo test`.
#
# FUZZ_PARALLEL=N runs N targets at a time (default 1).
# FUZZ_SANITIZER=none builds without AddressSanitizer (into fuzz/target/none/):
# five times the executions for long runs, at a cost: -malloc_limit_mb needs a
# sanitizer's allocator, so only -rss_limit_mb still stops an unbounded
# allocation. The parsers have no `unsafe` of their own; ASan (the default)
# watches their dependencies'.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
secs=${1:-60}
[[ $# -gt 0 ]] && shift
all=(capture frame filter scenario fault_rule profile handshake message)
targets=("$@")
(( ${#targets[@]} )) || targets=("${all[@]}")
for t in "${targets[@]}"; do
    [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: no target $t (targets: ${all[*]})" >&2; exit 2; }
done

# Debug assertions on (overflow checks: a wrapped length is a bug too), ASan on
# (what makes -malloc_limit_mb work).
san=${FUZZ_SANITIZER:-address}
case $san in
    address) build=(-O -a) ;;
    none) build=(-O -a -s none --target-dir fuzz/target/none) ;;
    *) echo "fuzz.sh: FUZZ_SANITIZER is address or none, not $san" >&2; exit 2 ;;
esac
say() { printf '==> %s\n' "$*" >&2; }
say "building the fuzz targets (cargo +nightly fuzz build ${build[*]})"
cargo +nightly fuzz build "${build[@]}"
bin=fuzz/target/x86_64-unknown-linux-gnu/release
[[ $san == none ]] && bin=fuzz/target/none/x86_64-unknown-linux-gnu/release

rm -rf fuzz/seeds
"$bin/seeds" fuzz/seeds >&2
# The scenario target's fixture tree (one per process) goes where it is cleared.
export TMPDIR=$root/fuzz/target/tmp
rm -rf "$TMPDIR"
mkdir -p "$TMPDIR" fuzz/target/logs

run() {
    local t=$1
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t" "fuzz/seeds/$t"
    local rc=0
    cargo +nightly fuzz run "${build[@]}" "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" \
        </dev/null >"fuzz/target/logs/$t.log" 2>&1 || rc=$?
    echo "$rc" >"fuzz/target/logs/$t.rc"
}

jobs_max=${FUZZ_PARALLEL:-1}
for t in "${targets[@]}"; do
    say "fuzzing $t for ${secs}s ($san)"
    run "$t" &
    while (( $(jobs -rp | wc -l) >= jobs_max )); do wait -n || true; done
done
wait

failed=0
printf '\n%-11s %14s %9s %8s  %s\n' target executions exec/s corpus result
for t in "${targets[@]}"; do
    log=fuzz/target/logs/$t.log
    rc=$(cat "fuzz/target/logs/$t.rc")
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
    corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
    result=ok
    if (( rc != 0 )); then
        failed=1
        what=$(grep -oE 'ERROR: libFuzzer: [a-z-]+|panicked at [^ ]+' "$log" | head -1 || true)
        artifact=$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -1 | sed 's/Test unit written to //' || true)
        result="FAILED (exit $rc${what:+: $what}) ${artifact:-see $log}"
    fi
    printf '%-11s %14s %9s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$corpus" "$result"
done
if (( failed )); then
    echo "fuzz.sh: a target crashed, hung or ran out of memory: its input is the artifact above (logs in fuzz/target/logs/)" >&2
    exit 1
fi
