#!/usr/bin/env bash
# Installs everything `roce` needs on a Debian 12 machine (run as root) and puts
# `roce` on PATH (~/.cargo/bin). Safe to run again: every step is idempotent.
#
#   bash scripts/setup.sh            # build deps + roce
#   bash scripts/setup.sh --test     # also what the test suite needs (tshark, mdbook, lab)
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
[[ "${1:-}" == "--test" ]] && want_test=1

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# Debian packages. Build: libpcap (live capture), libibverbs/librdmacm + libclang
# (rdma-sys runs bindgen). Lab: qemu, debootstrap, e2fsprogs, xz-utils and zstd (unpack the
# guest kernel for a faster boot). Tests: tshark; chromium, chromium-driver and
# python3-selenium (the HTML report's ladder checked in a headless browser);
# python3-venv, for pyarrow, duckdb and pyspark from PyPI (Parquet files read back by
# other readers); openjdk-17-jre-headless, the JVM pyspark runs Spark in (Spark 4 needs
# Java 17 or later); man-db, to render `roce man`'s pages.
pkgs=(build-essential pkg-config libpcap-dev libibverbs-dev librdmacm-dev libclang-dev clang
      qemu-system-x86 debootstrap e2fsprogs xz-utils zstd)
(( want_test )) && pkgs+=(tshark chromium chromium-driver python3-selenium python3-venv
                          openjdk-17-jre-headless man-db)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} )); then
    say "installing Debian packages: ${missing[*]}"
    if [[ $(id -u) -ne 0 ]]; then
        echo "error: need root to install ${missing[*]} (run as root, or install them yourself)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Rust: Debian 12's rustc (1.63) is too old for our dependencies; use rustup's.
if ! command -v cargo >/dev/null 2>&1; then
    [[ -x "$HOME/.cargo/bin/cargo" ]] || {
        say "installing the Rust toolchain with rustup"
        command -v curl >/dev/null || apt-get install -y -q curl
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    }
    export PATH="$HOME/.cargo/bin:$PATH"
fi

# The Parquet tests read `roce`'s files back with pyarrow and query a dataset with
# DuckDB and with Spark in local mode (none packaged in Debian 12): a virtualenv of
# their own, pinned. pip adds what is missing and leaves the pinned packages already
# there alone, so an older venv (without pyspark) is completed, not rebuilt.
if (( want_test )); then
    py=${ROCE_PYTHON_ENV:-$HOME/.cache/roce/py}
    if ! "$py/bin/python" -c 'import pyarrow, duckdb, pyspark' 2>/dev/null; then
        say "installing pyarrow, duckdb and pyspark into $py (the Parquet tests' readers)"
        [[ -x "$py/bin/python" ]] || python3 -m venv "$py"
        "$py/bin/pip" install --quiet --disable-pip-version-check 'pyarrow==26.0.1' 'duckdb==2.0.0' \
            'pyspark==4.3.0'
    fi
fi

# The book (docs/): `mdbook build docs` is one of the tests (tests/tests/docs.rs,
# the_book_builds). mdbook from crates.io, pinned, without its server and file
# watcher (only `build` is used).
if (( want_test )) && ! mdbook --version 2>/dev/null | grep -qx 'mdbook v0.5.4'; then
    say "installing mdbook 0.5.4 (the book's build test; a few minutes, once)"
    cargo install --quiet --locked mdbook --version 0.5.4 --no-default-features --features search --root "$HOME/.cargo"
fi

# The parsers' fuzz targets (fuzz/, scripts/fuzz.sh): cargo-fuzz, pinned, for the
# nightly toolchain libFuzzer needs (without nightly, scripts/test.sh skips them).
if (( want_test )) && cargo +nightly --version >/dev/null 2>&1 \
    && ! cargo fuzz --version 2>/dev/null | grep -q '0\.13\.2'; then
    say "installing cargo-fuzz 0.13.2 (the fuzz targets' runner; a minute, once)"
    cargo install --quiet --locked cargo-fuzz --version 0.13.2 --root "$HOME/.cargo"
fi

say "building and installing roce ($(cargo --version))"
cargo install --quiet --locked --path harness --root "$HOME/.cargo" --force --target-dir target
say "roce is at $HOME/.cargo/bin/roce"

# Shell completions and manual pages, made by the binary from its own options: for
# everyone as root, else under ~/.local/share (bash-completion and man look there).
roce=$HOME/.cargo/bin/roce
if [[ $(id -u) -eq 0 ]]; then
    bash_dir=/usr/share/bash-completion/completions
    zsh_dir=/usr/local/share/zsh/site-functions
    fish_dir=/usr/local/share/fish/vendor_completions.d
    man_dir=/usr/local/share/man/man1
else
    data=${XDG_DATA_HOME:-$HOME/.local/share}
    bash_dir=$data/bash-completion/completions
    zsh_dir=$data/zsh/site-functions
    fish_dir=${XDG_CONFIG_HOME:-$HOME/.config}/fish/completions
    man_dir=$data/man/man1
fi
install_completion() { # SHELL FILE
    mkdir -p "$(dirname "$2")" && "$roce" completions "$1" >"$2.tmp" && mv -f "$2.tmp" "$2"
}
if install_completion bash "$bash_dir/roce" && install_completion zsh "$zsh_dir/_roce" \
    && install_completion fish "$fish_dir/roce.fish" && "$roce" man --dir "$man_dir" >/dev/null; then
    say "completions in $bash_dir, $zsh_dir and $fish_dir; manual pages in $man_dir (man roce-decode)"
else
    echo "note: the completions or manual pages could not be installed (see above); roce works without them" >&2
fi
