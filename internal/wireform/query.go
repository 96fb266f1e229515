// Package wireform reads an ordinary DNS query and writes a cached answer
// straight in wire form, without building a dns.Msg. It is the server's
// fast path for cache hits (docs/performance.md#answer-cache): a query
// that is anything but ordinary is left to miekg/dns and the stage chain,
// which remain the one implementation of what an answer says.
package wireform

import "encoding/binary"

// Shape bits: the parts of a query, besides its question, that change the
// answer nxdns sends to it. Two queries of the same question and shape get
// the same answer, byte for byte, but for the ID.
const (
	ShapeRD   uint8 = 1 << iota // recursion desired, echoed
	ShapeCD                     // checking disabled, echoed and part of the cache key
	ShapeAD                     // AD set: the client understands AD (RFC 6840 §5.8)
	ShapeEDNS                   // the query has an OPT record, so the answer has one
	ShapeDO                     // DNSSEC OK, part of the cache key
)

// Query is an ordinary query as ParseQuery read it.
type Query struct {
	ID     uint16
	Shape  uint8
	Name   []byte // the question name in presentation form, "www.example.com."; a slice of the caller's buffer
	Qtype  uint16
	Qclass uint16
	// UDPSize is the payload size the client advertised; 0 without EDNS.
	UDPSize uint16
}

// MaxName is the longest presentation form of a name ParseQuery accepts:
// 255 bytes on the wire, 254 dotted with the root's dot.
const MaxName = 255

// ParseQuery reads wire as an ordinary query and reports whether it is one:
// a header with QR clear, opcode QUERY, exactly one question and nothing but
// an optional EDNS version 0 OPT record after it, no trailing bytes; a
// question name of lower-case letters, digits, '-' and '_' in uncompressed
// labels. Such a name's presentation form is exactly what miekg/dns
// prints for it, with nothing to escape or fold, so it is the cache's key
// as it stands. Anything else reports false and goes the general way.
// ParseQuery never allocates; name holds the presentation form.
func ParseQuery(wire []byte, name *[MaxName]byte) (Query, bool) {
	var q Query
	if len(wire) < 12 {
		return q, false
	}
	flags := binary.BigEndian.Uint16(wire[2:])
	if flags&0x8000 != 0 || flags&0x7800 != 0 { // QR, opcode
		return q, false
	}
	qd, an, ns, ar := be16(wire[4:]), be16(wire[6:]), be16(wire[8:]), be16(wire[10:])
	if qd != 1 || an != 0 || ns != 0 || ar > 1 {
		return q, false
	}
	q.ID = be16(wire)
	if flags&0x0100 != 0 {
		q.Shape |= ShapeRD
	}
	if flags&0x0010 != 0 {
		q.Shape |= ShapeCD
	}
	if flags&0x0020 != 0 {
		q.Shape |= ShapeAD
	}
	off, n := 12, 0
	for {
		if off >= len(wire) {
			return q, false
		}
		l := int(wire[off])
		off++
		if l == 0 {
			break
		}
		if l > 63 || off+l > len(wire) || n+l+1 > MaxName-1 {
			return q, false // a pointer, a reserved label type, or too long
		}
		for _, c := range wire[off : off+l] {
			if !plain(c) {
				return q, false
			}
			name[n] = c
			n++
		}
		name[n] = '.'
		n++
		off += l
	}
	if n == 0 {
		name[0] = '.'
		n = 1
	}
	if off+4 > len(wire) {
		return q, false
	}
	q.Name = name[:n]
	q.Qtype, q.Qclass = be16(wire[off:]), be16(wire[off+2:])
	off += 4
	if ar == 1 {
		// The OPT record: root owner, type 41, class = payload size,
		// TTL = extended rcode, version, DO and Z, then its options.
		if off+11 > len(wire) || wire[off] != 0 || be16(wire[off+1:]) != 41 {
			return q, false
		}
		q.UDPSize = be16(wire[off+3:])
		if wire[off+5] != 0 || wire[off+6] != 0 { // extended rcode, version
			return q, false
		}
		if wire[off+7]&0x80 != 0 {
			q.Shape |= ShapeDO
		}
		q.Shape |= ShapeEDNS
		rdlen := int(be16(wire[off+9:]))
		off += 11
		if off+rdlen != len(wire) || !plainOptions(wire[off:off+rdlen]) {
			return q, false
		}
		off += rdlen
	}
	if off != len(wire) {
		return q, false
	}
	return q, true
}

// plainOptions reports whether an OPT record's options are ones the answer
// does not depend on and miekg/dns reads without complaint: none, a cookie
// (RFC 7873: nxdns does not answer cookies) or padding (RFC 7830).
func plainOptions(b []byte) bool {
	for len(b) > 0 {
		if len(b) < 4 {
			return false
		}
		code, n := be16(b), int(be16(b[2:]))
		if 4+n > len(b) {
			return false
		}
		switch {
		case code == 10 && (n == 8 || 16 <= n && n <= 40):
		case code == 12:
		default:
			return false
		}
		b = b[4+n:]
	}
	return true
}

// plain reports the bytes a fast-path name may hold: those miekg/dns prints
// as they are and strings.ToLower leaves alone.
func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }
