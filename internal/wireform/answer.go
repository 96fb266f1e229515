package wireform

import "encoding/binary"

// Template is a packed answer kept to answer the same question and shape
// again: its bytes, and where its TTLs are. Write copies it with the new
// query's ID and every TTL counted down by the seconds gone since it was
// packed. A Template never changes once made; it is safe to share.
//
// Its bytes and the TTLs' offsets are one allocation, the offsets after
// the answer as big-endian 16-bit numbers: a cache hit reads both, and on a
// CPU whose caches the clients' own work keeps cold, each separate
// allocation it touches is another wait for memory
// (docs/performance.md#answer-cache).
type Template struct {
	buf []byte // the answer, then the offsets of its TTL fields (the OPT record's excluded)
	n   int    // the answer's length
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
	// The answer first, its TTL offsets appended as they are found.
	buf := append(make([]byte, 0, len(wire)+2*rrs), wire...)
	for range rrs {
		var ok bool
		if off, ok = skipName(wire, off); !ok || off+10 > len(wire) {
			return nil, false
		}
		if be16(wire[off:]) != 41 { // OPT's "TTL" holds flags
			if binary.BigEndian.Uint32(wire[off+4:]) == 0 {
				return nil, false
			}
			buf = binary.BigEndian.AppendUint16(buf, uint16(off+4))
		}
		off += 10 + int(be16(wire[off+8:]))
		if off > len(wire) {
			return nil, false
		}
	}
	if off != len(wire) {
		return nil, false
	}
	return &Template{buf: buf, n: len(wire)}, true
}

// Write appends the answer for a query with id, gone seconds after the
// template's packing, to dst[:0] and returns it: the template's bytes with
// the ID replaced and each TTL lowered by gone, never below zero — what
// counting down the cached records themselves gives.
func (t *Template) Write(dst []byte, id uint16, gone int64) []byte {
	out := append(dst[:0], t.buf[:t.n]...)
	binary.BigEndian.PutUint16(out, id)
	gone = max(gone, 0)
	for i := t.n; i+1 < len(t.buf); i += 2 {
		off := be16(t.buf[i:])
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
