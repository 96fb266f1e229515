package server

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// TestSNIClientID: the first label under a served name (or under a
// wildcard's base) is the ClientID; the served name itself, another name,
// and an invalid label are not.
func TestSNIClientID(t *testing.T) {
	served := []string{"dns.home.example", "*.dot.home.example"}
	for _, c := range []struct {
		sni, id   string
		ok, valid bool
	}{
		{"tablet.dns.home.example", "tablet", true, true},
		{"Tablet.DNS.home.example.", "tablet", true, true},
		{"phone.dot.home.example", "phone", true, true},
		{"dns.home.example", "", false, false},
		{"tablet.other.example", "", false, false},
		{"a.b.dns.home.example", "", false, false},
		{"bad_label.dns.home.example", "bad_label", true, false},
		{"localhost", "", false, false},
	} {
		id, ok, valid := sniClientID(c.sni, served)
		if ok != c.ok || valid != c.valid || ok && valid && id != c.id {
			t.Errorf("sniClientID(%q) = %q %v %v, want %q %v %v", c.sni, id, ok, valid, c.id, c.ok, c.valid)
		}
	}
}

// TestDoHClientID: /dns-query has none; /dns-query/ID has one; markup, a
// further path and 10 kB are invalid; another path is not DoH.
func TestDoHClientID(t *testing.T) {
	for _, c := range []struct {
		path, id  string
		ok, valid bool
	}{
		{"/dns-query", "", true, true},
		{"/dns-query/kids-tablet", "kids-tablet", true, true},
		{"/dns-query/<script>", "", true, false},
		{"/dns-query/a/b", "", true, false},
		{"/dns-query/" + strings.Repeat("a", 10<<10), "", true, false},
		{"/dns-query/", "", true, false},
		{"/other", "", false, false},
	} {
		id, ok, valid := dohClientID(c.path)
		if id != c.id || ok != c.ok || valid != c.valid {
			t.Errorf("dohClientID(%.30q) = %q %v %v, want %q %v %v", c.path, id, ok, valid, c.id, c.ok, c.valid)
		}
	}
}

// TestClientOptions: from a trusted forwarder a six-byte unicast MAC and a
// full-length client subnet name the device; a malformed MAC and a
// network-sized subnet are ignored and counted; from anyone else both are
// ignored and counted, and a subnet of prefix 0 (a client asking for no
// ECS) is not counted at all.
func TestClientOptions(t *testing.T) {
	forwarder, other := netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("192.168.1.50")
	st := &State{Trusted: []netip.Prefix{netip.PrefixFrom(forwarder, 32)}}
	mac := func(b ...byte) dns.EDNS0 { return &dns.EDNS0_LOCAL{Code: optionMAC, Data: b} }
	subnet := func(a string, bits uint8) dns.EDNS0 {
		ip := netip.MustParseAddr(a)
		fam := uint16(1)
		if ip.Is6() {
			fam = 2
		}
		return &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: bits, Address: ip.AsSlice()}
	}
	for _, c := range []struct {
		name        string
		from        netip.Addr
		opts        []dns.EDNS0
		client, mac string
		via         bool
		want        ClientOptionCounts
	}{
		{"trusted both", forwarder, []dns.EDNS0{mac(2, 0, 0x5e, 0, 0x53, 1), subnet("192.168.7.9", 32)}, "192.168.7.9", "02:00:5e:00:53:01", true, ClientOptionCounts{}},
		{"trusted v6", forwarder, []dns.EDNS0{subnet("2001:db8::9", 128)}, "2001:db8::9", "", true, ClientOptionCounts{}},
		{"trusted malformed", forwarder, []dns.EDNS0{mac(1, 0, 0x5e, 0, 0, 1), mac(2, 0), subnet("192.168.7.0", 24)}, "192.168.1.1", "", false, ClientOptionCounts{MACMalformed: 2, SubnetPartial: 1}},
		{"untrusted", other, []dns.EDNS0{mac(2, 0, 0x5e, 0, 0x53, 1), subnet("192.168.7.9", 32)}, "192.168.1.50", "", false, ClientOptionCounts{MACUntrusted: 1, SubnetUntrusted: 1}},
		{"no ECS wanted", other, []dns.EDNS0{subnet("0.0.0.0", 0)}, "192.168.1.50", "", false, ClientOptionCounts{}},
	} {
		s := &Server{}
		opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}, Option: c.opts}
		q := &pending{st: st, opt: opt, ev: &query.Event{Client: c.from}}
		s.clientOptions(q)
		if q.ev.Client.String() != c.client || q.ev.ClientMAC != c.mac || q.ev.Via.IsValid() != c.via {
			t.Errorf("%s: client %s mac %q via %v, want %s %q %v", c.name, q.ev.Client, q.ev.ClientMAC, q.ev.Via, c.client, c.mac, c.via)
		}
		if got := s.stats.clientOpts.snapshot(); got != c.want {
			t.Errorf("%s: counts %+v, want %+v", c.name, got, c.want)
		}
	}
}
