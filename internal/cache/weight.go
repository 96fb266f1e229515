package cache

import (
	"reflect"

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
// HTTPS record's parameters cost an interface and an allocation each). So
// the types whose rdata parses into many small values are counted value by
// value, and every other type by its struct plus its wire length, which
// bounds the bytes its names and slices hold. BenchmarkEntryBytes checks the
// weights against the heap an entry really holds.

// Fixed costs, from the structs they stand for and otter's node.
var (
	// entryOverhead is the entry, the view and wireSet headers, the parsed
	// message's struct and question, and otter's node for the key.
	entryOverhead = int(reflect.TypeFor[entry]().Size()) + 2*int(reflect.TypeFor[dns.Msg]().Size()) + int(reflect.TypeFor[view]().Size()) + 160
	// ifaceBytes is one element of a []dns.RR or []dns.SVCBKeyValue.
	ifaceBytes = 16
	// stringBytes is one element of a []string.
	stringBytes = int(reflect.TypeFor[string]().Size())
	// svcbValueBytes is one SVCB parameter's own allocation.
	svcbValueBytes = 48
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
	m := e.msg
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
func rrBytes(rr dns.RR) (own, shared int) {
	own = roundAlloc(int(reflect.TypeOf(rr).Elem().Size()))
	shared = roundAlloc(len(rr.Header().Name))
	switch v := rr.(type) {
	case *dns.TXT:
		o, s := stringsBytes(v.Txt)
		return own + o, shared + s
	case *dns.SPF:
		o, s := stringsBytes(v.Txt)
		return own + o, shared + s
	case *dns.SVCB:
		return own + svcbBytes(v.Value), shared + roundAlloc(len(v.Target))
	case *dns.HTTPS:
		return own + svcbBytes(v.Value), shared + roundAlloc(len(v.Target))
	}
	// Every other type: its names and byte slices are within its wire
	// length, counted as copied (a copy clones its byte slices).
	return own + roundAlloc(dns.Len(rr)), shared
}

// stringsBytes is a []string: the slice (copied by a rendering) and the
// strings' bytes (shared).
func stringsBytes(ss []string) (own, shared int) {
	for _, s := range ss {
		shared += roundAlloc(len(s))
	}
	return roundAlloc(len(ss) * stringBytes), shared
}

// svcbBytes is an SVCB or HTTPS record's parameters, all deep-copied by a
// rendering.
func svcbBytes(vals []dns.SVCBKeyValue) int {
	n := roundAlloc(len(vals) * ifaceBytes)
	for _, kv := range vals {
		n += svcbValueBytes
		switch v := kv.(type) {
		case *dns.SVCBAlpn:
			o, s := stringsBytes(v.Alpn)
			n += o + s
		case *dns.SVCBIPv4Hint:
			n += roundAlloc(len(v.Hint)*24) + len(v.Hint)*16
		case *dns.SVCBIPv6Hint:
			n += roundAlloc(len(v.Hint)*24) + len(v.Hint)*16
		case *dns.SVCBMandatory:
			n += roundAlloc(len(v.Code) * 2)
		case *dns.SVCBECHConfig:
			n += roundAlloc(len(v.ECH))
		case *dns.SVCBLocal:
			n += roundAlloc(len(v.Data))
		case *dns.SVCBDoHPath:
			n += roundAlloc(len(v.Template))
		}
	}
	return n
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
