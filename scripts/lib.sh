# shellcheck shell=bash
# Shared by the benchmark scripts (perf.sh, perf-filter.sh, perf-history.sh,
# workperquery.sh; compare.sh and .ci/binary.sh use only bench_build): a
# work directory whose processes are stopped by PID on exit, the fake
# upstream with its test CA, and the waits for readiness.
# Source it from the repository root: . scripts/lib.sh

# bench_init makes $work and $pids and stops every process in $pids, then
# removes $work, when the script exits.
bench_init() {
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}

# bench_build CMD...: builds each ./cmd/CMD into $work/CMD the way the
# packages ship nxdns (CGO_ENABLED=0, as nix/common.nix and
# scripts/release.sh build it). A default build on a machine with gcc links
# glibc, whose threads register rseq with the kernel: that binary pays for
# work at each context switch that the shipped one does not, and nobody
# runs it.
bench_build() {
  local c
  for c in "$@"; do CGO_ENABLED=0 go build -trimpath -o "$work/$c" "./cmd/$c"; done
}

# bench_fakeup HTTP-PORT ARGS...: starts $work/nxdns-fakeup with ARGS (its
# -listen URLs, -cert-names, -ttl …), the CA in $work/ca.pem, and its
# counters on HTTP-PORT; returns once /healthz answers (at most 10 s).
bench_fakeup() {
  local http=$1
  shift
  "$work/nxdns-fakeup" "$@" -ca-cert "$work/ca.pem" -ca-key "$work/ca.key" -http "127.0.0.1:$http" >/dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$http/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
}

# bench_upstream DOT-PORT [SCHEME]: the [[upstreams]] entry for the fake
# upstream, over DoT (tls, the default) or DoQ (quic: its doq listener).
bench_upstream() {
  printf '[[upstreams]]\nurl = "%s://127.0.0.1:%s"\ntls_name = "upstream.test"\nca_file = "%s/ca.pem"\n' "${2:-tls}" "$1" "$work"
}

# bench_wait_serving LOG: returns once nxdns wrote "serving" to LOG (at most
# 30 s).
bench_wait_serving() {
  for _ in $(seq 1 300); do grep -q serving "$1" 2>/dev/null && break; sleep 0.1; done
}
