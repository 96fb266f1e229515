package devices

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/query"
)

// DefaultMaxDevices bounds the devices remembered (by MAC or ClientID). A
// household has tens; a LAN of forged MACs (from a trusted forwarder, or a
// flooded neighbour table) costs at most this many records, ~200 B each,
// the least recently seen unacknowledged ones going first (evictLocked).
const DefaultMaxDevices = 4096

// Device is one device as the API and the dashboard list it.
type Device struct {
	Key        string    `json:"key"`           // mac:… or id:… (Key, IDKey)
	MAC        string    `json:"mac,omitempty"` // "" for a ClientID device
	ClientID   string    `json:"client_id,omitempty"`
	Name       string    `json:"name,omitempty"` // the name last given, "" for none
	Addr       string    `json:"addr,omitempty"` // the address it last asked from
	FirstSeen  time.Time `json:"first_seen"`
	LastSeen   time.Time `json:"last_seen"`
	Queries    uint64    `json:"queries"`
	New        bool      `json:"new"`        // seen for the first time and not acknowledged
	Configured bool      `json:"configured"` // named by a [[clients]] entry
}

// devKey is a device's identity in the registry's map: a MAC, or a
// ClientID; comparable, so a lookup allocates nothing.
type devKey struct {
	mac MAC
	id  string
}

func (k devKey) String() string {
	if k.id != "" {
		return IDKey(k.id)
	}
	return "mac:" + k.mac.String()
}

// record is what the registry keeps of one device. The fields a query
// updates are atomics, so the query path holds only a read lock.
type record struct {
	key        devKey
	macStr     string
	firstSeen  time.Time
	lastSeen   atomic.Int64 // unix nanoseconds
	queries    atomic.Uint64
	addr       atomic.Pointer[netip.Addr]
	name       atomic.Pointer[string]
	acked      atomic.Bool // acknowledged on the dashboard, or known before (see isNew)
	configured atomic.Bool // named by a [[clients]] entry (by mac or client_id) when last seen
	isNew      bool        // seen for the first time by this registry (or listed unacknowledged in its file)
}

// Stats counts what the registry has seen (docs/reference/metrics.md,
// nxdns_devices_*).
type Stats struct {
	Devices    int    // remembered now
	New        int    // of them, new and not acknowledged
	NewTotal   uint64 // first sightings since start
	Evicted    uint64 // forgotten to stay within the bound
	Collisions uint64 // learned names not used: equal to a configured client or group name

	// Queries by device, for metrics labels that stay bounded: one count
	// per device a [[clients]] entry names (the configuration bounds them),
	// the rest summed in OtherQueries.
	Configured   []DeviceCount
	OtherQueries uint64
}

// DeviceCount is one configured device's queries since nxdns started (or
// since the registry last remembered it).
type DeviceCount struct {
	Name    string
	Queries uint64
}

// Registry is the devices nxdns has seen: it outlives reloads (the App
// owns it), holds the neighbour table when one is read, and keeps the
// new-device list with its acknowledgements in the state file.
//
// Guarantees: the query path (Observe) takes a read lock and atomics for a
// device already known; a new device takes the write lock once, is logged
// once and counted once, and is saved by a background goroutine, never on
// the query's goroutine. At most max devices are held.
type Registry struct {
	log   *zap.Logger
	neigh atomic.Pointer[Neighbours]
	now   func() time.Time
	max   int

	mu        sync.RWMutex
	devs      map[devKey]*record
	logWindow time.Time // start of the hour the "new device" lines are counted in (logBudgetLocked)
	logged    int       // lines in that hour

	newTotal, evicted, collisions atomic.Uint64

	store *ackStore // nil: kept in memory only

	onChange atomic.Pointer[func(key, value string)] // told of every acknowledgement (replicate.go)
}

