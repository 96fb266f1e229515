#!/usr/bin/env bash
# Home Assistant over MQTT on versus off, measured with dnsperf on loopback
# (Debian packages dnsperf and mosquitto): two nxdns in front of a
# zero-latency fake DoT upstream, one publishing to a mosquitto of its own
# every 5 s (the shortest mqtt.publish_seconds) with a Home Assistant-like
# subscriber attached, one without [mqtt]; 100 names asked over and over
# (cache hits, the path MQTT must not slow). Runs alternate off/on so both
# see the same machine load: saturated throughput (noisy on a shared
# machine), then CPU per query at a fixed 10 000 queries a second, the
# process's user and system time over the run (/proc/PID/stat), which a
# busy neighbour moves far less. Bounded: each dnsperf run lasts SECONDS.
# Usage: scripts/perf-mqtt.sh [SECONDS] [ROUNDS]   (default 5 and 3)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
rounds=${2:-3}
command -v dnsperf >/dev/null || { echo "dnsperf not installed (apt-get install dnsperf)"; exit 1; }
[ -x /usr/sbin/mosquitto ] || { echo "mosquitto not installed (apt-get install mosquitto mosquitto-clients)"; exit 1; }

. scripts/lib.sh
bench_init

bench_build nxdns nxdns-fakeup
base=$(( 20000 + RANDOM % 20000 ))
dot=$base fk=$((base + 1)) off=$((base + 2)) on=$((base + 3)) broker=$((base + 4))

bench_fakeup "$fk" -listen "dot://127.0.0.1:$dot" -cert-names "upstream.test"
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\n' "$broker" >"$work/mosquitto.conf"
/usr/sbin/mosquitto -c "$work/mosquitto.conf" 2>"$work/mosquitto.log" &
pids+=($!)
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$broker") 2>/dev/null && break; sleep 0.1; done
mosquitto_sub -h 127.0.0.1 -p "$broker" -t 'homeassistant/#' -t 'nxdns/#' -v >"$work/sub.log" &
pids+=($!)

start() { # name port extra-toml
  cat >"$work/$1.toml" <<TOML
[dns]
listen = ["127.0.0.1:$2"]
[web]
listen = ""
[log]
queries = false
$(bench_upstream "$dot")
[[filter.groups]]
name = "default"
clients = []
$3
TOML
  "$work/nxdns" run --config "$work/$1.toml" 2>"$work/$1.log" &
  pids+=($!)
  eval "pid_$1=$!"
  bench_wait_serving "$work/$1.log"
}
start off "$off" ""
start on "$on" "[mqtt]
broker = \"mqtt://127.0.0.1:$broker\"
publish_seconds = 5"

run() { # label port queries
  printf '%-40s' "$1"
  dnsperf -s 127.0.0.1 -p "$2" -d "$3" -l "$secs" -c 8 -T 2 -q 256 -t 5 -S 0 2>&1 |
    awk '/Queries per second/ { q=$4 } /Average Latency/ { l=$4 } END { printf "%10s QPS  avg %s s\n", q, l }'
}
for i in $(seq 1 100); do echo "hot$i.perf.test A"; done >"$work/hot"
run "off: warm the cache" "$off" "$work/hot" >/dev/null
run "on: warm the cache" "$on" "$work/hot" >/dev/null
cpu() { cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f", s }'; } # ns on a CPU, every thread
paced() { # label port pid
  local before after n
  before=$(cpu "$3")
  n=$(dnsperf -s 127.0.0.1 -p "$2" -d "$work/hot" -l "$secs" -c 8 -T 2 -q 256 -t 5 -S 0 -Q 10000 2>&1 |
    awk '/Queries completed/ { print $3 }')
  after=$(cpu "$3")
  printf '%-40s%10s queries  %6.2f µs CPU each\n' "$1" "$n" "$(echo "($after - $before) / 1000 / $n" | bc -l)"
}
for round in $(seq 1 "$rounds"); do
  run "off: cache hits (round $round)" "$off" "$work/hot"
  run "on, MQTT: cache hits (round $round)" "$on" "$work/hot"
done
for round in $(seq 1 "$rounds"); do
  paced "off: 10k/s, CPU (round $round)" "$off" "$pid_off"
  paced "on, MQTT: 10k/s, CPU (round $round)" "$on" "$pid_on"
done
# Idle, both at once (the same neighbours for both): what MQTT costs per
# unit of time, publishing every 5 s, whatever the query rate.
a0=$(cpu "$pid_off") b0=$(cpu "$pid_on")
sleep 30
a1=$(cpu "$pid_off") b1=$(cpu "$pid_on")
printf 'idle 30 s, CPU: off %.1f ms, on (MQTT) %.1f ms\n' "$(echo "($a1 - $a0) / 1000000" | bc -l)" "$(echo "($b1 - $b0) / 1000000" | bc -l)"
echo "MQTT messages the subscriber saw: $(wc -l <"$work/sub.log")"
