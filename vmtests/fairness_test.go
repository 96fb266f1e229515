package vmtests

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/burst"
	"github.com/nxdns/nxdns/internal/testutil"
)

// TestFairness_uniqueNameFloodFromOneHost: the real binary with one DoT
// upstream answering in 100 ms (32 slots, so about 320 misses a second).
// One host, 127.0.0.1, asks 1 000 unique names a second for 6 s, four times
// what the upstream's slots carry; another host, 127.0.0.2, asks 20 misses
// of its own one after another, idle first, then inside the flood. Its
// median under the flood stays within twice its idle median and none of
// its misses fails: the flooder holds at most half the slots while the
// other host's query waits (docs/upstream-pool.md "One client's share").
// The shape through the binary: without the share it passes too, mostly
// (0–1 of 20 failed), because the flood's next query crosses sockets
// before it can take a freed slot. internal/upstream's
// TestPool_floodFromOneClientLeavesAnothersMissesFast is the check that
// fails without the share (docs/robustness.md has both runs' figures).
func TestFairness_uniqueNameFloodFromOneHost(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0?latency=100ms")
	// attempt_timeout_ms = total_timeout_ms: an attempt is cut only by its
	// query's budget, which is no evidence against the upstream, so a
	// machine too busy to finish exchanges in time (shared CI cores) cannot
	// put the upstream in backoff and turn the test into one about health.
	p := startNxdns(t, ca, settings{attemptMS: 4000, totalMS: 4000}, up)

	c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}, net.UDPAddrFromAddrPort(mustAddrPort(t, p.dns)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn := &dns.Conn{Conn: c}
	ask := func(name string) (time.Duration, bool) {
		q := new(dns.Msg).SetQuestion(name, dns.TypeA)
		start := time.Now()
		conn.SetDeadline(start.Add(5 * time.Second))
		if err := conn.WriteMsg(q); err != nil {
			return 0, false
		}
		for {
			r, err := conn.ReadMsg()
			if err != nil {
				return time.Since(start), false
			}
			if r.Id == q.Id { // a late answer to an earlier query is skipped
				return time.Since(start), r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0
			}
		}
	}
	median := func(round string) (time.Duration, int) {
		var ds []time.Duration
		failed := 0
		for i := range 20 {
			d, ok := ask(fmt.Sprintf("n%d.%s.normal.test.", i, round))
			if !ok {
				failed++
			}
			ds = append(ds, d)
		}
		slices.Sort(ds)
		return ds[len(ds)/2], failed
	}
	ask("warm.normal.test.") // the upstream connection's handshake is nobody's wait
	idle, idleFailed := median("idle")

	flood := make(chan *burst.Report, 1)
	go func() {
		cfg := burst.DefaultConfig()
		cfg.Target, cfg.Rate, cfg.Duration, cfg.Baseline, cfg.Timeout = p.dns, 1000, 6*time.Second, 0, 2*time.Second
		cfg.Suffix = "flood.test."
		r, err := burst.Run(context.Background(), cfg)
		if err != nil {
			t.Errorf("flood: %v", err)
		}
		flood <- r
	}()
	// The flood has filled the slots and has queries waiting for them.
	testutil.WaitFor(t, "the flood to queue at the upstream", 10*time.Second, func() bool {
		return metric(p.metrics(t), "nxdns_upstream_queued_total") > 100
	})
	busy, busyFailed := median("flooded")
	r := <-flood
	m := p.metrics(t)
	t.Logf("dropped: kernel queue %v, client share %v, capacity %v; budget exhausted %v",
		metric(m, "nxdns_listener_dropped_total", "reason", "kernel_receive_queue"),
		metric(m, "nxdns_listener_dropped_total", "reason", "udp_client_share"),
		metric(m, "nxdns_listener_dropped_total", "reason", "udp_over_capacity"),
		metric(m, "nxdns_upstream_budget_exhausted_total"))
	if metric(m, "nxdns_upstream_backoff_episodes_total") > 0 {
		t.Log("the upstream entered backoff during the flood")
	}

	t.Logf("other host's misses: p50 idle %v (%d failed), under the flood %v (%d failed); flood: %d sent, p50 %.0f ms, %d timeouts",
		idle, idleFailed, busy, busyFailed, r.Queries, r.P50MS, r.Timeouts)
	if idleFailed > 0 || busyFailed > 0 {
		t.Errorf("the other host's misses failed: %d idle, %d under the flood", idleFailed, busyFailed)
	}
	if busy > 2*idle {
		t.Errorf("under a one-host flood the other host's p50 is %v, over twice its idle %v", busy, idle)
	}
}

func mustAddrPort(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}
