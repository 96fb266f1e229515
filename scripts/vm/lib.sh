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
