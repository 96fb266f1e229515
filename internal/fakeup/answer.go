package fakeup

import (
	"encoding/binary"
	"hash/fnv"
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// ednsSize is the UDP payload size the fake upstream advertises when it echoes
// EDNS: the DNS Flag Day 2020 value, which every answer here fits easily.
const ednsSize = 1232

// AddressV4 is the synthetic A answer for name: a hash of the lower-cased,
// fully qualified name mapped into 198.18.0.0/15 (RFC 2544 benchmarking
// space, never routed), so a scenario can compute the expected answer and a
// cache cannot hand one name another name's address unnoticed.
func AddressV4(name string) netip.Addr {
	h := nameHash(name)
	v := binary.BigEndian.Uint32(h[:4]) & (1<<17 - 1) // 17 host bits of a /15
	return netip.AddrFrom4([4]byte{198, 18 | byte(v>>16), byte(v >> 8), byte(v)})
}

// AddressV6 is the synthetic AAAA answer for name, in 2001:db8::/32 (RFC 3849
// documentation space), from the same hash as AddressV4.
func AddressV6(name string) netip.Addr {
	h := nameHash(name)
	var a [16]byte
	a[0], a[1], a[2], a[3] = 0x20, 0x01, 0x0d, 0xb8
	copy(a[4:], h[4:]) // 96 bits, independent of the 4 bytes AddressV4 uses
	return netip.AddrFrom16(a)
}

func nameHash(name string) [16]byte {
	f := fnv.New128a()
	f.Write([]byte(strings.ToLower(dns.Fqdn(name))))
	var h [16]byte
	f.Sum(h[:0])
	return h
}

// respond builds the reply to one decoded query. It answers the question as
// asked (the name keeps the client's case, RFC 4343), echoes EDNS, and returns
// nil for a message that must get no reply (a response, RFC 1035 §7.3).
func respond(q *dns.Msg, b Behaviour, ttl uint32) *dns.Msg {
	if q.Response {
		return nil
	}
	r := new(dns.Msg)
	r.SetReply(q)
	r.Authoritative = true
	// RFC 6891 §7: an OPT in the query gets one in the reply, and its options
	// are not echoed.
	if opt := q.IsEdns0(); opt != nil {
		r.SetEdns0(ednsSize, opt.Do())
	}
	switch {
	case q.Opcode != dns.OpcodeQuery:
		r.Rcode = dns.RcodeNotImplemented
	case len(q.Question) != 1:
		r.Rcode = dns.RcodeFormatError
	case b.Refuse:
		r.Rcode = dns.RcodeRefused
	case b.TC:
		r.Truncated = true
	default:
		r.Answer = synthesize(q.Question[0], ttl)
	}
	return r
}

// synthesize answers A and AAAA in class IN and gives every other question
// NODATA (NOERROR, no records), which is what an authoritative server says
// for a type the name does not have.
func synthesize(q dns.Question, ttl uint32) []dns.RR {
	if q.Qclass != dns.ClassINET {
		return nil
	}
	hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: dns.ClassINET, Ttl: ttl}
	switch q.Qtype {
	case dns.TypeA:
		a := AddressV4(q.Name).As4()
		return []dns.RR{&dns.A{Hdr: hdr, A: net.IP(a[:])}}
	case dns.TypeAAAA:
		a := AddressV6(q.Name).As16()
		return []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: net.IP(a[:])}}
	}
	return nil
}

// formErr is the reply to bytes that carry a DNS header but do not decode:
// FORMERR with the query's ID, so the client learns it was heard (RFC 1035
// §4.1.1). Fewer than 12 bytes get no reply.
func formErr(buf []byte) *dns.Msg {
	if len(buf) < 12 {
		return nil
	}
	r := new(dns.Msg)
	r.Id = binary.BigEndian.Uint16(buf)
	r.Response = true
	r.Rcode = dns.RcodeFormatError
	return r
}
