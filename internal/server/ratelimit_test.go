package server

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/query"
)

// wakeBurst is a phone or TV waking up: a few hundred names at once
// (docs/design.md#lesson-bursts; the saturated-primary scenario's next
// burst of 300, docs/server.md).
const wakeBurst = 300

// askFrom sends m from src over UDP and returns the answer.
func askFrom(t *testing.T, src, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := dialUDPFrom(t, src, addr)
	if _, err := c.Write(mustPack(t, m)); err != nil {
		t.Fatal(err)
	}
	return readUDPMsg(t, c)
}

// TestRateLimit_wakeBurstNeverTripsAFloodDoes: with the shipped limit (50
// a second, bursts of 1000), a device's wake-up burst of distinct names is
// answered in full; the same device flooding one cached name (the UDP fast
// path) is then refused with EDE 18, counted; another device and an
// exempt forwarder are served throughout.
func TestRateLimit_wakeBurstNeverTripsAFloodDoes(t *testing.T) {
	c := cache.New(cache.Options{Size: 10000, MaxTTL: time.Hour})
	st := c.Stage()
	t.Cleanup(func() { st.Close(); c.Close() })
	lim := NewRateLimiter(50, 1000, []netip.Prefix{netip.MustParsePrefix("127.0.0.9/32")})
	s := startServer(t, &State{Router: pool(answerA("198.51.100.7")), Allow: loopback, Stages: []query.Stage{st}, Limit: lim})
	addr := udpAddr(s)

	for i := range wakeBurst {
		m := askFrom(t, "127.0.0.2", addr, newQuery(fmt.Sprintf("name%d.example.", i), dns.TypeA))
		if m.Rcode != dns.RcodeSuccess {
			t.Fatalf("wake-up burst: query %d answered %s", i, dns.RcodeToString[m.Rcode])
		}
	}
	if n := lim.Snapshot().Limited; n != 0 {
		t.Fatalf("%d queries of a wake-up burst limited", n)
	}

	flood := newQuery("popular.example.", dns.TypeA)
	flood.SetEdns0(1232, false)
	var refused *dns.Msg
	for range 2000 {
		if m := askFrom(t, "127.0.0.2", addr, flood); m.Rcode == dns.RcodeRefused {
			refused = m
			break
		}
	}
	if refused == nil {
		t.Fatal("2000 more queries from one device at full speed were never refused")
	}
	if e := edeOf(refused); e == nil || e.InfoCode != dns.ExtendedErrorCodeProhibited {
		t.Errorf("refusal's EDE %v, want 18 (Prohibited)", e)
	}
	if lim.Snapshot().Limited == 0 {
		t.Errorf("refusal not counted: limiter %+v", lim.Snapshot())
	}
	waitFor(t, "the refusal counted by source", func() bool {
		return count(s.Snapshot(), query.SourceRateLimited, "REFUSED") > 0
	})
	for _, src := range []string{"127.0.0.3", "127.0.0.9"} {
		if m := askFrom(t, src, addr, flood); m.Rcode != dns.RcodeSuccess {
			t.Errorf("client %s answered %s while another device is limited", src, dns.RcodeToString[m.Rcode])
		}
	}
	for range 1500 { // the exempt forwarder: never limited
		if m := askFrom(t, "127.0.0.9", addr, flood); m.Rcode != dns.RcodeSuccess {
			t.Fatalf("exempt client answered %s", dns.RcodeToString[m.Rcode])
		}
	}
}

// TestRateLimit_boundedUnderSpoofedSources: 2^17 source addresses
// (a spoofed flood) never hold more than maxRateBuckets buckets, and an
// IPv6 /64 is one device.
func TestRateLimit_boundedUnderSpoofedSources(t *testing.T) {
	lim := NewRateLimiter(50, 100, nil)
	now := time.Unix(1_700_000_000, 0)
	for i := range 1 << 17 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		lim.Allow(a, now)
	}
	if got := lim.Snapshot().Devices; got > maxRateBuckets {
		t.Errorf("%d buckets after 2^17 sources, want at most %d", got, maxRateBuckets)
	}
	if lim.Snapshot().Evicted == 0 {
		t.Error("a full table evicted nothing")
	}
	six := NewRateLimiter(1, 2, nil)
	for i := range 3 {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i + 1)})
		if ok := six.Allow(a, now); ok != (i < 2) {
			t.Errorf("IPv6 address %d of one /64: allowed %v", i, ok)
		}
	}
}

// BenchmarkRateLimiter_Allow is a query's cost of the limit: one device
// under its rate, and an exempt client (the prefix check alone).
func BenchmarkRateLimiter_Allow(b *testing.B) {
	lim := NewRateLimiter(1_000_000, 1_000_000, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	dev, exempt := netip.MustParseAddr("192.168.1.20"), netip.MustParseAddr("127.0.0.1")
	now := time.Now()
	b.Run("device", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lim.Allow(dev, now)
		}
	})
	b.Run("exempt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lim.Allow(exempt, now)
		}
	})
}
