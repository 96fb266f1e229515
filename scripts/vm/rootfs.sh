#!/usr/bin/env bash
# A minimal Debian 12 root filesystem for the systemd VM test
# (docs/testing-vm.md), built with debootstrap from Debian's mirror only and
# cached by content: the cache key is the hash of this script, the
# architecture, the suite, the mirror and the package list, so a change to
# any of them builds a new tree and an unchanged one is reused as is.
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
foreign=()
[ "$arch" != "$(dpkg --print-architecture)" ] && foreign=(--foreign)
if ! debootstrap --variant=minbase --arch="$arch" "${foreign[@]}" --include="$packages" \
  "$suite" "$dir.tmp" "$mirror" >"$log" 2>&1; then
  tail -20 "$log" >&2
  echo "rootfs: debootstrap failed (log: $log)" >&2
  exit 1
fi
# What every boot needs and the package set does not give: a root
# filesystem mounted read-write, a serial console, a network (systemd-
# networkd, DHCP from qemu's user-mode network), no first-boot prompts,
# and initramfs with the virtio drivers for the root disk.
r=$dir.tmp
echo nxdns-vm >"$r/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 nxdns-vm\n' >"$r/etc/hosts"
printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n' >"$r/etc/fstab"
cat >"$r/etc/systemd/network/10-en.network" <<'NET'
[Match]
Name=en* eth*
[Network]
DHCP=ipv4
NET
if [ -z "${foreign[*]}" ]; then
  chroot "$r" systemctl enable systemd-networkd >/dev/null 2>&1
  chroot "$r" passwd -d root >/dev/null
else
  mkdir -p "$r/etc/systemd/system/multi-user.target.wants"
  ln -sf /lib/systemd/system/systemd-networkd.service "$r/etc/systemd/system/multi-user.target.wants/"
fi
# The guest answers DNS itself on 127.0.0.1:53 once nxdns runs, and needs no
# other resolver (the VM has no network beyond the host's forwarded ports).
: >"$r/etc/resolv.conf"
rm -f "$r"/var/cache/apt/archives/*.deb
touch "$r/.complete"
mv "$dir.tmp" "$dir"
echo "$dir"
