#!/bin/busybox sh
# initramfs /init of the agentplaza guest: load the virtio modules, find the
# disks by their virtio serial, mount root (read-only), the workspace and the
# data volumes, bring up lo, and switch to the root's channel service.
/bin/busybox mkdir -p /proc /sys /dev /newroot
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox --install -s /bin
fail() { echo "apz-init: $*" > /dev/kmsg; echo "apz-init: $*"; sleep 1; echo b > /proc/sysrq-trigger; poweroff -f; }

channel=serial; vols=""; disks=1
for w in $(cat /proc/cmdline); do
  case "$w" in
    apz.channel=*) channel="${w#apz.channel=}" ;;
    apz.vols=*) vols="${w#apz.vols=}" ;;
    apz.disks=*) disks="${w#apz.disks=}" ;;
  esac
done

MODS="virtio_ring virtio virtio_mmio"
[ "$channel" = vsock ] && MODS="$MODS vsock vmw_vsock_virtio_transport_common vmw_vsock_virtio_transport"
MODS="$MODS virtio_console virtio_blk"
for m in $MODS; do insmod /lib/modules/$m.ko || fail "insmod $m"; done

# wait for the expected number of disks
i=0
while [ "$(ls -d /sys/block/vd* 2>/dev/null | wc -l)" -lt "$disks" ]; do
  i=$((i+1)); [ $i -gt 500 ] && fail "only $(ls -d /sys/block/vd* 2>/dev/null | wc -l) of $disks disks"
  usleep 10000
done
dev_for() { for d in /sys/block/vd*; do [ "$(cat $d/serial 2>/dev/null)" = "$1" ] && { echo /dev/${d##*/}; return 0; }; done; return 1; }

root=$(dev_for apz-root) || fail "no root disk"
mount -t ext4 -o ro "$root" /newroot || fail "mount root"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /newroot/tmp
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /newroot/run
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /newroot/data
if ws=$(dev_for apz-ws); then
  mount -t ext4 -o rw,nosuid,nodev "$ws" /newroot/workspace || fail "mount workspace"
fi
n=0
for name in $(echo "$vols" | tr ',' ' '); do
  dev=$(dev_for apz-vol$n) || fail "no disk for volume $name"
  mkdir -p /newroot/data/$name
  mount -t ext4 -o ro,nosuid,nodev,noload "$dev" /newroot/data/$name || fail "mount volume $name"
  n=$((n+1))
done
mount -o remount,ro,nosuid,nodev,mode=555 /newroot/data 2>/dev/null
ip link set lo up
mount --move /dev /newroot/dev
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
exec switch_root /newroot /usr/bin/python3 -u -B /opt/apz/channeld.py
