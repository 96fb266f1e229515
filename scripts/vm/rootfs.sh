#!/usr/bin/env bash
# A minimal Debian 12 root filesystem for the systemd VM test
# (docs/testing-vm.md), built with debootstrap from Debian's mirror only and
# cached by content: the cache key is the hash of this script, the
# architecture, the suite, the mirror and the package list, so a change to
# any of them builds a new tree and an unchanged one is reused as is. A
# foreign architecture (arm64 on an x86_64 host) needs qemu-user-static
# and binfmt_misc for debootstrap's second stage (docs/testing-vm.md, "arm64").
#
#   scripts/vm/rootfs.sh [amd64|arm64]   prints the cached tree's directory
#
#   NXDNS_VM_CACHE  the cache (default ${XDG_CACHE_HOME:-~/.cache}/nxdns-vm)
#   DEBIAN_MIRROR   default: the first deb.debian.org-style URI of this
#                   machine's apt sources, else http://deb.debian.org/debian
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

arch=${1:-amd64}
suite=bookworm
case "$arch" in
  amd64) kernel=linux-image-amd64 ;;
  arm64) kernel=linux-image-arm64 ;;
  *) echo "rootfs: unknown architecture $arch (amd64 or arm64)" >&2; exit 2 ;;
esac
mirror=$(vm_mirror)
# systemd as PID 1 with journald; udev for the virtio devices; the kernel
# (and its initramfs) that the VM boots directly; iproute2 for the network
# namespaces and netem; kdig (knot-dnsutils) to query; libnss-systemd so the
# dynamic user has a name; procps for ps.
packages=systemd,systemd-sysv,udev,dbus,libnss-systemd,"$kernel",initramfs-tools,iproute2,knot-dnsutils,procps,kmod,e2fsprogs

key=$(printf '%s\n' "$arch" "$suite" "$mirror" "$packages" | cat - "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
dir=$(vm_cache)/rootfs-$arch-$key
if [ -f "$dir/.complete" ]; then
  echo "$dir"
  exit 0
fi

rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
log=$(vm_cache)/rootfs-$arch-$key.log
echo "rootfs: debootstrap $suite/$arch from $mirror into $dir (log: $log)" >&2
foreign=
[ "$arch" != "$(dpkg --print-architecture)" ] && foreign=1
s0=$(date +%s)
# Two stages, so that the tree can be told how to install before any
# package is configured: the first downloads and unpacks, the second
# (in a chroot) installs.
# The downloaded packages are kept in the cache too, so a changed recipe
# is rebuilt without downloading them again.
mkdir -p "$(vm_cache)/debs"
if ! debootstrap --variant=minbase --arch="$arch" --foreign --include="$packages" \
  --cache-dir="$(vm_cache)/debs" "$suite" "$dir.tmp" "$mirror" >"$log" 2>&1; then
  tail -20 "$log" >&2
  echo "rootfs: debootstrap failed (log: $log)" >&2
  exit 1
fi
echo "rootfs: first stage took $(($(date +%s) - s0)) s" >&2
# What the VM needs of the kernel is virtio, ext4, 9p, veth and netem:
# dpkg leaves out the drivers for hardware a VM has none of (most of the
# kernel package's 400 MB), the documentation and the translations, and
# does not fsync each file (a tree that fails halfway is built again).
mkdir -p "$dir.tmp/etc/dpkg/dpkg.cfg.d"
{
  echo force-unsafe-io
  for p in usr/share/doc usr/share/man usr/share/locale usr/share/info \
    'lib/modules/*/kernel/sound' 'lib/modules/*/kernel/drivers/gpu' \
    'lib/modules/*/kernel/drivers/media' 'lib/modules/*/kernel/drivers/net/wireless' \
    'lib/modules/*/kernel/drivers/net/ethernet' 'lib/modules/*/kernel/drivers/infiniband' \
    'lib/modules/*/kernel/drivers/staging' 'lib/modules/*/kernel/drivers/bluetooth' \
    'lib/modules/*/kernel/drivers/usb' 'lib/modules/*/kernel/drivers/iio' \
    'lib/modules/*/kernel/drivers/isdn' 'lib/modules/*/kernel/drivers/hwmon' 'lib/modules/*/kernel/drivers/scsi' \
    'lib/modules/*/kernel/net/wireless' 'lib/modules/*/kernel/net/mac80211' \
    'lib/modules/*/kernel/net/bluetooth'; do
    echo "path-exclude=/$p/*"
  done
} >"$dir.tmp/etc/dpkg/dpkg.cfg.d/nxdns-vm"
# An initramfs with the root disk's modules only, not MODULES=most (which
# took minutes to pack on a loaded machine, and is not needed).
mkdir -p "$dir.tmp/etc/initramfs-tools/conf.d" "$dir.tmp/usr/share/initramfs-tools/modules.d"
echo MODULES=list >"$dir.tmp/etc/initramfs-tools/conf.d/nxdns-vm.conf"
printf '%s\n' virtio_pci virtio_mmio virtio_blk virtio_net ext4 >"$dir.tmp/usr/share/initramfs-tools/modules.d/nxdns-vm"
if [ -n "$foreign" ]; then
  # Another architecture: the second stage runs the packages' maintainer
  # scripts, so it runs through qemu's user-mode emulator, which
  # binfmt_misc hands every foreign ELF to (minutes, where the same stage
  # in a full-system TCG VM took hours). The emulator is copied into the
  # tree too, for a registration without the F flag, and removed after.
  qarch=$(vm_qemu_arch "$arch")
  binfmt_registered=$(vm_binfmt_ensure "$qarch")
  cp "/usr/bin/qemu-$qarch-static" "$dir.tmp/usr/bin/"
fi
echo "rootfs: debootstrap's second stage in a chroot${foreign:+ (qemu-$qarch-static)}" >&2
s0=$(date +%s)
if ! chroot "$dir.tmp" /debootstrap/debootstrap --second-stage >>"$log" 2>&1; then
  [ -n "$foreign" ] && vm_binfmt_release "$qarch" "$binfmt_registered"
  tail -20 "$log" >&2
  echo "rootfs: the second stage failed (log: $log)" >&2
  exit 1
fi
echo "rootfs: second stage took $(($(date +%s) - s0)) s" >&2
# What every boot needs and the package set does not give: a root
# filesystem mounted read-write, a serial console, a network (systemd-
# networkd, DHCP from qemu's user-mode network), no first-boot prompts,
# and initramfs with the virtio drivers for the root disk.
r=$dir.tmp
echo nxdns-vm >"$r/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 nxdns-vm\n' >"$r/etc/hosts"
printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n' >"$r/etc/fstab"
mkdir -p "$r/etc/systemd/network"
cat >"$r/etc/systemd/network/10-en.network" <<'NET'
[Match]
Name=en* eth*
[Network]
DHCP=ipv4
NET
# The guest answers DNS itself on 127.0.0.1:53 once nxdns runs, and needs no
# other resolver (the VM has no network beyond the host's forwarded ports).
post='systemctl enable systemd-networkd >/dev/null 2>&1
passwd -d root >/dev/null
rm -f /var/cache/apt/archives/*.deb
: >/etc/resolv.conf'
chroot "$r" /bin/sh -c "$post"
rm -f "$r/etc/dpkg/dpkg.cfg.d/nxdns-vm" # the test's own apt runs are as an owner's
if [ -n "$foreign" ]; then
  rm -f "$r/usr/bin/qemu-$qarch-static"
  vm_binfmt_release "$qarch" "$binfmt_registered"
fi
touch "$r/.complete"
mv "$dir.tmp" "$dir"
echo "$dir"
