package rebind

import (
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

func TestInternal_addresses(t *testing.T) {
	for s, want := range map[string]bool{
		"10.1.2.3": true, "172.16.0.1": true, "192.168.1.1": true, // RFC 1918
		"fd00::1": true, "fc00::1": true, // RFC 4193
		"127.0.0.1": true, "::1": true, // loopback
		"169.254.1.1": true, "fe80::1": true, // link-local
		"0.0.0.0": true, "::": true, "0.1.2.3": true, // unspecified, "this network"
		"100.64.0.1": true, "100.127.255.254": true, // RFC 6598 shared (CGNAT, tailnets)
		"::ffff:192.168.1.1": true, "64:ff9b::10.0.0.1": true, // inside mapped and NAT64
		// public, and the documentation and benchmarking ranges tests answer with
		"192.0.2.1": false, "198.51.100.1": false, "203.0.113.1": false, "198.18.0.1": false,
		"2001:db8::1": false, "9.9.9.9": false, "100.128.0.1": false, "64:ff9b::9.9.9.9": false,
	} {
		if got := Internal(netip.MustParseAddr(s)); got != want {
			t.Errorf("Internal(%s) = %v, want %v", s, got, want)
		}
	}
}

func a(name, ip string) dns.RR {
	return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)}
}

func aaaa(name, ip string) dns.RR {
	return &dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 60}, AAAA: net.ParseIP(ip)}
}

func cname(name, target string) dns.RR {
	return &dns.CNAME{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 60}, Target: target}
}

func https(name string, hint string) dns.RR {
	return &dns.HTTPS{SVCB: dns.SVCB{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeHTTPS, Class: dns.ClassINET, Ttl: 60},
		Priority: 1, Target: ".", Value: []dns.SVCBKeyValue{&dns.SVCBIPv4Hint{Hint: []net.IP{net.ParseIP(hint)}}}}}
}

// TestCheck_cases: what is refused and what passes, with the allow list
// and the dashboard's allowed names.
func TestCheck_cases(t *testing.T) {
	g := New(Options{Allow: []string{"plex.direct", "Nas.Example."}, Allowed: func(n string) bool { return n == "dash.example" }})
	for _, tc := range []struct {
		name    string
		qname   string
		answer  []dns.RR
		refused bool
	}{
		{"public", "www.example.", []dns.RR{a("www.example.", "198.51.100.1")}, false},
		{"private A", "evil.example.", []dns.RR{a("evil.example.", "192.168.1.1")}, true},
		{"loopback AAAA", "evil.example.", []dns.RR{aaaa("evil.example.", "::1")}, true},
		{"mixed public and private", "evil.example.", []dns.RR{a("evil.example.", "198.51.100.1"), a("evil.example.", "10.0.0.1")}, true},
		{"CNAME chain to a private address", "evil.example.", []dns.RR{cname("evil.example.", "x.attacker.example."), a("x.attacker.example.", "10.0.0.1")}, true},
		{"CNAME into an allowed name", "evil.example.", []dns.RR{cname("evil.example.", "10-0-0-1.plex.direct."), a("10-0-0-1.plex.direct.", "10.0.0.1")}, true},
		{"allowed name's child", "x.plex.direct.", []dns.RR{a("x.plex.direct.", "10.0.0.1")}, false},
		{"allowed name, any case", "NAS.example.", []dns.RR{a("NAS.example.", "10.0.0.1")}, false},
		{"allowed from the dashboard", "dash.example.", []dns.RR{a("dash.example.", "10.0.0.1")}, false},
		{"HTTPS address hint", "evil.example.", []dns.RR{https("evil.example.", "192.168.1.1")}, true},
		{"no address", "evil.example.", []dns.RR{cname("evil.example.", "nas.lan.")}, false},
		// The bad input (issue 32): an allowed name is a whole
		// label's suffix, never a string's; case never hides an address.
		{"allowed name without a dot boundary", "evilplex.direct.", []dns.RR{a("evilplex.direct.", "10.0.0.1")}, true},
		{"upper-case name", "EVIL.EXAMPLE.", []dns.RR{a("EVIL.EXAMPLE.", "10.0.0.1")}, true},
		{"IPv4-mapped AAAA", "evil.example.", []dns.RR{aaaa("evil.example.", "::ffff:192.168.1.1")}, true},
		{"DNS64 of a private address", "evil.example.", []dns.RR{aaaa("evil.example.", "64:ff9b::c0a8:101")}, true},
		{"SVCB IPv6 hint", "_dns.evil.example.", []dns.RR{&dns.SVCB{Hdr: dns.RR_Header{Name: "_dns.evil.example.", Rrtype: dns.TypeSVCB, Class: dns.ClassINET, Ttl: 60},
			Priority: 1, Target: ".", Value: []dns.SVCBKeyValue{&dns.SVCBIPv6Hint{Hint: []net.IP{net.ParseIP("fe80::1")}}}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := new(dns.Msg).SetQuestion(tc.qname, dns.TypeA)
			resp := new(dns.Msg).SetReply(q)
			resp.Answer = tc.answer
			out, refused := g.Check(q, resp)
			if refused != tc.refused {
				t.Fatalf("refused %v, want %v", refused, tc.refused)
			}
			if !refused {
				return
			}
			if out.Rcode != dns.RcodeServerFailure || len(out.Answer) != 0 {
				t.Errorf("refusal %v", out)
			}
			opt := out.IsEdns0()
			if opt == nil || len(opt.Option) != 1 || opt.Option[0].(*dns.EDNS0_EDE).InfoCode != EDECode {
				t.Errorf("refusal's OPT %v, want EDE 15", opt)
			}
		})
	}
}

func TestCheck_nxdomain(t *testing.T) {
	g := New(Options{NXDomain: true})
	q := new(dns.Msg).SetQuestion("evil.example.", dns.TypeA)
	resp := new(dns.Msg).SetReply(q)
	resp.Answer = []dns.RR{a("evil.example.", "127.0.0.1")}
	if out, ok := g.Check(q, resp); !ok || out.Rcode != dns.RcodeNameError {
		t.Errorf("refused %v, answer %v; want NXDOMAIN", ok, out)
	}
}
