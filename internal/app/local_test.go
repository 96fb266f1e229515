package app

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/testutil"
)

// TestApp_localAllowFollowsInterfaces: with dns.allow = ["local"] (the
// default), a client on a network of an interface that is down is refused,
// answered once the interface comes up, and refused again when it goes down,
// without a reload. It runs in a network namespace of its own (see
// testutil.InNetns): it changes interfaces.
func TestApp_localAllowFollowsInterfaces(t *testing.T) {
	if !testutil.InNetns(t) {
		return
	}
	testutil.IP(t, "link", "set", "lo", "up")
	testutil.IP(t, "link", "add", "nx0", "type", "bridge")
	testutil.IP(t, "addr", "add", "192.0.2.1/24", "dev", "nx0") // down: not attached yet
	r := newRig(t)
	addr := loopbackAddr(t)
	cfg := r.config(t, addr, false)
	if !cfg.DNS.AllowsLocal() {
		t.Fatalf("dns.allow = %q, want the default [\"local\"]", cfg.DNS.Allow)
	}
	r.start(t, cfg)

	ask(t, addr, "loopback.example.") // loopback is always local
	if rc := rcodeFrom(t, "192.0.2.1", addr); rc != dns.RcodeRefused {
		t.Fatalf("client on a down interface's network: %s, want REFUSED", dns.RcodeToString[rc])
	}
	testutil.IP(t, "link", "set", "nx0", "up")
	testutil.WaitFor(t, "NOERROR after nx0 came up", 5*time.Second, func() bool { return rcodeFrom(t, "192.0.2.1", addr) == dns.RcodeSuccess })
	testutil.IP(t, "link", "set", "nx0", "down")
	testutil.WaitFor(t, "REFUSED after nx0 went down", 5*time.Second, func() bool { return rcodeFrom(t, "192.0.2.1", addr) == dns.RcodeRefused })
}

func rcodeFrom(t *testing.T, src, addr string) int {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
	resp, _, err := c.Exchange(new(dns.Msg).SetQuestion("local.example.", dns.TypeA), addr)
	if err != nil {
		t.Fatalf("query from %s: %v", src, err)
	}
	return resp.Rcode
}

// TestStart_summaryNamesAllowList: the start-up configuration line carries
// dns.allow and, for "local", the networks it stands for (docs/design.md#config-allow).
func TestStart_summaryNamesAllowList(t *testing.T) {
	r := newRig(t)
	r.start(t, r.config(t, loopbackAddr(t), false))
	lines := r.observed.FilterMessage("configuration").All()
	if len(lines) != 1 {
		t.Fatalf("%d configuration lines, want 1", len(lines))
	}
	m := lines[0].ContextMap()
	if got := fmt.Sprint(m["allow"]); got != "[local]" {
		t.Errorf("allow = %s, want [local]", got)
	}
	if got := fmt.Sprint(m["local_networks"]); !strings.Contains(got, "127.0.0.0/8") || !strings.Contains(got, "::1/128") {
		t.Errorf("local_networks = %s, want loopback among them", got)
	}
}

// TestPending_keepsOnlyUnfinishedDrains: finished states are dropped, the
// ones still carrying queries are kept, in order.
func TestPending_keepsOnlyUnfinishedDrains(t *testing.T) {
	finished := func(context.Context) error { return nil }
	busy := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	got := pending([]func(context.Context) error{finished, busy, finished, busy})
	if len(got) != 2 {
		t.Fatalf("kept %d drains, want the 2 unfinished", len(got))
	}
}
