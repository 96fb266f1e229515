package wireform

import (
	"encoding/binary"
	"slices"
)

// Block sizes of RFC 8467 §4.1's Block-Length Padding.
const (
	QueryBlock    = 128 // a client's queries
	ResponseBlock = 468 // a server's responses
)

// optPadding is the EDNS(0) Padding option's code (RFC 7830 §3).
const optPadding = 12

// Pad appends an EDNS(0) Padding option (RFC 7830) to the packed message
// wire, whose last record must be its OPT record, so that its length is a
// multiple of block — or limit when the next multiple is larger — and
// returns the result, which may share wire's array. It reports false,
// returning wire unchanged, when the last record is not an OPT, the message
// does not parse, or not even an empty option fits within limit.
func Pad(wire []byte, block, limit int) ([]byte, bool) {
	opt, ok := lastRecord(wire)
	if !ok || be16(wire[opt:]) != 41 {
		return wire, false
	}
	size := PaddedLen(len(wire), block, limit)
	if size == len(wire) {
		return wire, false
	}
	pad := size - len(wire) - 4
	rdlen := int(be16(wire[opt+8:])) + 4 + pad
	if rdlen > 0xFFFF {
		return wire, false
	}
	binary.BigEndian.PutUint16(wire[opt+8:], uint16(rdlen))
	wire = binary.BigEndian.AppendUint16(wire, optPadding)
	wire = binary.BigEndian.AppendUint16(wire, uint16(pad))
	wire = slices.Grow(wire, pad)[:len(wire)+pad]
	clear(wire[len(wire)-pad:])
	return wire, true
}

// PaddedLen is the length Pad gives a message of n bytes it pads: n and the
// option's 4 octets rounded up to a multiple of block, or limit when that
// is smaller; n when not even the empty option fits within limit. A caller
// that packs into a buffer of this capacity lets Pad pad it in place.
func PaddedLen(n, block, limit int) int {
	padded := n + 4 // the option's code and length (RFC 7830 §3)
	if padded > limit || padded > 0xFFFF {
		return n
	}
	return min(padded+(block-padded%block)%block, limit)
}

// lastRecord is the offset of the last resource record's type field in
// wire: after its owner name. false when wire has no record or does not
// parse up to its end exactly.
func lastRecord(wire []byte) (int, bool) {
	if len(wire) < 12 {
		return 0, false
	}
	qd := be16(wire[4:])
	rrs := int(be16(wire[6:])) + int(be16(wire[8:])) + int(be16(wire[10:]))
	if rrs == 0 {
		return 0, false
	}
	off := 12
	for range qd {
		var ok bool
		if off, ok = skipName(wire, off); !ok || off+4 > len(wire) {
			return 0, false
		}
		off += 4
	}
	last := 0
	for range rrs {
		var ok bool
		if off, ok = skipName(wire, off); !ok || off+10 > len(wire) {
			return 0, false
		}
		last = off
		off += 10 + int(be16(wire[off+8:]))
		if off > len(wire) {
			return 0, false
		}
	}
	return last, off == len(wire)
}
