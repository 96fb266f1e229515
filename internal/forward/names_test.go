package forward

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// ptrFake is a LAN resolver answering PTR queries from a table. With a gate
// it holds every answer until the gate closes (or the test ends).
type ptrFake struct {
	addr netip.AddrPort
	gate chan struct{} // nil: answer at once

	mu     sync.Mutex        // guards the fields below
	names  map[string]string // PTR owner → target; a missing owner is NXDOMAIN
	rcode  int               // when not success, answer this instead
	counts map[string]int    // PTR queries received, by owner
}

func startPTRFake(t *testing.T, gated bool, names map[string]string) *ptrFake {
	t.Helper()
	f := &ptrFake{names: names, counts: map[string]int{}}
	if gated {
		f.gate = make(chan struct{})
	}
	f.addr = startUDPServer(t, func(w dns.ResponseWriter, q *dns.Msg) {
		owner := q.Question[0].Name
		f.mu.Lock()
		f.counts[owner]++
		target, found := f.names[owner]
		rcode := f.rcode
		f.mu.Unlock()
		if f.gate != nil {
			select {
			case <-f.gate:
			case <-t.Context().Done():
				return
			}
		}
		r := new(dns.Msg).SetRcode(q, rcode)
		switch {
		case rcode != dns.RcodeSuccess:
		case !found:
			r.Rcode = dns.RcodeNameError
		default:
			r.Answer = append(r.Answer, &dns.PTR{
				Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: 300},
				Ptr: target,
			})
		}
		w.WriteMsg(r)
	})
	return f
}

func (f *ptrFake) count(owner string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[owner]
}

func (f *ptrFake) set(owner, target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names[owner] = target
}

type storedName struct {
	ip   netip.Addr
	name string
}

// newTestNames builds Names over the reverse zone 168.192.in-addr.arpa. (and
// d.f.ip6.arpa. for fd00::/8) served by addr. stored receives every result
// a lookup stores.
func newTestNames(t *testing.T, addr netip.AddrPort, timeout time.Duration, static map[netip.Addr]string) (n *Names, stored chan storedName) {
	t.Helper()
	tab := newTestTable(t, timeout,
		"lan", "udp://127.0.0.1:1", // not a reverse zone: never asked
		"168.192.in-addr.arpa", "udp://"+addr.String(),
		"d.f.ip6.arpa", "udp://"+addr.String(),
	)
	n = NewNames(static, tab, NamesOptions{Allowed: testAllow})
	stored = make(chan storedName, 64)
	n.stored = func(ip netip.Addr, name string) { stored <- storedName{ip, name} }
	t.Cleanup(n.Close)
	return n, stored
}

func waitStored(t *testing.T, stored chan storedName) storedName {
	t.Helper()
	select {
	case s := <-stored:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no lookup result stored within 10s")
		return storedName{}
	}
}

func (n *Names) pendingCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.pending)
}

func (n *Names) cacheLen() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.learned)
}

var client50 = netip.MustParseAddr("192.168.1.50")

