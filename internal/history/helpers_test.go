package history

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// t0 is a fixed instant the tests' clocks start from.
var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable Now for Options.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func openTest(t *testing.T, path string, c *clock, mod func(*Options)) *History {
	t.Helper()
	o := Options{Path: path, MaxBytes: 64 << 20, MaxAge: 30 * 24 * time.Hour, Flush: time.Hour, Now: c.Now}
	if mod != nil {
		mod(&o)
	}
	h := Open(o)
	t.Cleanup(func() { h.Close() })
	return h
}

func filePath(t *testing.T) string { return filepath.Join(t.TempDir(), "history.db") }

// event is a complete query event: every field set, so a round trip that
// loses one fails.
func event(at time.Time, i int) *query.Event {
	reply := new(dns.Msg)
	reply.SetQuestion(fmt.Sprintf("host%d.example.", i), dns.TypeA)
	reply.Answer = append(reply.Answer, &dns.A{
		Hdr: dns.RR_Header{Name: reply.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A:   netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}).AsSlice(),
	})
	return &query.Event{
		Time:       at,
		Client:     netip.AddrFrom4([4]byte{192, 168, 1, byte(10 + i%5)}),
		ClientName: fmt.Sprintf("client%d", i%5),
		Proto:      query.UDP,
		Name:       fmt.Sprintf("Host%d.Example.", i),
		Qtype:      dns.TypeA,
		Qclass:     dns.ClassINET,
		Source:     query.SourcePool,
		Upstream:   "tls://192.0.2.53:853",
		Tried:      []string{"tls://192.0.2.54:853", "tls://192.0.2.53:853"},
		Cache:      query.CacheMiss,
		Rcode:      dns.RcodeSuccess,
		EDE:        &query.EDE{Code: 3, Text: "stale"},
		Reply:      reply,
		Duration:   time.Duration(i%50+1) * time.Millisecond,
		Resolved:   true,
	}
}
