#!/usr/bin/env bash
# A minimal Debian 12 root filesystem for the systemd VM test
# (docs/testing-vm.md), built with debootstrap from Debian's mirror only and
# cached by content: the cache key is the hash of this script, the
# architecture, the suite, the mirror and the package list, so a change to
# any of them (or of scripts/vm/vminit, the arm64 initramfs) builds a new
# tree and an unchanged one is reused as is.
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

key=$(printf '%s\n' "$arch" "$suite" "$mirror" "$packages" | cat - "${BASH_SOURCE[0]}" "$here/vminit/main.go" | sha256sum | cut -c1-16)
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
if [ -z "${foreign[*]}" ]; then
  chroot "$r" /bin/sh -c "$post"
else
  # Another architecture: debootstrap's second stage must run on it. It runs
  # in a VM of that architecture, booted with scripts/vm/vminit as its
  # initramfs (the tree has none yet, and nothing here could make one);
  # vminit stays the initramfs of every later boot, so update-initramfs is
  # turned off in the guest. The result is cached as a disk image plus the
  # kernel and that initramfs.
  mkdir -p "$r/etc/initramfs-tools"
  printf 'update_initramfs=no\n' >"$r/etc/initramfs-tools/update-initramfs.conf"
  printf '%s\n' "$post" >"$r/vminit-post.sh"
  kdeb=$(ls "$r"/var/cache/apt/archives/linux-image-[0-9]*_"$arch".deb | head -1)
  k=$dir.kernel
  rm -rf "$k"
  mkdir -p "$k"
  dpkg-deb -x "$kdeb" "$k"
  release=$(ls "$k/lib/modules")
  (cd "$here/../.." && CGO_ENABLED=0 GOARCH="$arch" go build -o "$k/vminit" ./scripts/vm/vminit &&
    go run ./scripts/vm/vminit -pack "$k/initrd" "$k/vminit" "$k/lib/modules/$release")
  truncate -s 3G "$dir.img"
  mkfs.ext4 -q -F -L root -d "$r" "$dir.img"
  echo "rootfs: debootstrap's second stage in a $arch VM (console: $log.console)" >&2
  s0=$(date +%s)
  timeout 5400 qemu-system-aarch64 -machine virt,accel=tcg -cpu cortex-a72 -m 1024 -smp 2 \
    -nographic -no-user-config -nodefaults -monitor none -no-reboot -serial "file:$log.console" \
    -kernel "$k/boot/vmlinuz-$release" -initrd "$k/initrd" -append "console=ttyAMA0 vminit.stage=second" \
    -drive "file=$dir.img,format=raw,if=virtio" || true
  echo "rootfs: second stage took $(($(date +%s) - s0)) s" >&2
  if ! debugfs -R "stat /.second-stage-ok" "$dir.img" 2>/dev/null | grep -q Inode; then
    tail -20 "$log.console" >&2
    echo "rootfs: the second stage did not finish (console: $log.console)" >&2
    exit 1
  fi
  rm -rf "$r"
  mkdir -p "$r/boot"
  mv "$dir.img" "$r/rootfs.img"
  cp "$k/boot/vmlinuz-$release" "$r/boot/vmlinuz-$release"
  cp "$k/initrd" "$r/boot/initrd.img-$release"
  rm -rf "$k"
fi
touch "$r/.complete"
mv "$dir.tmp" "$dir"
echo "$dir"
