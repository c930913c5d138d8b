#!/usr/bin/env bash
# Runs the whole test suite, installing first what the tests need. This is the
# README's test command and exactly what CI (.ci/run) runs.
#
# A plain `cargo test --workspace` needs nothing but the build: every test that
# needs tshark, pyarrow, chromium, mdbook, root or the lab is #[ignore = "needs …"], and
# the summary counts them. This script runs them too, on purpose, in three passes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
export PATH="$HOME/.cargo/bin:$PATH"
# Each step says how far into the run it starts: where CI's time goes.
say() { printf '\033[1m==> [%s s] %s\033[0m\n' "$SECONDS" "$*" >&2; }

say "style: cargo fmt --check, cargo clippy -D warnings, layer order (each crate's LAYERS)"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The layer checker is the team's shared tool (../shared/tools beside the clone, as CI has
# it); a clone without it says so and goes on.
layers=../shared/tools/rust-layers.py
if [[ -f $layers ]]; then
    for crate in dissector lab harness; do
        printf '%s: ' "$crate"
        python3 "$layers" "$crate/src"
    done
else
    echo "note: no $layers beside this clone: the layer order (each crate's LAYERS) is not checked" >&2
fi

say "tests that need nothing but the build"
cargo test --workspace --locked --profile ci

say "fuzz targets, briefly: scripts/fuzz.sh 10 (libFuzzer under cargo +nightly fuzz)"
if cargo +nightly --version >/dev/null 2>&1; then
    bash scripts/fuzz.sh 10
else
    echo "note: no nightly toolchain (rustup toolchain install nightly): the fuzz targets (fuzz/) are not run" >&2
fi

say "the analyzer without an RDMA stack: roce --no-default-features (what it links, clippy, its tests, captures/ decoded as the full build does)"
bash scripts/no-default-features.sh

say "tests that need tshark, pyarrow, chromium, mdbook or root (installed above; CI runs as root)"
cargo test --workspace --locked --profile ci -- --ignored --skip in_lab::

# ---- lab (`roce lab`, lab/) -------------------------------------------------------------
# Builds the VM images, bookworm, trixie and trixie-backports (cached in
# ~/.cache/roce/lab or $ROCE_LAB_DIR: only the first run on a machine pays for
# debootstrap, ~1-5 min each; needs root) and runs the lab's
# end-to-end tests (`in_lab::…`): boot two Soft-RoCE VMs under TCG, an ibv_rc_pingpong run whose
# capture is decoded and checked, exec, a dropped packet, crash recovery (~1 min);
# then every seed scenario in scenarios/ run for real with `roce suite` on each
# image, held to its profile, and each kernel compared with the one before it
# (`roce diff`; ~2 min per image).
# ROCE_LAB=0 skips this block.
if [[ "${ROCE_LAB:-1}" != 0 ]]; then
    cargo build --locked --profile ci -p roce
    say "lab: VM images (roce lab build, cached): bookworm, trixie, trixie-backports"
    target/ci/roce lab build
    target/ci/roce lab build --release trixie
    target/ci/roce lab build --release trixie-backports
    say "lab: end-to-end tests (two TCG VMs)"
    # One lab at a time: two TCG pairs on a small host would starve each other.
    cargo test --locked --profile ci -p roce --test lab --test scenarios_lab -- --ignored --test-threads=1
fi
# ---- end of the lab block -----------------------------------------------------------
