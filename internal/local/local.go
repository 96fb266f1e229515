// Package local is the local-answers stage (docs/design.md#local-answers): the operator's own
// records, answered authoritatively, and the private and special-use names
// nxdns answers itself so that they never reach a public upstream.
//
// It is the first stage after access control: nothing it answers is
// filtered, cached or forwarded, and a name it does not know passes on
// untouched.
package local

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/query"
)

// Options configure a Stage.
type Options struct {
	// Records are [local] records in zone-file syntax.
	Records []string
	// ForwardPrivate passes the private and special-use names on instead of
	// answering them (for networks that really route them).
	ForwardPrivate bool
	// BypassGuards answers use-application-dns.net and resolver.arpa.
	BypassGuards bool
	// Covered reports whether a forward zone covers a name (lower-case,
	// fully qualified): such a name goes to the zone's LAN resolver, which
	// may know it, and is never answered here. Nil means no forward zones.
	Covered func(name string) bool
	// Encrypted reports whether nxdns serves DoT or DoH itself (docs/design.md#tls-serving);
	// then resolver.arpa passes on to the stage that advertises it (DDR).
	// Nil means it does not.
	Encrypted func() bool
}

// Stage answers local records and special names. It is immutable once
// built: a reload builds a new one.
type Stage struct {
	names     map[string]*owner // lower-case FQDN → its records
	wild      map[string]*owner // "lab.home.arpa." → the records of "*.lab.home.arpa." (wildcard.go)
	exists    map[string]bool   // every owner name and every name above one (empty non-terminals); nil without wildcards
	forward   bool
	guards    bool
	covered   func(string) bool
	encrypted func() bool
}

// owner is the records of one name.
type owner struct {
	rrs   []dns.RR // in the order given, PTRs derived last
	cname dns.RR   // the name's CNAME, if it has one (then it has nothing else)
	wild  bool     // a wildcard's records: answered under the name asked (wildcard.go)
}

// negTTL is the TTL of the SOA in nxdns's own negative answers, so a
// client caches them briefly (RFC 2308 §3) and a changed configuration
// shows within a minute.
const negTTL = 60

// maxChain bounds how many CNAMEs the stage follows inside its own data, so
// a loop among local records ends.
const maxChain = 8

// New builds the stage; an invalid record is an error naming it (validation
// reports the same with its path).
func New(o Options) (*Stage, error) {
	s := &Stage{
		names:     map[string]*owner{},
		forward:   o.ForwardPrivate,
		guards:    o.BypassGuards,
		covered:   o.Covered,
		encrypted: o.Encrypted,
	}
	if s.covered == nil {
		s.covered = func(string) bool { return false }
	}
	if s.encrypted == nil {
		s.encrypted = func() bool { return false }
	}
	for i, text := range o.Records {
		rr, msg := config.ParseRecord(text)
		if msg != "" {
			return nil, fmt.Errorf("local.records[%d]: %s", i, msg)
		}
		if err := s.add(rr); err != nil {
			return nil, fmt.Errorf("local.records[%d]: %w", i, err)
		}
	}
	s.derivePTR()
	s.indexWildcards()
	return s, nil
}

func (s *Stage) add(rr dns.RR) error {
	name := strings.ToLower(rr.Header().Name)
	o := s.names[name]
	if o == nil {
		o = &owner{}
		s.names[name] = o
	}
	isCNAME := rr.Header().Rrtype == dns.TypeCNAME
	if o.cname != nil || isCNAME && len(o.rrs) > 0 {
		return fmt.Errorf("%s has a CNAME and other records: a CNAME stands alone (RFC 1034 §3.6.2)", name)
	}
	if isCNAME {
		o.cname = rr
	}
	o.rrs = append(o.rrs, rr)
	return nil
}

// derivePTR adds a PTR for every A and AAAA address that has none given,
// pointing at the first name that carries it, with that record's TTL.
func (s *Stage) derivePTR() {
	var derived []dns.RR
	seen := map[string]bool{}
	for _, o := range s.names {
		for _, rr := range o.rrs {
			if rr.Header().Rrtype == dns.TypePTR {
				seen[strings.ToLower(rr.Header().Name)] = true
			}
		}
	}
	// Map iteration order is random; walk names sorted so "the first name"
	// is the same on every start.
	for _, name := range slices.Sorted(maps.Keys(s.names)) {
		if isWildcard(name) {
			continue // a wildcard's address has no one name to point back at
		}
		for _, rr := range s.names[name].rrs {
			var ip net.IP
			switch a := rr.(type) {
			case *dns.A:
				ip = a.A
			case *dns.AAAA:
				ip = a.AAAA
			default:
				continue
			}
			rev, err := dns.ReverseAddr(ip.String())
			if err != nil || seen[rev] {
				continue
			}
			seen[rev] = true
			derived = append(derived, &dns.PTR{
				Hdr: dns.RR_Header{Name: rev, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: rr.Header().Ttl},
				Ptr: rr.Header().Name,
			})
		}
	}
	for _, rr := range derived {
		_ = s.add(rr) // a reverse name with A records and a CNAME is not derivable; add only fails then
	}
}

