# Shared by scripts/vm/*.sh (sourced).

# The cache for root filesystems, never inside the repository's tracked tree.
vm_cache() {
  local c=${NXDNS_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nxdns-vm}
  mkdir -p "$c"
  echo "$c"
}

# Debian's mirror as this machine's apt is configured (only Debian packages
# are ever downloaded).
vm_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  local m
  m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
    grep -oE 'https?://[^ ]*/debian/?( |$)' | grep -v security | head -1 | tr -d ' ')
  echo "${m:-http://deb.debian.org/debian}"
}

# qemu's name for a Debian architecture.
vm_qemu_arch() {
  case "$1" in
    arm64) echo aarch64 ;;
    amd64) echo x86_64 ;;
    *) echo "$1" ;;
  esac
}

# vm_binfmt_ensure QARCH: makes the kernel run QARCH's ELF binaries through
# /usr/bin/qemu-QARCH-static (binfmt_misc, with the F flag: the emulator is
# opened now, so it need not exist inside a chroot). Prints 1 when it
# registered the handler (vm_binfmt_release then removes it again), 0 when
# one was already there: a shared machine is left as it was found.
vm_binfmt_ensure() {
  local q=$1 d=/proc/sys/fs/binfmt_misc
  [ -f "$d/register" ] || mount -t binfmt_misc binfmt_misc "$d" ||
    { echo "binfmt_misc is not available: the $q second stage needs it (docs/testing-vm.md, arm64)" >&2; return 1; }
  if [ -e "$d/qemu-$q" ] && grep -q '^enabled' "$d/qemu-$q"; then echo 0; return; fi
  [ -x "/usr/bin/qemu-$q-static" ] || { echo "/usr/bin/qemu-$q-static is missing (apt-get install qemu-user-static)" >&2; return 1; }
  local magic mask
  # The ELF header of a little-endian 64-bit executable for the machine.
  case "$q" in
    aarch64)
      magic='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
      mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff' ;;
    *) echo "no binfmt magic known for $q" >&2; return 1 ;;
  esac
  [ -e "$d/qemu-$q" ] && echo -1 >"$d/qemu-$q"
  printf ':qemu-%s:M::%s:%s:/usr/bin/qemu-%s-static:F\n' "$q" "$magic" "$mask" "$q" >"$d/register"
  echo 1
}

# vm_binfmt_release QARCH REGISTERED: undoes vm_binfmt_ensure's registration.
vm_binfmt_release() {
  [ "$2" = 1 ] && echo -1 >"/proc/sys/fs/binfmt_misc/qemu-$1" || true
}