// NewRegistry makes an empty registry.
func NewRegistry(log *zap.Logger) *Registry {
	if log == nil {
		log = zap.NewNop()
	}
	return &Registry{log: log, now: time.Now, max: DefaultMaxDevices, devs: map[devKey]*record{}}
}

// SetNeighbours makes n the neighbour table the registry reads (nil: none).
func (r *Registry) SetNeighbours(n *Neighbours) { r.neigh.Store(n) }

// Neighbours is the table in use, nil when none.
func (r *Registry) Neighbours() *Neighbours { return r.neigh.Load() }

// MACOf is the MAC the neighbour table has for client, if any.
func (r *Registry) MACOf(client netip.Addr) (MAC, bool) { return r.neigh.Load().MAC(client) }

// observe notes one query of the device k at now (the query's arrival),
// from addr, named name; it creates the record the first time. configured
// devices are never new. It returns the record (nil when k is empty).
func (r *Registry) observe(k devKey, now time.Time, addr netip.Addr, name string, configured bool) *record {
	if k == (devKey{}) {
		return nil
	}
	if now.IsZero() {
		now = r.now()
	}
	r.mu.RLock()
	rec := r.devs[k]
	r.mu.RUnlock()
	if rec == nil {
		rec = r.create(k, now, configured)
	}
	rec.lastSeen.Store(now.UnixNano())
	rec.queries.Add(1)
	if p := rec.addr.Load(); p == nil || *p != addr {
		a := addr // allocated only when the address changes
		rec.addr.Store(&a)
	}
	if p := rec.name.Load(); name != "" && (p == nil || *p != name) {
		n := name
		rec.name.Store(&n)
	}
	if configured != rec.configured.Load() {
		rec.configured.Store(configured)
	}
	if configured && !rec.acked.Load() {
		rec.acked.Store(true) // a [[clients]] entry is acknowledgement enough
	}
	return rec
}

// create adds k's record (another query may have added it meanwhile).
func (r *Registry) create(k devKey, now time.Time, configured bool) *record {
	r.mu.Lock()
	if rec := r.devs[k]; rec != nil {
		r.mu.Unlock()
		return rec
	}
	if len(r.devs) >= r.max {
		r.evictLocked()
	}
	rec := &record{key: k, firstSeen: now, isNew: !configured}
	if k.id == "" {
		rec.macStr = k.mac.String()
	}
	rec.acked.Store(configured)
	r.devs[k] = rec
	logIt := !configured && r.logBudgetLocked(now)
	r.mu.Unlock()
	if !configured {
		r.newTotal.Add(1)
		if logIt {
			r.log.Info("new device", zap.String("device", k.String()))
		}
		r.store.kick()
	}
	return rec
}

// maxNewLogsPerHour bounds the "new device" lines: a household sees a few
// new devices a week, while a flood of forged MACs (from a trusted
// forwarder) could make one a query. Past it, one line says the rest of
// the hour is only counted (nxdns_devices_first_seen_total).
const maxNewLogsPerHour = 60

// logBudgetLocked reports whether a "new device" line may be written now;
// the caller holds mu.
func (r *Registry) logBudgetLocked(now time.Time) bool {
	if now.Sub(r.logWindow) >= time.Hour {
		r.logWindow, r.logged = now, 0
	}
	r.logged++
	switch {
	case r.logged <= maxNewLogsPerHour:
		return true
	case r.logged == maxNewLogsPerHour+1:
		r.log.Warn("many new devices: the rest of this hour's are counted, not logged",
			zap.Int("logged", maxNewLogsPerHour), zap.Time("until", r.logWindow.Add(time.Hour)))
	}
	return false
}

