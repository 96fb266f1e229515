// Package ddr answers Discovery of Designated Resolvers (RFC 9462) for
// nxdns's own DoT, DoH, DoH3 and DoQ service (docs/design.md#tls-serving): a client that asks the plain
// resolver for _dns.resolver.arpa SVCB learns that the same resolver speaks
// DoT and DoH, on which ports, under which certificate name, and upgrades
// (Windows 11, Android 13+ and Chrome do this by themselves).
//
// The stage runs first in the chain and only when TLS serving is on; with
// it off, the local stage answers resolver.arpa with NODATA (docs/design.md#bypass-guards).
package ddr

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

const (
	zone  = "resolver.arpa."
	owner = "_dns.resolver.arpa." // RFC 9462 §4
	// ttl of the SVCB answer: long enough to spare the query on every
	// network change, short enough that a changed port is seen in minutes.
	ttl = 300
	// dohPath is the URI template of RFC 9461 §5.
	dohPath = "/dns-query{?dns}"
)

// Config is what the stage advertises. Names is read at every query, so a
// renewed certificate for another name is advertised at once.
type Config struct {
	DoTPort, DoHPort  uint16          // 0: not served
	DoQPort, DoH3Port uint16          // UDP; 0: not served (RFC 9250; DoH over HTTP/3)
	Hints             []netip.Addr    // specific listen addresses; wildcards are left out
	Names             func() []string // the serving certificate's DNS names; the first plain one is the target
}

// Stage is the DDR stage.
type Stage struct{ cfg Config }

// New returns the stage for cfg.
func New(cfg Config) *Stage { return &Stage{cfg: cfg} }

var _ query.Stage = (*Stage)(nil)

// Answer answers names at or below resolver.arpa itself: SVCB records for
// _dns.resolver.arpa, NODATA for every other type and name there (the zone
// is special-use and never forwarded, RFC 9462 §6.4), and passes
// everything else on.
func (s *Stage) Answer(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error) {
	q := r.Msg.Question[0]
	name := strings.ToLower(q.Name)
	if !inZone(name) {
		return next.Answer(ctx, r)
	}
	r.Event.Source = query.SourceLocal
	m := new(dns.Msg).SetReply(r.Msg)
	m.Authoritative = true
	m.RecursionAvailable = true
	switch {
	case name == owner && q.Qtype == dns.TypeSVCB:
		m.Answer = s.records(q.Name)
	case name == zone && q.Qtype == dns.TypeSOA:
		m.Answer = []dns.RR{soa()}
	case name == zone && q.Qtype == dns.TypeNS:
		m.Answer = []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: negTTL}, Ns: zone}}
	}
	if len(m.Answer) == 0 {
		// An authoritative NODATA carries the zone's SOA, so the client
		// knows how long to cache it (RFC 2308 §3).
		m.Ns = []dns.RR{soa()}
	}
	return m, nil
}

// negTTL is the TTL of the zone's SOA and NS, and so of a NODATA: the local
// stage's own (docs/local.md), so resolver.arpa's negative answers are the
// same whether DDR is on or not.
const negTTL = 60

// soa is resolver.arpa's SOA as nxdns serves the zone.
func soa() dns.RR { return query.LocalSOA(zone, negTTL) }

// Passes reports whether the stage would hand the query of ev on: any name
// outside resolver.arpa (query.Passer, for the server's fast path).
func (s *Stage) Passes(ev *query.Event, _ []string) bool { return !inZone(strings.ToLower(ev.Name)) }

// inZone reports whether name (lower case) is resolver.arpa or below it.
func inZone(name string) bool { return name == zone || strings.HasSuffix(name, "."+zone) }

// records are the SVCB records of RFC 9461 for the services configured:
// DoH first (priority 1: browsers and Windows prefer it), then DoT, then
// the QUIC services, DoH over HTTP/3 (alpn "h3", with DoH's dohpath) and
// DoQ (alpn "doq", RFC 9250 §4.1.1): a network that drops UDP to them
// leaves a client that tries in priority order on a TCP service that works.
func (s *Stage) records(qname string) []dns.RR {
	target := s.target()
	if target == "" {
		return nil // no name a client could verify: advertise nothing
	}
	var v4, v6 []netip.Addr
	for _, a := range s.cfg.Hints {
		if a.Unmap().Is4() {
			v4 = append(v4, a.Unmap())
		} else {
			v6 = append(v6, a)
		}
	}
	var rrs []dns.RR
	add := func(alpn []string, port uint16, extra ...dns.SVCBKeyValue) {
		kv := []dns.SVCBKeyValue{&dns.SVCBAlpn{Alpn: alpn}, &dns.SVCBPort{Port: port}}
		kv = append(kv, extra...)
		if len(v4) > 0 {
			kv = append(kv, &dns.SVCBIPv4Hint{Hint: ips(v4)})
		}
		if len(v6) > 0 {
			kv = append(kv, &dns.SVCBIPv6Hint{Hint: ips(v6)})
		}
		rrs = append(rrs, &dns.SVCB{
			Hdr:      dns.RR_Header{Name: qname, Rrtype: dns.TypeSVCB, Class: dns.ClassINET, Ttl: ttl},
			Priority: uint16(len(rrs) + 1),
			Target:   target,
			Value:    kv,
		})
	}
	if s.cfg.DoHPort != 0 {
		add([]string{"h2"}, s.cfg.DoHPort, &dns.SVCBDoHPath{Template: dohPath})
	}
	if s.cfg.DoTPort != 0 {
		add([]string{"dot"}, s.cfg.DoTPort)
	}
	if s.cfg.DoH3Port != 0 {
		add([]string{"h3"}, s.cfg.DoH3Port, &dns.SVCBDoHPath{Template: dohPath})
	}
	if s.cfg.DoQPort != 0 {
		add([]string{"doq"}, s.cfg.DoQPort)
	}
	return rrs
}

// target is the first non-wildcard DNS name of the certificate, as an FQDN.
func (s *Stage) target() string {
	if s.cfg.Names == nil {
		return ""
	}
	for _, n := range s.cfg.Names() {
		if n != "" && !strings.HasPrefix(n, "*") {
			return dns.Fqdn(strings.ToLower(n))
		}
	}
	return ""
}

func ips(as []netip.Addr) []net.IP {
	out := make([]net.IP, len(as))
	for i, a := range as {
		out[i] = a.AsSlice()
	}
	return out
}

var _ query.Passer = (*Stage)(nil)
