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

want=("$@")
selected() {
    (( ${#want[@]} == 0 )) && return 0
    local w
    for w in "${want[@]}"; do [[ "$w" == "$1" ]] && return 0; done
    return 1
}

brought_up=0
if ! "$roce" lab status >/dev/null 2>&1; then
    "$roce" lab up
    brought_up=1
fi
cleanup() { (( brought_up )) && "$roce" lab down || true; }
trap cleanup EXIT

for entry in "${captures[@]}"; do
    IFS='|' read -r name what args <<<"$entry"
    selected "$name" || continue
    echo "==> $name" >&2
    eval "\"\$roce\" lab run -q $args -w \"$out/$name.pcapng\"" | tail -n 4 >&2
done

{
    echo "# Lab captures"
    echo
    echo "Real RoCEv2 traffic between the two Soft-RoCE VMs of \`roce lab\` (Linux rdma_rxe,"
    echo "Debian bookworm kernel), recorded by the lab's switch: pcapng, one interface per"
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
} >"$out/README.md"
echo "wrote $out/README.md" >&2