// evictLocked forgets the eighth of the devices seen longest ago, of the
// unacknowledged ones while there are any: a flood of self-chosen
// identities (ClientIDs, a forwarder's forged MACs) is all unacknowledged,
// and an acknowledged device it pushed out would be new again on its next
// query, back in the devices.new_devices group.
func (r *Registry) evictLocked() {
	type cand struct {
		k     devKey
		seen  int64
		acked bool // read once: an Ack may land meanwhile (it holds no lock)
	}
	all := make([]cand, 0, len(r.devs))
	unacked := 0
	for k, rec := range r.devs {
		c := cand{k, rec.lastSeen.Load(), rec.acked.Load()}
		if !c.acked {
			unacked++
		}
		all = append(all, c)
	}
	if unacked > 0 {
		all = slices.DeleteFunc(all, func(c cand) bool { return c.acked })
	}
	slices.SortFunc(all, func(a, b cand) int { return cmp.Compare(a.seen, b.seen) })
	for _, c := range all[:min(max(len(r.devs)/8, 1), len(all))] {
		delete(r.devs, c.k)
		r.evicted.Add(1)
	}
}

// List is every device remembered, most recently seen first.
func (r *Registry) List() []Device {
	r.mu.RLock()
	out := make([]Device, 0, len(r.devs))
	for _, rec := range r.devs {
		out = append(out, rec.device())
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b Device) int { return b.LastSeen.Compare(a.LastSeen) })
	return out
}

func (rec *record) device() Device {
	d := Device{
		Key: rec.key.String(), MAC: rec.macStr, ClientID: rec.key.id,
		FirstSeen: rec.firstSeen.UTC(), Queries: rec.queries.Load(),
		New: rec.isNew && !rec.acked.Load(), Configured: rec.configured.Load(),
	}
	if ns := rec.lastSeen.Load(); ns != 0 {
		d.LastSeen = time.Unix(0, ns).UTC()
	}
	if p := rec.addr.Load(); p != nil && p.IsValid() {
		d.Addr = p.String()
	}
	if p := rec.name.Load(); p != nil {
		d.Name = *p
	}
	return d
}

// Ack acknowledges the device with key (as Device.Key gives it); it
// reports whether such a device is remembered.
func (r *Registry) Ack(key string) bool {
	k, ok := parseDevKey(key)
	if !ok {
		return false
	}
	r.mu.RLock()
	found := r.devs[k]
	r.mu.RUnlock()
	if found == nil {
		return false
	}
	if !found.acked.Swap(true) {
		r.store.kick()
		if fn := r.onChange.Load(); fn != nil {
			(*fn)(ReplicationPrefix+k.String(), "1")
		}
	}
	return true
}