// Answer answers what the stage knows and passes everything else on.
func (s *Stage) Answer(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error) {
	if len(r.Msg.Question) != 1 {
		return next.Answer(ctx, r)
	}
	q := r.Msg.Question[0]
	name := strings.ToLower(dns.Fqdn(q.Name))
	if resp := s.answer(r.Msg, q, name); resp != nil {
		r.Event.Source = query.SourceLocal
		return resp, nil
	}
	return next.Answer(ctx, r)
}

// Passes reports whether the stage would hand the query of ev on (the
// server's fast path asks it before answering a cache hit; query.Passer).
func (s *Stage) Passes(ev *query.Event, _ []string) bool {
	d := s.decide(dns.Question{Name: ev.Name, Qtype: ev.Qtype, Qclass: ev.Qclass}, strings.ToLower(dns.Fqdn(ev.Name)))
	return d.kind == passOn
}

// answer is the stage's answer: nil passes the query on.
func (s *Stage) answer(req *dns.Msg, q dns.Question, name string) *dns.Msg {
	d := s.decide(q, name)
	switch d.kind {
	case fromRecords:
		return s.records(req, q, d.owner)
	case nxdomain:
		return negative(req, dns.RcodeNameError, d.zone)
	case nodata:
		return negative(req, dns.RcodeSuccess, d.zone)
	case loopbackAnswer:
		return loopback(req, q)
	case apexAnswer:
		return apex(req, q, d.zone)
	case localhostPTR:
		resp := reply(req, dns.RcodeSuccess)
		resp.Answer = append(resp.Answer, &dns.PTR{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: negTTL},
			Ptr: "localhost.",
		})
		return resp
	default:
		return nil
	}
}

// decision is what the stage makes of a question, before any answer is
// built: Answer builds it, Passes only looks at it.
type decision struct {
	kind  answerKind
	zone  string // the negative answer's SOA owner
	owner *owner // fromRecords: the name's local data
}

type answerKind uint8

const (
	passOn         answerKind = iota // not the stage's: the next link answers
	fromRecords                      // local records
	nxdomain                         // the name does not exist
	nodata                           // the name exists without data of the type
	loopbackAnswer                   // localhost
	apexAnswer                       // a zone nxdns serves, asked at its apex
	localhostPTR                     // the loopback address's reverse name
)

// decide is the stage's decision for question q of name (lower case, fully
// qualified).
func (s *Stage) decide(q dns.Question, name string) decision {
	if q.Qclass == dns.ClassINET {
		if o := s.lookup(name); o != nil {
			return decision{kind: fromRecords, owner: o}
		}
	}
	zone, k := match(specialZones, name)
	switch {
	case k == kindGuardNX && s.guards:
		return decision{kind: nxdomain, zone: zone}
	case k == kindGuardNoData && s.guards && !s.encrypted():
		if name == zone {
			return decision{kind: apexAnswer, zone: zone}
		}
		return decision{kind: nodata, zone: zone}
	}
	if s.forward || s.covered(name) {
		return decision{}
	}
	switch {
	case k == kindNXDomain && loopbackReverse(name) && q.Qtype == dns.TypePTR:
		// 127.0.0.1 and ::1 are localhost, as Unbound answers them.
		return decision{kind: localhostPTR}
	case k == kindLoopback && name == zone && q.Qtype != dns.TypeA && q.Qtype != dns.TypeAAAA:
		return decision{kind: apexAnswer, zone: zone}
	case k == kindLoopback:
		return decision{kind: loopbackAnswer}
	case k == kindNXDomain:
		// A name of the zone that has local records was answered above.
		// The apex is the zone RFC 6303 §3 writes: its SOA and NS, NODATA
		// for any other type. Below it, only the loopback address's reverse
		// name exists; every other name does not.
		if name == zone || loopbackReverse(name) {
			return decision{kind: apexAnswer, zone: zone}
		}
		return decision{kind: nxdomain, zone: zone}
	case singleLabel(name) && !infrastructure(q.Qtype):
		// NODATA, not NXDOMAIN: the name may well exist ("com."), and a
		// downstream cache applying RFC 8020 would take NXDOMAIN as the
		// non-existence of everything below it (docs/local.md).
		return decision{kind: nodata, zone: name}
	}
	return decision{}
}

// loopbackReverse reports whether name (lower case) is the reverse name of
// 127.0.0.1 or ::1.
func loopbackReverse(name string) bool {
	return name == "1.0.0.127.in-addr.arpa." || name == ip6Loopback
}

