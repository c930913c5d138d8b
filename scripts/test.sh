#!/usr/bin/env bash
# Runs the whole test suite, installing first what the tests need. This is the
# README's test command and exactly what CI (.ci/run) runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
export PATH="$HOME/.cargo/bin:$PATH"
cargo test --workspace --locked --release

# ---- lab (`roce lab`, harness/src/lab) ----------------------------------------------
# Builds the VM images, bookworm and trixie (cached in ~/.cache/roce/lab or
# $ROCE_LAB_DIR: only the first run on a machine pays for debootstrap, ~1-5 min
# each; needs root) and runs the lab's
# end-to-end tests: boot two Soft-RoCE VMs under TCG, an ibv_rc_pingpong run whose
# capture is decoded and checked, exec, a dropped packet, crash recovery (~1 min);
# then every seed scenario in scenarios/ run for real with `roce suite` on each
# image, held to its profile, and the two compared with `roce diff` (~2 min).
# ROCE_LAB=0 skips this block.
if [[ "${ROCE_LAB:-1}" != 0 ]]; then
    cargo build --locked --release -p roce
    printf '\033[1m==> %s\033[0m\n' "lab: VM images (roce lab build, cached): bookworm and trixie" >&2
    target/release/roce lab build
    target/release/roce lab build --release trixie
    printf '\033[1m==> %s\033[0m\n' "lab: end-to-end test (two TCG VMs)" >&2
    # One lab at a time: two TCG pairs on a small host would starve each other.
    ROCE_LAB=1 cargo test --locked --release -p roce --test lab --test scenarios_lab -- --test-threads=1
fi
# ---- end of the lab block -----------------------------------------------------------
