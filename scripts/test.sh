#!/usr/bin/env bash
# Runs the whole test suite, installing first what the tests need. This is the
# README's test command and exactly what CI (.ci/run) runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
export PATH="$HOME/.cargo/bin:$PATH"
cargo test --workspace --locked --release