// ip6Loopback is ::1's reverse name, the apex of its own RFC 6303 zone.
var ip6Loopback = "1." + strings.Repeat("0.", 31) + "ip6.arpa."

// apex answers a question at the apex of a zone nxdns serves itself (or at
// the loopback address's reverse name, for types other than PTR): the SOA
// and NS of RFC 6303 §3 when asked for (ANY gets both), NODATA with the SOA
// otherwise. The zone exists, so no question of its apex is NXDOMAIN.
func apex(req *dns.Msg, q dns.Question, zone string) *dns.Msg {
	resp := reply(req, dns.RcodeSuccess)
	name := strings.ToLower(dns.Fqdn(q.Name))
	if name == zone {
		if q.Qtype == dns.TypeSOA || q.Qtype == dns.TypeANY {
			resp.Answer = append(resp.Answer, soa(zone))
		}
		if q.Qtype == dns.TypeNS || q.Qtype == dns.TypeANY {
			resp.Answer = append(resp.Answer, &dns.NS{
				Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: negTTL},
				Ns:  zone, // RFC 6303 §3: "@ NS @"
			})
		}
	}
	if len(resp.Answer) == 0 {
		resp.Ns = append(resp.Ns, soa(zone))
	}
	return resp
}

// infrastructure reports the types a validating stub or a tool asks of a
// top-level domain ("com. DS"): they reveal nothing about the LAN's hosts,
// so a single-label name of these types passes on.
func infrastructure(t uint16) bool {
	switch t {
	case dns.TypeNS, dns.TypeDS, dns.TypeDNSKEY, dns.TypeSOA:
		return true
	}
	return false
}

// records answers from a name's local data: the type asked for, the CNAME
// and what it leads to inside the local data, or NODATA.
func (s *Stage) records(req *dns.Msg, q dns.Question, o *owner) *dns.Msg {
	resp := reply(req, dns.RcodeSuccess)
	name := q.Name // the owner name a wildcard's records are answered under
	for range maxChain {
		if o.cname != nil && q.Qtype != dns.TypeCNAME {
			resp.Answer = append(resp.Answer, o.at(o.cname, name))
			target := strings.ToLower(o.cname.(*dns.CNAME).Target)
			next := s.lookup(target)
			if next == nil {
				// The target is not local: the client's resolver follows it
				// (nxdns answers with the CNAME alone, as an authoritative
				// server would).
				return resp
			}
			o, name = next, o.cname.(*dns.CNAME).Target
			continue
		}
		for _, rr := range o.rrs {
			if rr.Header().Rrtype == q.Qtype || q.Qtype == dns.TypeANY {
				resp.Answer = append(resp.Answer, o.at(rr, name))
			}
		}
		if len(resp.Answer) == 0 {
			resp.Ns = append(resp.Ns, soa(parent(o.rrs[0].Header().Name)))
		}
		return resp
	}
	return resp
}

// loopback answers localhost and its subdomains (RFC 6761 §6.3).
func loopback(req *dns.Msg, q dns.Question) *dns.Msg {
	resp := reply(req, dns.RcodeSuccess)
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: negTTL}
	switch q.Qtype {
	case dns.TypeA:
		hdr.Rrtype = dns.TypeA
		resp.Answer = append(resp.Answer, &dns.A{Hdr: hdr, A: net.IPv4(127, 0, 0, 1).To4()})
	case dns.TypeAAAA:
		hdr.Rrtype = dns.TypeAAAA
		resp.Answer = append(resp.Answer, &dns.AAAA{Hdr: hdr, AAAA: net.IPv6loopback})
	default:
		resp.Ns = append(resp.Ns, soa("localhost."))
	}
	return resp
}

// negative is NXDOMAIN or NODATA with the zone's SOA, so clients cache it
// for negTTL (RFC 2308).
func negative(req *dns.Msg, rcode int, zone string) *dns.Msg {
	resp := reply(req, rcode)
	resp.Ns = append(resp.Ns, soa(zone))
	return resp
}

func reply(req *dns.Msg, rcode int) *dns.Msg {
	resp := new(dns.Msg)
	resp.SetRcode(req, rcode)
	resp.Authoritative = true
	return resp
}

// soa is the SOA of a zone nxdns serves itself (RFC 6303 §3).
func soa(zone string) dns.RR { return query.LocalSOA(zone, negTTL) }

// parent is the zone a local name's negative answer names: its parent, or
// the name itself when it is a single label.
func parent(name string) string {
	if i := strings.IndexByte(name, '.'); i >= 0 && i < len(name)-1 {
		return name[i+1:]
	}
	return name
}

var _ query.Passer = (*Stage)(nil)
