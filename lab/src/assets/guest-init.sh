# roce lab guest init: PID 1 in each lab VM, read from the host share (written by
# the lab daemon at every `roce lab up`). Brings up the RoCE wire (eth0 on the
# switch) and rxe0, then keeps the roce agent running on the virtio-serial port.
# Messages prefixed `roce-lab:` go to the console log the host keeps.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
say() { echo "roce-lab: $*" > /dev/console; }
halt() { say "$*"; sleep 1; echo 1 > /proc/sys/kernel/sysrq; echo o > /proc/sysrq-trigger; sleep 10; }

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tmpfs -o mode=1777 tmp /tmp
mount -t tmpfs -o mode=755 run /run
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs shm /dev/shm

VM= IP= PEER= PEER_MAC= PROBE= MGMT=
for w in $(cat /proc/cmdline); do
    case "$w" in
        lab.vm=*) VM=${w#*=} ;;
        lab.ip=*) IP=${w#*=} ;;
        lab.peer=*) PEER=${w#*=} ;;
        lab.peer_mac=*) PEER_MAC=${w#*=} ;;
        lab.probe=1) PROBE=1 ;;
        lab.mgmt=*) MGMT=${w#*=} ;;
    esac
done
[ -n "$PROBE" ] && halt "probe ok"
[ -n "$VM" ] && [ -n "$IP" ] && [ -n "$PEER" ] && [ -n "$PEER_MAC" ] || halt "FATAL: lab.vm/ip/peer/peer_mac missing from the kernel command line"
hostname "lab-$VM"

# Only RoCE and the tools' own TCP on the wire: no IPv6 chatter (router and
# neighbour solicitations, MLD), no ARP (the peer's address is static).
for c in all default eth0; do echo 1 > /proc/sys/net/ipv6/conf/$c/disable_ipv6; done
# virtio_net with TX NAPI (its default) now and then stops its TX queue
# for good under rxe's bursts (tens of thousands of ACKs and RNR NAKs from 64 QPs):
# "NETDEV WATCHDOG: transmit queue 0 timed out", nothing leaves the VM again, and
# freeing the stuck skbs later oopses in rxe_skb_tx_dtor. Measured in this lab: 2 of
# 3 runs of 40,000 SENDs over 64 QPs wedged with TX NAPI, 0 of 12 without. Linux
# 7.3 did the same once in CI (VM a, a stream of 100,000 WRITEs), so no kernel keeps
# it. The module is already loaded (by the initrd's insmod, which ignores the
# kernel command line), so the device is bound again with the parameter off.
dev=$(basename "$(readlink /sys/class/net/eth0/device)")
echo N > /sys/module/virtio_net/parameters/napi_tx \
    && echo "$dev" > /sys/bus/virtio/drivers/virtio_net/unbind \
    && echo "$dev" > /sys/bus/virtio/drivers/virtio_net/bind \
    || say "ERROR: could not turn virtio_net TX NAPI off; expect TX queue timeouts under load"
n=0
while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 50 ]; do n=$((n + 1)); sleep 0.1; done
echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6
ip link set lo up
ip link set eth0 up || halt "FATAL: no eth0 (virtio_net not loaded?)"
ip addr add "$IP/24" dev eth0 || halt "FATAL: cannot set $IP on eth0"
ip neigh replace "$PEER" lladdr "$PEER_MAC" dev eth0 nud permanent
rdma link add rxe0 type rxe netdev eth0 || say "ERROR: rdma link add rxe0 failed"
say "wire up: eth0 $IP, peer $PEER at $PEER_MAC, rxe0 on eth0"

# A bench (`roce lab up --wire bench`): the agent also listens on the management
# link (eth1, qemu's user networking: the host reaches it only through the port
# it forwards), keyed, as on a real host; the controller never uses the wire.
if [ -n "$MGMT" ]; then
    echo 1 > /proc/sys/net/ipv6/conf/eth1/disable_ipv6
    if ip link set eth1 up && ip addr add 10.0.2.15/24 dev eth1; then
        say "management link up: eth1 10.0.2.15, agent on port $MGMT"
        (
            while :; do
                cp /host/roce /run/roce-listen \
                    && /run/roce-listen agent --listen "10.0.2.15:$MGMT" --key-file /host/agent.key
                say "listening agent exited (status $?); restarting in 1 s"
                sleep 1
            done
        ) > /dev/console 2>&1 &
    else
        say "ERROR: no management link (eth1): the bench's agents cannot be reached"
    fi
fi

while :; do
    cp /host/roce /run/roce-agent && /run/roce-agent lab agent
    say "agent exited (status $?); restarting in 1 s"
    sleep 1
done
