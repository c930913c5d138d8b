#!/usr/bin/env bash
# Regenerates captures/lab/*.pcapng — real Soft-RoCE traffic between the two lab VMs —
# and captures/lab/README.md, which lists the exact `roce lab run` behind each file.
#
#   bash scripts/lab-captures.sh            # all of them
#   bash scripts/lab-captures.sh rping      # only the named ones
#
# Needs the lab image (`roce lab build`); boots the lab if it is not up and takes it
# down again afterwards in that case. PSNs, QPNs, ports and times differ on every run.
set -euo pipefail
cd "$(dirname "$0")/.."
roce=${ROCE:-target/release/roce}
out=captures/lab
mkdir -p "$out"

# name | what it shows | arguments of `roce lab run` (without -w)
captures=(
  "rc_pingpong|RC SEND First/Middle/Last and ACKs (ibv_rc_pingpong, 4096-byte messages, MTU 1024)|--a 'ibv_rc_pingpong -g 1 -n 3' --b 'ibv_rc_pingpong -g 1 -n 3 {a}'"
  "uc_pingpong|UC SENDs: no ACKs|--a 'ibv_uc_pingpong -g 1 -n 3' --b 'ibv_uc_pingpong -g 1 -n 3 {a}'"
  "ud_pingpong|UD SEND Only with DETH|--a 'ibv_ud_pingpong -g 1 -n 3 -s 512' --b 'ibv_ud_pingpong -g 1 -n 3 -s 512 {a}'"
  "srq_pingpong|RC SENDs on two QPs sharing an SRQ|--a 'ibv_srq_pingpong -g 1 -n 3 -q 2' --b 'ibv_srq_pingpong -g 1 -n 3 -q 2 {a}'"
  "send_bw|perftest SEND|--a 'ib_send_bw -d rxe0 -x 1 -s 64 -n 5 -F' --b 'ib_send_bw -d rxe0 -x 1 -s 64 -n 5 -F {a}'"
  "write_bw|perftest RDMA WRITE Only + ACKs|--a 'ib_write_bw -d rxe0 -x 1 -s 64 -n 5 -F' --b 'ib_write_bw -d rxe0 -x 1 -s 64 -n 5 -F {a}'"
  "read_bw|perftest RDMA READ Request / Response|--a 'ib_read_bw -d rxe0 -x 1 -s 64 -n 5 -F' --b 'ib_read_bw -d rxe0 -x 1 -s 64 -n 5 -F {a}'"
  "atomic_bw|perftest FetchAdd / ATOMIC Acknowledge|--a 'ib_atomic_bw -d rxe0 -x 1 -n 5 -F' --b 'ib_atomic_bw -d rxe0 -x 1 -n 5 -F {a}'"
  "write_bw_rdma_cm|perftest over rdma_cm (-R): CM MADs on QP1, then RDMA WRITEs|--a 'ib_write_bw -R -d rxe0 -x 1 -s 64 -n 5 -F' --b 'ib_write_bw -R -d rxe0 -x 1 -s 64 -n 5 -F {a}'"
  "rping|rdma_cm connection, RDMA READ/WRITE ping-pong (rping)|--a 'rping -s -a {a} -C 3 -v' --b 'rping -c -a {a} -C 3 -v'"
  "udaddy|rdma_cm UD: SIDR REQ/REP, UD SENDs|--a 'udaddy -C 2' --b 'udaddy -s {a} -C 2'"
  "ucmatose|rdma_cm RC: REQ/REP/RTU, SENDs, DREQ/DREP|--a 'ucmatose -C 2' --b 'ucmatose -s {a} -C 2'"
  "rc_drop_retransmit|a dropped RC SEND First: PSN sequence error NAK, then the retransmission (the dropped frame is kept, commented)|--a 'ibv_rc_pingpong -g 1 -n 3' --b 'ibv_rc_pingpong -g 1 -n 3 {a}' --fault 'drop dir=b>a op=send-first nth=1'"
  "rc_drop_timeout|a dropped RC SEND Last: nothing follows it, the requester times out and resends the message|--a 'ibv_rc_pingpong -g 1 -n 2' --b 'ibv_rc_pingpong -g 1 -n 2 {a}' --fault 'drop dir=b>a op=send-last nth=1'"
  "rc_ce_mark|an RC SEND Last with ECN set to CE by the switch (IPv4 checksum fixed, ICRC still valid: it masks the TOS byte; rxe sends no CNP)|--a 'ibv_rc_pingpong -g 1 -n 2' --b 'ibv_rc_pingpong -g 1 -n 2 {a}' --fault 'ce dir=b>a op=send-last nth=1'"
)

