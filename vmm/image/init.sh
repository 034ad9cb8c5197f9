#!/bin/busybox sh
# initramfs /init of the agentplaza guest (the tuned image): load the virtio modules, find the
# disks by their virtio serial, mount root (read-only), the workspace and the data volumes, bring
# up lo, and switch to the root's channel service. Busybox's links are made by the image build
# (no `busybox --install` here), and channeld's code is compiled there too.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
fail() { echo "apz-init: $*" > /dev/kmsg; echo "apz-init: $*"; sleep 1; echo b > /proc/sysrq-trigger; poweroff -f; }

channel=serial; vols=""; disks=1
read -r cmdline < /proc/cmdline   # a builtin: no process for it
for w in $cmdline; do
  case "$w" in
    apz.channel=*) channel="${w#apz.channel=}" ;;
    apz.vols=*) vols="${w#apz.vols=}" ;;
    apz.disks=*) disks="${w#apz.disks=}" ;;
  esac
done

MODS="virtio_ring virtio virtio_mmio"
[ "$channel" = vsock ] && MODS="$MODS vsock vmw_vsock_virtio_transport_common vmw_vsock_virtio_transport"
# the channel's virtio-serial device is on PCI (vmm.image.build.CHANNEL_BUS): its rings sized by QEMU
[ "$channel" = serial ] && MODS="$MODS virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci"
MODS="$MODS virtio_console virtio_blk virtio_balloon"
for m in $MODS; do insmod /lib/modules/$m.ko || fail "insmod $m"; done

# virtio_blk probes its disks inside insmod; wait only if one is late
i=0
set -- /sys/block/vd*
while [ ! -e "$1" ] || [ $# -lt "$disks" ]; do
  i=$((i+1)); [ $i -gt 500 ] && fail "only $# of $disks disks"
  usleep 10000
  set -- /sys/block/vd*
done
dev_for() { for d in /sys/block/vd*; do read s < $d/serial 2>/dev/null; [ "$s" = "$1" ] && { echo /dev/${d##*/}; return 0; }; done; return 1; }

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
# One line on the console (the kernel itself is quiet at loglevel=1): the owner's `events --all` and the
# node log show that this guest came up, and when.
echo "apz-init: root and workspace mounted; starting the channel"
# -S: channeld needs only the standard library (no site, no .pth scan); its code comes compiled.
exec switch_root /newroot /usr/bin/python3 -S -u -B -c \
  "import sys; sys.path.insert(0, '/opt/apz'); import channeld; channeld.main()"
