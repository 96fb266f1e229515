package server

import (
	"net"
	"strconv"
	"sync"
	"time"
)

// zoneNames turns a link-local sender's interface index into the zone the
// standard library's UDP writes take. The index as a number would work,
// but net resolves a zone by name first and refreshes its interface table
// (a netlink dump under a global lock, ~100 µs and 60 allocations) on every
// name it does not know: every answer the general path sends to such a
// client would pay that. So the name is looked up once per index and kept
// for a minute, after which a renamed or replaced interface is seen.
//
// Guarantee: zoneName never blocks on another lookup for long (one lookup
// per index per minute), returns the index as a number when the interface
// is unknown (the standard library then resolves it the slow way, still
// correctly), and is safe for concurrent use.
type zoneNames struct {
	mu sync.Mutex
	m  map[uint32]zoneEntry
}

type zoneEntry struct {
	name string
	at   time.Time
}

// zoneKeep is how long a looked-up name is used before it is looked up
// again.
const zoneKeep = time.Minute

var linkZones zoneNames

// zoneName is the zone for interface index i.
func (z *zoneNames) zoneName(i uint32, now time.Time) string {
	z.mu.Lock()
	e, ok := z.m[i]
	z.mu.Unlock()
	if ok && now.Sub(e.at) < zoneKeep {
		return e.name
	}
	name := strconv.FormatUint(uint64(i), 10)
	if ifi, err := net.InterfaceByIndex(int(i)); err == nil {
		name = ifi.Name
	}
	z.mu.Lock()
	if z.m == nil {
		z.m = make(map[uint32]zoneEntry)
	}
	z.m[i] = zoneEntry{name: name, at: now}
	z.mu.Unlock()
	return name
}