// testAllow is the dns.allow of the Names tests: the reverse zone covers all
// of 192.168.0.0/16, so 192.168.2.x is a covered client nxdns refuses.
var testAllow = func(a netip.Addr) bool {
	for _, p := range []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("192.168.3.0/24"), netip.MustParsePrefix("fd00::/8")} {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// A client outside dns.allow (refused, or a spoofed source) triggers no PTR
// lookup and takes no cache entry (docs/design.md#learned-names, issue 13 finding 8), while a
// static name still shows.
func TestNames_refusedClientsAreNotLookedUp(t *testing.T) {
	f := startPTRFake(t, false, map[string]string{"7.2.168.192.in-addr.arpa.": "intruder.lan."})
	refusedStatic := netip.MustParseAddr("192.168.2.8")
	n, _ := newTestNames(t, f.addr, 2*time.Second, map[netip.Addr]string{refusedStatic: "printer"})
	for range 100 {
		if got := n.Name(netip.MustParseAddr("192.168.2.7")); got != "" {
			t.Fatalf("Name of a refused client = %q", got)
		}
	}
	if got := n.Name(refusedStatic); got != "printer" {
		t.Errorf("static name of a client outside allow = %q, want printer", got)
	}
	if p, c := n.pendingCount(), n.cacheLen(); p != 0 || c != 0 {
		t.Errorf("%d lookups started and %d entries cached for a refused client, want none", p, c)
	}
	if c := f.count("7.2.168.192.in-addr.arpa."); c != 0 {
		t.Errorf("%d PTR queries for a refused client, want 0", c)
	}
}

const ptr50 = "50.1.168.192.in-addr.arpa."

func TestNames_LearnedAfterFirstLookup(t *testing.T) {
	f := startPTRFake(t, false, map[string]string{ptr50: "host.lan."})
	n, stored := newTestNames(t, f.addr, 2*time.Second, nil)

	if got := n.Name(client50); got != "" {
		t.Errorf("first Name = %q, want \"\" while the lookup runs", got)
	}
	if s := waitStored(t, stored); s.ip != client50 || s.name != "host.lan" {
		t.Fatalf("stored %+v, want host.lan for %v", s, client50)
	}
	if got := n.Name(client50); got != "host.lan" {
		t.Errorf("Name = %q, want the learned host.lan", got)
	}
	// IPv4-mapped IPv6 (a dual-stack listener's view) is the same client.
	if got := n.Name(netip.MustParseAddr("::ffff:192.168.1.50")); got != "host.lan" {
		t.Errorf("Name(mapped) = %q, want host.lan", got)
	}
	if c := f.count(ptr50); c != 1 {
		t.Errorf("%d PTR queries, want 1: the cache answers the rest", c)
	}
}

func TestNames_IPv6ReverseZone(t *testing.T) {
	ip := netip.MustParseAddr("fd00::1")
	f := startPTRFake(t, false, map[string]string{reverseName(ip): "nas.lan."})
	n, stored := newTestNames(t, f.addr, 2*time.Second, nil)
	n.Name(ip)
	if s := waitStored(t, stored); s.name != "nas.lan" {
		t.Fatalf("stored %+v, want nas.lan", s)
	}
	if got := n.Name(ip); got != "nas.lan" {
		t.Errorf("Name = %q, want nas.lan", got)
	}
}

func TestNames_StaticWinsOverLearned(t *testing.T) {
	client51 := netip.MustParseAddr("192.168.1.51")
	f := startPTRFake(t, false, map[string]string{ptr50: "host.lan.", reverseName(client51): "other.lan."})
	n, stored := newTestNames(t, f.addr, 2*time.Second, map[netip.Addr]string{client50: "laptop"})

	if got := n.Name(client50); got != "laptop" {
		t.Errorf("Name = %q, want the static laptop", got)
	}
	if p := n.pendingCount(); p != 0 {
		t.Errorf("%d lookups started for a statically named client, want 0", p)
	}
	n.Name(client51) // a learned neighbour proves lookups work at all
	waitStored(t, stored)
	if got := n.Name(client50); got != "laptop" || f.count(ptr50) != 0 {
		t.Errorf("Name = %q after %d PTR queries, want laptop and none", got, f.count(ptr50))
	}
}

func TestNames_FailureLeavesNameEmpty(t *testing.T) {
	f := startPTRFake(t, false, map[string]string{ptr50: "host.lan."})
	f.mu.Lock()
	f.rcode = dns.RcodeServerFailure
	f.mu.Unlock()
	n, stored := newTestNames(t, f.addr, 2*time.Second, nil)

	n.Name(client50)
	if s := waitStored(t, stored); s.name != "" {
		t.Fatalf("stored %q after SERVFAIL, want \"\"", s.name)
	}
	if got := n.Name(client50); got != "" {
		t.Errorf("Name = %q after SERVFAIL, want \"\"", got)
	}
	if p := n.pendingCount(); p != 0 || f.count(ptr50) != 1 {
		t.Errorf("pending %d, queries %d: the failure is cached, want no new lookup", p, f.count(ptr50))
	}
}

func TestNames_TimeoutNeverBlocksName(t *testing.T) {
	silent := startUDP(t, func(*net.UDPConn, netip.AddrPort, *dns.Msg) {}) // never answers
	n, stored := newTestNames(t, silent, 300*time.Millisecond, nil)

	if got := n.Name(client50); got != "" {
		t.Errorf("Name = %q, want \"\"", got)
	}
	// Name returned while its lookup is still in flight: it did not wait.
	if p := n.pendingCount(); p != 1 {
		t.Fatalf("pending = %d right after Name, want 1", p)
	}
	if got := n.Name(client50); got != "" || n.pendingCount() != 1 {
		t.Errorf("second Name = %q, pending %d; want \"\" and still the one lookup", got, n.pendingCount())
	}
	if s := waitStored(t, stored); s.name != "" {
		t.Fatalf("stored %q after a timeout, want \"\"", s.name)
	}
	if got := n.Name(client50); got != "" {
		t.Errorf("Name = %q after a timeout, want \"\"", got)
	}
}

func TestNames_ConcurrentCallsStartOneLookup(t *testing.T) {
	f := startPTRFake(t, true, map[string]string{ptr50: "host.lan."})
	n, stored := newTestNames(t, f.addr, 5*time.Second, nil)

	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if got := n.Name(client50); got != "" {
				t.Errorf("Name = %q while the only lookup is held, want \"\"", got)
			}
		})
	}
	wg.Wait()
	close(f.gate)
	if s := waitStored(t, stored); s.name != "host.lan" {
		t.Fatalf("stored %+v, want host.lan", s)
	}
	if c := f.count(ptr50); c != 1 {
		t.Errorf("%d PTR queries from 16 concurrent Name calls, want 1", c)
	}
}

func TestNames_LookupsInFlightAreBounded(t *testing.T) {
	f := startPTRFake(t, true, map[string]string{})
	n, stored := newTestNames(t, f.addr, 5*time.Second, nil)

	for i := range 3 * maxPTRLookups {
		n.Name(netip.AddrFrom4([4]byte{192, 168, 3, byte(i)}))
	}
	if p := n.pendingCount(); p != maxPTRLookups {
		t.Errorf("pending = %d, want the bound %d", p, maxPTRLookups)
	}
	close(f.gate)
	for range maxPTRLookups {
		waitStored(t, stored)
	}
	select {
	case s := <-stored:
		t.Errorf("lookup for %v ran beyond the bound", s.ip)
	default:
	}
}

