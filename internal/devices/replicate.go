package devices

import (
	"strings"
)

// Acknowledgements as keys and values, for replication between two nxdns
// (internal/peers, docs/how-to/two-pis.md): a device acknowledged on one is
// acknowledged on the other, seen there yet or not.
//
//	device/KEY   "1": acknowledged (KEY as Device.Key gives it)
//
// There is no un-acknowledging, so the value is always "1".
const ReplicationPrefix = "device/"

// OnChange sets the hook told of every acknowledgement made here (as a
// replication key and value); nil removes it. It is called after the
// acknowledgement applied, on the caller's goroutine, and must not call
// back into Ack.
func (r *Registry) OnChange(fn func(key, value string)) {
	if fn == nil {
		r.onChange.Store(nil)
		return
	}
	r.onChange.Store(&fn)
}

// ApplyReplicated applies a peer's acknowledgement, as Ack does but
// without telling OnChange. A device not seen here yet is remembered as
// acknowledged (within the registry's bound, as a seen one is), so its
// first query here does not make it new. A key or value it does not
// understand is reported false.
func (r *Registry) ApplyReplicated(key, value string) bool {
	s, ok := strings.CutPrefix(key, ReplicationPrefix)
	if !ok || value != "1" {
		return false
	}
	k, ok := parseDevKey(s)
	if !ok || k.String() != s {
		return false
	}
	r.mu.Lock()
	rec := r.devs[k]
	if rec == nil {
		if len(r.devs) >= r.max {
			r.evictLocked()
		}
		rec = &record{key: k, firstSeen: r.now()}
		if k.id == "" {
			rec.macStr = k.mac.String()
		}
		r.devs[k] = rec
	}
	r.mu.Unlock()
	if !rec.acked.Swap(true) {
		r.store.kick()
	}
	return true
}