// Stats is the registry's counters now.
func (r *Registry) Stats() Stats {
	s := Stats{NewTotal: r.newTotal.Load(), Evicted: r.evicted.Load(), Collisions: r.collisions.Load()}
	r.mu.RLock()
	s.Devices = len(r.devs)
	byName := map[string]uint64{}
	for _, rec := range r.devs {
		if rec.isNew && !rec.acked.Load() {
			s.New++
		}
		n := rec.queries.Load()
		if p := rec.name.Load(); p != nil && rec.configured.Load() {
			byName[*p] += n
		} else {
			s.OtherQueries += n
		}
	}
	r.mu.RUnlock()
	for name, n := range byName {
		s.Configured = append(s.Configured, DeviceCount{Name: name, Queries: n})
	}
	slices.SortFunc(s.Configured, func(a, b DeviceCount) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// Static is the configuration's device names: [[clients]] by mac,
// client_id and ip, and the names a learned name must not take (every
// [[clients]] name and group name: docs/devices.md "Names").
type Static struct {
	ByMAC    map[MAC]string
	ByID     map[string]string // lower-case ClientID → name
	ByAddr   map[netip.Addr]string
	Reserved map[string]bool
}

// ViewOptions configures a View.
type ViewOptions struct {
	Static Static
	Leases *Leases                 // nil: no lease files
	PTR    func(netip.Addr) string // the learned PTR names (forward.Names.Name); nil for none
}

// View is one configuration's way of naming devices, over the App's
// Registry: a reload builds a new View, the registry and its new-device
// list stay.
type View struct {
	reg    *Registry
	static Static
	leases *Leases
	ptr    func(netip.Addr) string
}

// NewView makes a View over reg.
func NewView(reg *Registry, opts ViewOptions) *View {
	return &View{reg: reg, static: opts.Static, leases: opts.Leases, ptr: opts.PTR}
}

// Identify names the query's client in ev (docs/devices.md "Names"): its
// MAC (ev.ClientMAC as a trusted forwarder gave it, else the neighbour
// table's for ev.Client), its name and whether it is a new device. The
// name is, first found: the [[clients]] entry of its ClientID, of its MAC,
// of its address; the ClientID itself; its lease name by MAC, by address;
// its PTR name. A ClientID, lease or PTR name equal to a [[clients]] or
// group name, or that is an IP address, is not used (it would give one device another's settings:
// a device chooses its own DHCP host name, which the router's DNS then
// serves) and is counted. It never waits: map lookups, a read lock and atomics.
func (v *View) Identify(ev *query.Event) {
	var mac MAC
	if ev.ClientMAC != "" {
		mac, _ = ParseMAC(ev.ClientMAC)
	} else if m, ok := v.reg.MACOf(ev.Client); ok {
		mac = m
	}
	k := devKey{mac: mac}
	configured := false
	name := ""
	if ev.ClientID != "" {
		k = devKey{id: strings.ToLower(ev.ClientID)}
		if n, ok := v.static.ByID[k.id]; ok {
			name, configured = n, true
		}
	}
	if name == "" && !mac.IsZero() {
		if n, ok := v.static.ByMAC[mac]; ok {
			name, configured = n, true
		}
	}
	if name == "" {
		if n, ok := v.static.ByAddr[ev.Client]; ok {
			name, configured = n, true
		}
	}
	if name == "" && ev.ClientID != "" {
		name = v.learned(ev.ClientID)
	}
	if name == "" {
		name = v.learned(v.leases.ByMAC(mac))
	}
	if name == "" {
		name = v.learned(v.leases.ByAddr(ev.Client))
	}
	if name == "" && v.ptr != nil {
		name = v.learned(v.ptr(ev.Client)) // the router's DNS often holds the DHCP host name
	}
	ev.ClientName = name
	var rec *record
	if k != (devKey{}) {
		rec = v.reg.observe(k, ev.Time, ev.Client, name, configured)
	}
	if rec != nil {
		if ev.ClientMAC == "" {
			ev.ClientMAC = rec.macStr
		}
		ev.NewDevice = rec.isNew && !rec.acked.Load()
	} else if !mac.IsZero() && ev.ClientMAC == "" {
		ev.ClientMAC = mac.String()
	}
}

// Uncount takes back the query Identify counted for ev's device: the UDP
// fast path identifies a query before it knows whether the cache answers
// it, and one it hands to the general path is identified, and counted,
// there again. It never waits.
func (v *View) Uncount(ev *query.Event) {
	var k devKey
	if ev.ClientID != "" {
		k.id = strings.ToLower(ev.ClientID)
	} else if mac, ok := ParseMAC(ev.ClientMAC); ok {
		k.mac = mac
	} else {
		return
	}
	v.reg.mu.RLock()
	rec := v.reg.devs[k]
	v.reg.mu.RUnlock()
	if rec != nil && rec.queries.Load() > 0 {
		rec.queries.Add(^uint64(0))
	}
}

// learned is a self-chosen name (a ClientID, a lease's host name, a PTR
// name) if it may be used: not a configured client or group name, nor an
// IP address (a per-client pause is kept by address or name in one map:
// internal/filter's pauses).
func (v *View) learned(name string) string {
	if name == "" {
		return ""
	}
	if _, err := netip.ParseAddr(name); err == nil || v.static.Reserved[name] {
		v.reg.collisions.Add(1)
		return ""
	}
	return name
}
