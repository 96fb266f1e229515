#!/usr/bin/env bash
# The alert rules the NixOS module provisions (contrib/prometheus), checked
# by Prometheus's own tool: the file is valid (`promtool check rules`) and
# each alert fires on the series it is about, and not before its `for:`
# (`promtool test rules`, contrib/prometheus/nxdns-rules.test.yml). Which
# series the rules and the dashboard read is checked by contrib's Go tests.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "monitoring: installing Debian's prometheus package (for promtool)" >&2
    apt-get update -qq >&2
    # policy-rc.d: the package's own Prometheus service is not wanted here.
    own_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
      own_policy=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >&2
    [ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    systemctl stop prometheus 2>/dev/null || true
  else
    echo "monitoring: promtool is needed (Debian: apt-get install prometheus)" >&2
    exit 2
  fi
fi

promtool check rules contrib/prometheus/nxdns-rules.yml
(cd contrib/prometheus && promtool test rules nxdns-rules.test.yml)
echo "monitoring: alert rules valid and their unit tests pass"
