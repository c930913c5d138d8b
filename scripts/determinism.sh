#!/usr/bin/env bash
# Is every verdict the same on every run? Runs the seed suite N times on one lab
# image, each held to that image's profile, and compares every run's suite.json
# with the first (`roce diff`, which also compares each scenario's observations).
# Exit 0: N identical suites. Exit 1: the runs that differed, and how, are listed.
#
#   bash scripts/determinism.sh [N=10] [IMAGE=bookworm] [OUT=target/determinism]
#
# It uses the release binary (built if missing; $ROCE names another) and the lab named after the
# image; one lab pair at a time on a 2-core machine (TCG pairs starve each other).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10}
image=${2:-bookworm}
out=${3:-target/determinism}/$image
case $image in
    bookworm) profile=profiles/rxe-linux-6.1.toml ;;
    trixie) profile=profiles/rxe-linux-6.12.toml ;;
    trixie-backports) profile=profiles/rxe-linux-7.3.toml ;;
    *) echo "determinism.sh: no profile for image '$image' (bookworm, trixie, trixie-backports)" >&2; exit 2 ;;
esac
roce=${ROCE:-target/release/roce}
[[ -x $roce ]] || cargo build --release --locked -p roce
mkdir -p "$out"
differed=0
for i in $(seq 1 "$n"); do
    run=$out/run-$i
    rm -rf "$run"
    # A scenario failing is for the comparison to show, not a reason to stop.
    "$roce" suite scenarios/ --image "$image" --out "$run" --profile "$profile" \
        >"$run.log" 2>&1 || true
    summary=$(grep -E '^[0-9]+ passed' "$run.log" | tail -1 || true)
    if [[ ! -f $run/suite.json ]]; then
        echo "run $i: no suite.json (see $run.log)" >&2
        differed=1
        continue
    fi
    if ((i == 1)); then
        echo "run 1: $summary"
    elif "$roce" diff "$out/run-1/suite.json" "$run/suite.json" >"$run.diff" 2>&1; then
        echo "run $i: $summary; the same as run 1"
    else
        echo "run $i: $summary; differs from run 1:"
        sed 's/^/    /' "$run.diff"
        differed=1
    fi
done
"$roce" lab --image "$image" down >/dev/null 2>&1 || true
exit "$differed"
