package cache

import (
	"reflect"
	"sync"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// An entry's weight is the heap memory it holds at its largest, in bytes:
// the answer as parsed, the two renderings a hit and a stale answer keep
// (entry.view and entry.staleView), the summary the view carries, and a
// template for each query shape the fast path may keep (hit.go). The store
// bounds the sum of the weights (docs/cache.md "Memory"), so the bound holds
// however the entries are used afterwards; an entry never asked again costs
// less than its weight.
//
// Wire length alone is no measure: a record's parsed form can cost many
// times its wire form (a TXT record of empty strings costs a 16-byte string
// header, three times over with the renderings, for each wire byte; an
// HTTPS record's parameters cost an interface and an allocation each; an
// NSEC record's type bitmap two bytes for each bit). So the types whose
// rdata parses into more than strings and byte slices are counted value by
// value (rrBytes), and every other type by its struct plus its wire length,
// which bounds the bytes its names and slices hold. BenchmarkEntryBytes and
// TestWeigh_neverBelowTheHeapAnEntryHolds check the weights against the
// heap an entry really holds.

// Fixed costs, from the structs they stand for and otter's node.
var (
	// entryOverhead is the entry (the parsed message's struct is in it),
	// the view and wireSet headers, the view's message struct, the
	// question, and otter's node for the key.
	entryOverhead = int(reflect.TypeFor[entry]().Size()) + int(reflect.TypeFor[dns.Msg]().Size()) + int(reflect.TypeFor[view]().Size()) + 160
	// ifaceBytes is one element of a []dns.RR.
	ifaceBytes = 16
	// stringBytes is one element of a []string.
	stringBytes = int(reflect.TypeFor[string]().Size())
	// templateOverhead is one wireSet and its template's slice header.
	templateOverhead = int(reflect.TypeFor[wireSet]().Size()) + 32
	// maxTemplate bounds the answer one template holds: the fast path
	// answers UDP only, and nxdns's UDP answers are at most 1232 bytes (the
	// EDNS size it advertises, internal/server), so a larger answer's
	// template is its truncated form. Twice that leaves room for the TTL
	// offsets the template keeps beside the answer.
	maxTemplate = 2 * 1232
)

// weigh is e's weight (see above); e's answer is set.
func weigh(e *entry) int {
	m := &e.msg
	own, shared, wire, n := 0, 0, 0, 0
	for _, rrs := range [...][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range rrs {
			o, s := rrBytes(rr)
			own, shared = own+o, shared+s
			wire += dns.Len(rr)
			n++
		}
	}
	// A rendering copies every record (copyRRs) but shares its strings;
	// the stale one adds an OPT record with the Extended DNS Error.
	rendering := own + n*ifaceBytes
	w := entryOverhead + 2*roundAlloc(len(e.name)) +
		own + shared + n*ifaceBytes + // the answer as stored
		2*rendering + 128 + // the view and the stale view
		roundAlloc(len(query.Summary(m))) + // the view's summary
		maxShapes*(templateOverhead+roundAlloc(min(wire+4*n, maxTemplate)))
	if e.cnames != nil {
		w += 32 + len(*e.cnames)*stringBytes
	}
	return w
}

// rrBytes is what one parsed record holds: own, the allocations a copy
// (dns.Copy) makes again, and shared, the strings a copy shares with it.
//
// A record whose fields are numbers, strings and byte slices (A, AAAA,
// CNAME, MX, SOA, DS, RRSIG, ...: flat) holds its struct and its names,
// strings and bytes, which its wire length bounds (a name as counted
// uncompressed; a hex or base64 string as up to twice its bytes, within the
// three copies counted as own). Any other record (TXT's strings, HTTPS's
// parameters, NSEC's type bitmap, APL's prefixes, of any type the DNS
// library parses now or later) is walked value by value: there a wire byte
// can cost a string header, a slice element of two bytes for each bitmap
// bit, or a struct and two allocations.
func rrBytes(rr dns.RR) (own, shared int) {
	v := reflect.ValueOf(rr).Elem()
	own = roundAlloc(int(v.Type().Size()))
	if flat(v.Type()) {
		return own + roundAlloc(dns.Len(rr)), roundAlloc(len(rr.Header().Name))
	}
	o, s := held(v)
	return own + o, s
}

// flatTypes caches flat by record type.
var flatTypes sync.Map // reflect.Type -> bool

// flat reports whether t holds nothing on the heap but strings and slices
// of bytes (such as net.IP).
func flat(t reflect.Type) bool {
	if f, ok := flatTypes.Load(t); ok {
		return f.(bool)
	}
	f := flatType(t, true)
	flatTypes.Store(t, f)
	return f
}

// flatType reports whether t holds nothing on the heap but, with bytes,
// strings and slices of bytes (such as net.IP); without, nothing at all.
func flatType(t reflect.Type, bytes bool) bool {
	switch t.Kind() {
	case reflect.String:
		return bytes
	case reflect.Slice:
		return bytes && t.Elem().Size() == 1 && t.Elem().Kind() != reflect.Struct
	case reflect.Struct:
		for i := range t.NumField() {
			if !flatType(t.Field(i).Type, bytes) {
				return false
			}
		}
		return true
	case reflect.Array:
		return flatType(t.Elem(), bytes)
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return false
	}
	return true // numbers and booleans
}

// held is the heap v refers to beyond its own size: own, the slices'
// arrays and the values behind pointers and interfaces (a copy makes them
// again), and shared, the strings' bytes (a copy shares them).
func held(v reflect.Value) (own, shared int) {
	switch v.Kind() {
	case reflect.String:
		return 0, roundAlloc(v.Len())
	case reflect.Slice:
		if v.IsNil() {
			return 0, 0
		}
		own = roundAlloc(v.Cap() * int(v.Type().Elem().Size()))
		if flatType(v.Type().Elem(), false) {
			return own, 0 // numbers: nothing behind the elements
		}
		for i := range v.Len() {
			o, s := held(v.Index(i))
			own, shared = own+o, shared+s
		}
		return own, shared
	case reflect.Pointer:
		if v.IsNil() {
			return 0, 0
		}
		o, s := held(v.Elem())
		return roundAlloc(int(v.Type().Elem().Size())) + o, s
	case reflect.Interface:
		if v.IsNil() {
			return 0, 0
		}
		return held(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			o, s := held(v.Field(i))
			own, shared = own+o, shared+s
		}
		return own, shared
	case reflect.Array:
		for i := range v.Len() {
			o, s := held(v.Index(i))
			own, shared = own+o, shared+s
		}
		return own, shared
	case reflect.Map:
		// No record type holds one; counted roughly, should one appear.
		own = roundAlloc(v.Len() * 64)
		for it := v.MapRange(); it.Next(); {
			o, s := held(it.Key())
			o2, s2 := held(it.Value())
			own, shared = own+o+o2, shared+s+s2
		}
		return own, shared
	}
	return 0, 0
}

// roundAlloc is n rounded up to the allocator's granularity: 16 bytes
// (small size classes step by 16 up to 256 and by at most 1/8 above, so
// this is within an eighth of the class).
func roundAlloc(n int) int {
	if n == 0 {
		return 0
	}
	n = (n + 15) &^ 15
	return n + n/8
}
