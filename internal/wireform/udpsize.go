package wireform

import "encoding/binary"

// SetUDPSize sets the EDNS UDP payload size (the OPT record's class field,
// RFC 6891 §6.1.2) of the packed message wire, whose last record must be
// its OPT record, to size in place. It reports false, leaving wire
// unchanged, when the last record is not an OPT or the message does not
// parse.
func SetUDPSize(wire []byte, size uint16) bool {
	opt, ok := lastRecord(wire)
	if !ok || be16(wire[opt:]) != 41 {
		return false
	}
	binary.BigEndian.PutUint16(wire[opt+2:], size)
	return true
}
