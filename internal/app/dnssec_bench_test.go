package app

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/testutil"
)

// BenchmarkDNSSECMissBesideUnbound is a validated cache miss — a new name
// under secure.test.'s wildcard, so a signature and the wildcard's NSEC
// proof to check, the zones' keys already validated — asked of nxdns in
// enforce mode and of a validating Unbound forwarding to the same
// non-validating upstream, in the same run. It reports each one's CPU per
// query: nxdns's is this process's CPU during its run less this process's
// CPU during Unbound's run (the client's share, the same in both);
// Unbound's is its process's CPU during its run, less the upstream's extra
// work (both runs make the upstream Unbound iterate for the same number of
// new names). A third run asks nxdns with mode off, for the same miss
// unvalidated. docs/dnssec.md "What it costs".
func BenchmarkDNSSECMissBesideUnbound(b *testing.B) {
	w := startDNSSECWorld(b)
	_, addr, _, _ := w.nxdnsWith(b, `mode = "enforce"`, true)
	_, offAddr, _, _ := w.nxdnsWith(b, `mode = "off"`, true)
	anchors, err := os.ReadFile(w.anchors)
	if err != nil {
		b.Fatal(err)
	}
	ta := ""
	for _, l := range strings.Split(strings.TrimSpace(string(anchors)), "\n") {
		ta += fmt.Sprintf("\ttrust-anchor: %q\n", l)
	}
	ref := testutil.StartUnboundWith(b, w.ca, "reference.test", testutil.UnboundServerBase+`	access-control: 127.0.0.0/8 allow
	do-not-query-localhost: no
	module-config: "validator iterator"
	aggressive-nsec: no
	local-zone: "test." nodefault
	interface: 127.0.0.1@{{port}}
`+ta+fmt.Sprintf("\ttls-cert-bundle: %q\n", w.caFile)+
		fmt.Sprintf("forward-zone:\n\tname: \".\"\n\tforward-tls-upstream: yes\n\tforward-addr: %s#upstream.test\n", strings.Replace(strings.TrimPrefix(w.dotURL, "tls://"), ":", "@", 1))+
		"remote-control:\n\tcontrol-enable: no\n")

	run := func(server, prefix string, n int) {
		for i := range n {
			name := fmt.Sprintf("%s%d.wild.secure.test.", prefix, i)
			m := askFlags(b, server, name, "do")
			if m.Rcode != dns.RcodeSuccess || m.AuthenticatedData != (server != offAddr) {
				b.Fatalf("%s via %s: rcode %s AD %v", name, server, dns.RcodeToString[m.Rcode], m.AuthenticatedData)
			}
		}
	}
	run(addr, "warm", 3) // keys validated, connections open
	run(ref.String(), "warm", 3)
	run(offAddr, "warm", 3)
	n := max(b.N, 200)
	b.ResetTimer()
	s0, u0 := selfCPU(b), unboundCPU(b)
	run(addr, "nx", n)
	s1, u1 := selfCPU(b), unboundCPU(b)
	run(ref.String(), "ub", n)
	s2, u2 := selfCPU(b), unboundCPU(b)
	run(offAddr, "of", n)
	s3 := selfCPU(b)
	b.StopTimer()
	client := s2 - s1
	per := func(d time.Duration) float64 { return float64(d/time.Microsecond) / float64(n) }
	b.ReportMetric(per(s1-s0-client), "nxdns-µs-cpu/query")
	b.ReportMetric(per(s3-s2-client), "nxdns-off-µs-cpu/query")
	b.ReportMetric(per(u2.ref-u1.ref), "unbound-µs-cpu/query")
	b.ReportMetric(per(u1.upstream-u0.upstream), "upstream-for-nxdns-µs-cpu/query")
	b.ReportMetric(per(u2.upstream-u1.upstream), "upstream-for-unbound-µs-cpu/query")
}

func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// unbounds is the CPU of this process's unbound children (/proc stat
// utime + stime, in clock ticks of 10 ms: coarse, so the benchmark asks
// enough names for it to count): the upstream, started first, and the
// validating reference, started last.
type unbounds struct{ upstream, ref time.Duration }

func unboundCPU(b *testing.B) unbounds {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Skip("no /proc")
	}
	var out unbounds
	first, last := -1, -1
	me := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(st)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || !strings.Contains(s[:i], "(unbound") {
			continue
		}
		f := strings.Fields(s[i+2:]) // state ppid ... utime is field 14 overall, index 11 here
		if len(f) < 13 || f[1] != me {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		cpu := time.Duration(ut+stime) * 10 * time.Millisecond
		if first < 0 || pid < first {
			first, out.upstream = pid, cpu
		}
		if pid > last {
			last, out.ref = pid, cpu
		}
	}
	return out
}
