package wireform

import "encoding/binary"

// Template is a packed answer kept to answer the same question and shape
// again: its bytes, and where its TTLs are. Write copies it with the new
// query's ID and every TTL counted down by the seconds gone since it was
// packed. A Template never changes once made; it is safe to share.
type Template struct {
	wire []byte
	ttls []uint16 // offsets of the TTL fields, the OPT record's excluded
}

// NewTemplate reads a packed answer (nxdns's own, for a query ParseQuery
// accepted) and returns its template, copying wire. It reports false for an
// answer it cannot count down exactly: one that does not parse, or with a
// TTL at 0 (counted down from its true value, which is lost).
func NewTemplate(wire []byte) (*Template, bool) {
	if len(wire) < 12 || len(wire) > 0xFFFF {
		return nil, false
	}
	qd := be16(wire[4:])
	rrs := int(be16(wire[6:])) + int(be16(wire[8:])) + int(be16(wire[10:]))
	off := 12
	for range qd {
		var ok bool
		if off, ok = skipName(wire, off); !ok || off+4 > len(wire) {
			return nil, false
		}
		off += 4
	}
	t := &Template{ttls: make([]uint16, 0, rrs)}
	for range rrs {
		var ok bool
		if off, ok = skipName(wire, off); !ok || off+10 > len(wire) {
			return nil, false
		}
		if be16(wire[off:]) != 41 { // OPT's "TTL" holds flags
			if binary.BigEndian.Uint32(wire[off+4:]) == 0 {
				return nil, false
			}
			t.ttls = append(t.ttls, uint16(off+4))
		}
		off += 10 + int(be16(wire[off+8:]))
		if off > len(wire) {
			return nil, false
		}
	}
	if off != len(wire) {
		return nil, false
	}
	t.wire = append([]byte(nil), wire...)
	return t, true
}

// Write appends the answer for a query with id, gone seconds after the
// template's packing, to dst[:0] and returns it: the template's bytes with
// the ID replaced and each TTL lowered by gone, never below zero — what
// counting down the cached records themselves gives.
func (t *Template) Write(dst []byte, id uint16, gone int64) []byte {
	out := append(dst[:0], t.wire...)
	binary.BigEndian.PutUint16(out, id)
	gone = max(gone, 0)
	for _, off := range t.ttls {
		ttl := int64(binary.BigEndian.Uint32(out[off:]))
		binary.BigEndian.PutUint32(out[off:], uint32(max(ttl-gone, 0)))
	}
	return out
}

// skipName returns the offset after the name at off: labels ending in the
// root or in a compression pointer.
func skipName(wire []byte, off int) (int, bool) {
	for {
		if off >= len(wire) {
			return 0, false
		}
		l := int(wire[off])
		switch {
		case l == 0:
			return off + 1, true
		case l&0xC0 == 0xC0:
			if off+2 > len(wire) {
				return 0, false
			}
			return off + 2, true
		case l&0xC0 != 0:
			return 0, false
		}
		off += 1 + l
	}
}
