package query

import "github.com/miekg/dns"

// LocalSOA is the SOA of a zone nxdns serves itself (the local stage's
// empty zones, the DDR stage's resolver.arpa), written as RFC 6303 §3 writes
// an empty zone's: the zone as MNAME, nobody.invalid. as RNAME, serial 1.
// ttl is the record's TTL and its minimum, so a negative answer carrying it
// is cached for ttl (RFC 2308 §5).
func LocalSOA(zone string, ttl uint32) dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns:      zone,
		Mbox:    "nobody.invalid.",
		Serial:  1,
		Refresh: 3600,
		Retry:   1200,
		Expire:  604800,
		Minttl:  ttl,
	}
}
