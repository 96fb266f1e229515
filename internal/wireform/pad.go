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
	n := len(wire) + 4
	if n > limit || n > 0xFFFF {
		return wire, false
	}
	pad := (block - n%block) % block
	pad = min(pad, limit-n)
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
