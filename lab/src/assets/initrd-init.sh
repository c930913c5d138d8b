#!/bin/busybox sh
# /init of the roce lab initramfs (built by `roce lab build`). Loads the kernel
# modules the lab needs (listed in /modules.list, dependencies first), mounts the lab
# disk and the host share, and hands PID 1 over to the init script the host put in
# the share, so changing that script never needs a new image.
/bin/busybox mkdir -p /proc /sys /dev /newroot
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
say() { echo "roce-lab-initrd: $*" > /dev/console; }
fail() { say "FATAL: $*"; sleep 1; poweroff -f; }

while read -r m; do
    insmod "/modules/$m" || say "insmod $m failed"
done < /modules.list

n=0
while [ ! -b /dev/vda ]; do
    n=$((n + 1))
    [ $n -gt 100 ] && fail "no /dev/vda after 10 s: is the disk attached as if=virtio?"
    sleep 0.1
done
mount -t ext4 -o rw /dev/vda /newroot || fail "cannot mount the lab disk /dev/vda"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 host /newroot/host \
    || fail "cannot mount the host share (9p mount tag 'host')"
[ -f /newroot/host/init.sh ] || fail "the host share has no init.sh"
mount --move /dev /newroot/dev
umount /proc /sys
exec switch_root /newroot /bin/sh /host/init.sh