# One seed scenario each, run with `roce run --image IMAGE`, its capture kept.
# name | image | what it shows | scenario file
scenario_captures=(
  "requester_nak_psn_seq|bookworm|the lab switch plays the responder: it withholds rxe's ACK of an accepted SEND and answers NAK PSN Sequence Error for it (both commented); the requester goes back to that PSN, the responder ACKs the duplicates without executing them|scenarios/requester/nak_psn_seq_accepted.toml"
  "requester_ghost_ack|bookworm|a ghost ACK: the switch loses an RDMA WRITE and answers it with an ACK for a PSN 8 past it, never sent; rxe completes the WRITE on it, and nothing is resent|scenarios/requester/ghost_ack.toml"
  "trixie_flush|trixie|RDMA WRITE, then RDMA FLUSH (0x1C, FETH: global visibility) of a range and of the whole MR, each answered by a zero-length RDMA READ Response Only; rxe computes the FLUSH requests' ICRC over their headers twice, so they show as bad ICRCs|scenarios/verbs/flush.toml"
  "trixie_atomic_write|trixie|RDMA ATOMIC WRITE (0x1D) of 8 bytes, answered by a zero-length RDMA READ Response Only|scenarios/verbs/atomic_write.toml"
  "trixie_send_with_inv|trixie|a type 2 memory window: a WRITE through its rkey, a SEND with Invalidate (IETH) naming that rkey, then a WRITE through it refused with NAK Remote Access Error|scenarios/verbs/mw_type2_send_with_inv.toml"
)

want=("$@")
selected() {
    (( ${#want[@]} == 0 )) && return 0
    local w
    for w in "${want[@]}"; do [[ "$w" == "$1" ]] && return 0; done
    return 1
}

any_selected() {
    local entry name
    for entry in "$@"; do
        name=${entry%%|*}
        selected "$name" && return 0
    done
    return 1
}

# One lab at a time: bookworm's for the tool runs, then trixie's for the scenarios.
if any_selected "${captures[@]}"; then
    brought_up=0
    if ! "$roce" lab status >/dev/null 2>&1; then
        "$roce" lab up
        brought_up=1
    fi
    for entry in "${captures[@]}"; do
        IFS='|' read -r name what args <<<"$entry"
        selected "$name" || continue
        echo "==> $name" >&2
        eval "\"\$roce\" lab run -q $args -w \"$out/$name.pcapng\"" | tail -n 4 >&2
    done
    (( brought_up )) && "$roce" lab down
fi
for image in bookworm trixie; do
    mine=()
    for entry in "${scenario_captures[@]}"; do
        IFS='|' read -r name img _ <<<"$entry"
        [[ "$img" == "$image" ]] && mine+=("$entry")
    done
    (( ${#mine[@]} )) && any_selected "${mine[@]}" || continue
    brought_up=0
    if ! "$roce" lab --image "$image" status >/dev/null 2>&1; then
        "$roce" lab --image "$image" up
        brought_up=1
    fi
    tmp=$(mktemp -d)
    for entry in "${mine[@]}"; do
        IFS='|' read -r name img what scenario <<<"$entry"
        selected "$name" || continue
        echo "==> $name" >&2
        "$roce" run --image "$image" -q --out "$tmp" "$scenario" | tail -n 2 >&2
        cp "$tmp/$(basename "$scenario" .toml).pcapng" "$out/$name.pcapng"
    done
    rm -rf "$tmp"
    (( brought_up )) && "$roce" lab --image "$image" down
done

{
    echo "# Lab captures"
    echo
    echo "Real RoCEv2 traffic between the two Soft-RoCE VMs of \`roce lab\` (Linux rdma_rxe;"
    echo "the Debian bookworm image, Linux 6.1, unless the name starts with \`trixie_\`: Linux"
    echo "6.12, rdma-core 56), recorded by the lab's switch: pcapng, one interface per"
    echo "sender (\`a\` = 10.0.0.1, \`b\` = 10.0.0.2), nanosecond timestamps; frames a fault"
    echo "rule touched carry a comment. The tools' own TCP exchange (QPN/PSN/GID) is on the"
    echo "wire too. Regenerate all with \`bash scripts/lab-captures.sh\` (or name some), after"
    echo "\`roce lab build\`; each file comes from exactly the command listed."
    echo
    for entry in "${captures[@]}"; do
        IFS='|' read -r name what args <<<"$entry"
        echo "## $name.pcapng"
        echo
        echo "$what."
        echo
        echo '```sh'
        echo "roce lab run $args -w captures/lab/$name.pcapng"
        echo '```'
        echo
    done
    for entry in "${scenario_captures[@]}"; do
        IFS='|' read -r name image what scenario <<<"$entry"
        echo "## $name.pcapng"
        echo
        echo "$what."
        echo
        echo '```sh'
        echo "roce run --image $image --out DIR $scenario   # DIR/$(basename "$scenario" .toml).pcapng"
        echo '```'
        echo
    done
} >"$out/README.md"
echo "wrote $out/README.md" >&2