func TestNames_CacheIsBounded(t *testing.T) {
	f := startPTRFake(t, false, map[string]string{})
	n, stored := newTestNames(t, f.addr, 2*time.Second, nil)
	n.maxEntries = 8

	var last netip.Addr
	for i := range 20 {
		last = netip.AddrFrom4([4]byte{192, 168, 3, byte(i)})
		f.set(reverseName(last), "h"+string(rune('a'+i))+".lan.")
		n.Name(last)
		waitStored(t, stored)
		if l := n.cacheLen(); l > 8 {
			t.Fatalf("cache holds %d entries, want at most 8", l)
		}
	}
	if got := n.Name(last); got != "ht.lan" {
		t.Errorf("newest entry %q, want ht.lan: eviction must drop the oldest", got)
	}
}

// fakeClock is a settable clock for cache expiry.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestNames_ExpiredNameIsServedWhileRefreshed(t *testing.T) {
	f := startPTRFake(t, false, map[string]string{ptr50: "host.lan."})
	n, stored := newTestNames(t, f.addr, 2*time.Second, nil)
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	n.now = clock.Now

	n.Name(client50)
	waitStored(t, stored)
	f.set(ptr50, "renamed.lan.")
	clock.Advance(learnedMaxTTL + time.Second) // past any clamped TTL

	if got := n.Name(client50); got != "host.lan" {
		t.Errorf("Name = %q on expiry, want the old host.lan while refreshing", got)
	}
	if s := waitStored(t, stored); s.name != "renamed.lan" {
		t.Fatalf("refresh stored %q, want renamed.lan", s.name)
	}
	if got := n.Name(client50); got != "renamed.lan" {
		t.Errorf("Name = %q after refresh, want renamed.lan", got)
	}
}

func TestNames_UncoveredAddressStartsNoLookup(t *testing.T) {
	f := startPTRFake(t, false, map[string]string{})
	n, _ := newTestNames(t, f.addr, 2*time.Second, nil)
	for _, ip := range []string{"10.0.0.1", "2001:db8::1", "127.0.0.1"} {
		if got := n.Name(netip.MustParseAddr(ip)); got != "" {
			t.Errorf("Name(%s) = %q, want \"\"", ip, got)
		}
	}
	if p := n.pendingCount(); p != 0 {
		t.Errorf("%d lookups started for addresses no reverse zone covers", p)
	}
}

func TestNames_WithoutReverseZoneLearnsNothing(t *testing.T) {
	n := NewNames(map[netip.Addr]string{client50: "laptop"},
		newTestTable(t, time.Second, "lan", "udp://127.0.0.1:53"), NamesOptions{})
	defer n.Close()
	if n.reverse != nil {
		t.Error("a table without reverse zones is kept for lookups")
	}
	if n.Name(client50) != "laptop" || n.Name(netip.MustParseAddr("192.168.1.9")) != "" {
		t.Error("static names must still work")
	}
	nilNames := NewNames(nil, nil, NamesOptions{})
	defer nilNames.Close()
	if nilNames.Name(client50) != "" {
		t.Error("no table, no static: want \"\"")
	}
}

func TestNames_CloseStopsLookupsInFlight(t *testing.T) {
	got := make(chan struct{}, 1)
	silent := startUDP(t, func(*net.UDPConn, netip.AddrPort, *dns.Msg) { got <- struct{}{} })
	n, stored := newTestNames(t, silent, time.Minute, nil)

	n.Name(client50)
	<-got // the lookup is waiting on the resolver
	start := time.Now()
	n.Close()
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("Close took %v: it must cancel the lookup, not wait out read_timeout", elapsed)
	}
	if n.Name(netip.MustParseAddr("192.168.1.51")) != "" || n.pendingCount() != 0 {
		t.Error("a lookup started after Close")
	}
	select {
	case s := <-stored:
		t.Errorf("a cancelled lookup stored %+v", s)
	default:
	}
}

func TestReverseName(t *testing.T) {
	for _, s := range []string{"192.168.1.50", "0.0.0.0", "255.255.255.255", "10.9.99.100",
		"fd00::1", "2001:db8:abcd:12::ff00:42", "::"} {
		want, err := dns.ReverseAddr(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := reverseName(netip.MustParseAddr(s)); got != want {
			t.Errorf("reverseName(%s) = %q, want %q", s, got, want)
		}
	}
}

func TestClampTTL(t *testing.T) {
	for ttl, want := range map[uint32]time.Duration{
		0: learnedMinTTL, 30: learnedMinTTL, 300: 5 * time.Minute, 86400: learnedMaxTTL,
	} {
		if got := clampTTL(ttl); got != want {
			t.Errorf("clampTTL(%d) = %v, want %v", ttl, got, want)
		}
	}
}
