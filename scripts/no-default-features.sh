#!/usr/bin/env bash
# The analyzer where there is no RDMA stack: `roce` built with
# `--no-default-features` (no `verbs`, `live` or `lab`) must pull neither
# rdma-sys, bindgen (libclang) nor pcap into its build, link neither libibverbs,
# librdmacm nor libpcap, pass clippy and its own unit tests, and decode every
# capture in captures/ exactly as the full build does: stdout, stderr and exit
# status, in each output form. Run by scripts/test.sh; alone:
#
#   bash scripts/no-default-features.sh
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "error: $*" >&2; exit 1; }

# What its build pulls in (before building: a wrong dependency is said at once).
if pulled=$(cargo tree --locked -p roce --no-default-features -e normal,build --prefix none \
        | grep -E '^(rdma-sys|pcap|pcap-sys|bindgen|clang-sys) '); then
    fail "roce --no-default-features still builds with: $(sort -u <<<"$pulled" | tr '\n' ' ')"
fi

cargo clippy --locked --profile ci -p roce --no-default-features --lib --bins -- -D warnings
cargo test --locked --profile ci -p roce --no-default-features --lib

# Both binaries, side by side (one target directory: only the roce crate differs).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build --locked --profile ci -p roce --no-default-features
cp target/ci/roce "$work/lean"
cargo build --locked --profile ci -p roce
cp target/ci/roce "$work/full"

# What it links. The full build must (or this check looks at the wrong file).
if linked=$(ldd "$work/lean" | grep -E 'libibverbs|librdmacm|libpcap'); then
    fail "roce --no-default-features links: $linked"
fi
ldd "$work/full" | grep -q libibverbs || fail "the full build links no libibverbs: is this the right binary?"

# The same answers, byte for byte.
forms=(
    ""
    "-V"
    "-T json"
    "-T fields -e frame.number -e ip.src -e udp.srcport -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.psn -e infiniband.aeth.syndrome -e infiniband.reth.dma_length"
    "-Y infiniband.aeth.syndrome.opcode==3 || infiniband.bth.opcode==17"
)
run() { # BIN ARGS... -> $work/out.BIN (stdout, stderr, exit status)
    local bin=$1; shift
    local rc=0
    "$work/$bin" "$@" >"$work/out.$bin" 2>"$work/err.$bin" || rc=$?
    echo "exit $rc" >>"$work/err.$bin"
}
compared=0
while IFS= read -r -d '' cap; do
    for form in "${forms[@]}" flows; do
        if [[ $form == flows ]]; then
            args=(flows --json "$cap")
        elif [[ $form == -Y* ]]; then
            args=(decode -Y "${form#-Y }" "$cap")
        else
            # shellcheck disable=SC2206 # the form's words are options
            args=(decode $form "$cap")
        fi
        run full "${args[@]}"
        run lean "${args[@]}"
        for s in out err; do
            what=stdout
            [[ $s == err ]] && what="stderr and exit status"
            cmp -s "$work/$s.full" "$work/$s.lean" \
                || fail "roce ${args[*]}: the lean build's $what differ from the full build's:
$(diff "$work/$s.full" "$work/$s.lean" | head -20)"
        done
        compared=$((compared + 1))
    done
done < <(find captures \( -name '*.pcap' -o -name '*.pcapng' \) -print0 | sort -z)
((compared > 0)) || fail "no captures under captures/ to compare"
echo "roce --no-default-features: links no libibverbs, librdmacm or libpcap; $compared decodes and flow reports of captures/ identical to the full build's"
