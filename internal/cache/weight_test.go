package cache

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/wireform"
)

// answerKind builds the upstream answer for name, as the wire gives it.
type answerKind struct {
	name  string
	build func(name string) *dns.Msg
}

var answerKinds = []answerKind{
	{"A", func(name string) *dns.Msg {
		return reply(name, dns.TypeA, &dns.A{Hdr: hdr(name, dns.TypeA), A: net.IPv4(192, 0, 2, 1)})
	}},
	{"TXT-60KB", func(name string) *dns.Msg { // 240 strings of 250 bytes
		return reply(name, dns.TypeTXT, &dns.TXT{Hdr: hdr(name, dns.TypeTXT), Txt: repeat(strings.Repeat("v", 250), 240)})
	}},
	{"TXT-60KB-empty-strings", func(name string) *dns.Msg { // the parse's worst case: a string header per wire byte
		return reply(name, dns.TypeTXT, &dns.TXT{Hdr: hdr(name, dns.TypeTXT), Txt: repeat("", 60000)})
	}},
	{"HTTPS-60KB-alpn", func(name string) *dns.Msg { // 30 000 one-byte protocol ids
		r := &dns.HTTPS{SVCB: dns.SVCB{Hdr: hdr(name, dns.TypeHTTPS), Priority: 1, Target: ".",
			Value: []dns.SVCBKeyValue{&dns.SVCBAlpn{Alpn: repeat("h", 30000)}}}}
		return reply(name, dns.TypeHTTPS, r)
	}},
	{"A-4000", func(name string) *dns.Msg {
		rrs := make([]dns.RR, 4000)
		for i := range rrs {
			rrs[i] = &dns.A{Hdr: hdr(name, dns.TypeA), A: net.IPv4(10, byte(i>>8), byte(i), 1)}
		}
		return reply(name, dns.TypeA, rrs...)
	}},
}

// answerKindsOtherTypes are large answers of the types whose rdata parses
// into many small values besides TXT and HTTPS: each costs many times its
// wire length parsed, and a weight of struct plus wire length would
// under-count it.
var answerKindsOtherTypes = []answerKind{
	{"NINFO-60KB-empty-strings", func(name string) *dns.Msg { // TXT's parse under another type
		return reply(name, dns.TypeNINFO, &dns.NINFO{Hdr: hdr(name, dns.TypeNINFO), ZSData: repeat("", 60000)})
	}},
	{"NSEC-700-full-windows", func(name string) *dns.Msg { // 2 bytes parsed for each bitmap bit
		types := make([]uint16, 0, 255)
		for t := 1; t <= 255; t++ {
			types = append(types, uint16(t))
		}
		rrs := make([]dns.RR, 700)
		for i := range rrs {
			rrs[i] = &dns.NSEC{Hdr: hdr(name, dns.TypeNSEC), NextDomain: fmt.Sprintf("n%d.%s", i, name), TypeBitMap: types}
		}
		return reply(name, dns.TypeNSEC, rrs...)
	}},
	{"APL-16000-empty-prefixes", func(name string) *dns.Msg { // 4 wire bytes, two slices and a struct parsed
		ps := make([]dns.APLPrefix, 16000)
		for i := range ps {
			ps[i] = dns.APLPrefix{Network: net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}}
		}
		return reply(name, dns.TypeAPL, &dns.APL{Hdr: hdr(name, dns.TypeAPL), Prefixes: ps})
	}},
	{"HIP-root-servers", func(name string) *dns.Msg { // a string header per one-byte name
		return reply(name, dns.TypeHIP, &dns.HIP{Hdr: hdr(name, dns.TypeHIP), HitLength: 1, Hit: "01",
			PublicKeyAlgorithm: 2, PublicKeyLength: 3, PublicKey: "AQID", RendezvousServers: repeat(".", 3000)})
	}},
}

func hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 3600}
}

func repeat(s string, n int) []string {
	ss := make([]string, n)
	for i := range ss {
		ss[i] = s
	}
	return ss
}

// reply is an answer as the pool returns it: packed and parsed again, so
// its records hold their own memory, as an upstream's do.
func reply(name string, t uint16, rrs ...dns.RR) *dns.Msg {
	m := new(dns.Msg).SetQuestion(name, t)
	m.Response = true
	m.Answer = rrs
	m.Compress = true
	wire, err := m.Pack()
	if err != nil {
		panic(err)
	}
	var out dns.Msg
	if err := out.Unpack(wire); err != nil {
		panic(err)
	}
	return &out
}

// fillStore stores n answers of kind under distinct names, in a store whose
// budget is budget, and, with used, gives each entry everything it may
// hold: the view a hit renders, the stale rendering and a template per
// query shape. It returns the heap the store holds afterwards (measured
// after a collection, against before) and the store.
func fillStore(tb testing.TB, kind answerKind, n int, budget int64, used bool) (heap int64, st *store) {
	lim := limits{max: 86400}
	now := time.Now()
	// Packed before the measurement starts and held until it ends; each is
	// parsed in the loop, as the pool parses an upstream's answer, and the
	// parse is garbage once prepared (prepare copies what it keeps).
	wires := make([][]byte, n)
	for i := range wires {
		w, err := kind.build(fmt.Sprintf("n%d.example.", i)).Pack()
		if err != nil {
			tb.Fatal(err)
		}
		wires[i] = w
	}
	heap0 := heapInUse()
	st = newStore(n, budget)
	for _, w := range wires {
		resp := new(dns.Msg)
		if err := resp.Unpack(w); err != nil {
			tb.Fatal(err)
		}
		k := keyOf(resp)
		e := prepare(resp, k, lim, now, "tls://192.0.2.53:853", query.SourcePool)
		if e == nil {
			tb.Fatalf("%s: not cacheable", kind.name)
		}
		if !st.put(k, e) {
			continue
		}
		if used {
			ns := now.UnixNano()
			v := e.renderView(ns)
			e.renderStale()
			udp := v.msg.Copy()
			udp.Truncate(1232)
			wire, err := udp.Pack()
			if err != nil {
				tb.Fatal(err)
			}
			tpl, ok := wireform.NewTemplate(wire)
			if !ok {
				tb.Fatalf("%s: no template", kind.name)
			}
			for shape := range uint8(maxShapes) {
				e.keep(shape, tpl, 0)
			}
		}
	}
	st.c.CleanUp()
	heap = heapInUse() - heap0
	runtime.KeepAlive(wires)
	return heap, st
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// BenchmarkEntryBytes measures the heap one cached entry holds, stored only
// and at its largest (rendered fresh and stale, with a template per query
// shape), beside the weight the store charges for it; the ratio
// weight/used is how far the byte budget over-counts an entry in use.
// docs/cache.md "Memory" quotes it.
func BenchmarkEntryBytes(b *testing.B) {
	for _, kind := range answerKinds {
		b.Run(kind.name, func(b *testing.B) {
			n := 100
			if kind.name == "A" {
				n = 20000
			}
			for b.Loop() {
			}
			stored, st := fillStore(b, kind, n, 1<<40, false)
			var weight int64
			st.each(func(_ key, e *entry) { weight += int64(e.weight) })
			held := st.len()
			st.close()
			used, st := fillStore(b, kind, n, 1<<40, true)
			st.close()
			b.ReportMetric(float64(stored)/float64(held), "stored-B/entry")
			b.ReportMetric(float64(used)/float64(held), "used-B/entry")
			b.ReportMetric(float64(weight)/float64(held), "weight-B/entry")
			b.ReportMetric(float64(weight)/float64(used), "weight/used")
		})
	}
}

// TestStore_60KBAnswersStayInsideTheByteBudget: a store with room for 600
// entries and 16 MiB, filled with 600 names of 60 KB TXT answers, each entry
// at its largest, holds no more than its budget of heap (with an eighth for
// the allocator's rounding), where bounded by entries alone it would hold
// every one of them, over 80 MB.
func TestStore_60KBAnswersStayInsideTheByteBudget(t *testing.T) {
	const budget = 16 << 20
	heap, st := fillStore(t, answerKinds[1], 600, budget, true)
	defer st.close()
	if w := st.bytes(); w > budget {
		t.Errorf("weight held %d, over the budget %d", w, budget)
	}
	if heap > budget+budget/8 {
		t.Errorf("the store holds %d bytes of heap (%d entries), over its budget of %d", heap, st.len(), budget)
	}
	if st.len() == 0 || st.len() > budget/(60<<10) {
		t.Errorf("%d entries held: want some, and fewer than %d", st.len(), budget/(60<<10))
	}
	t.Logf("%d entries, %d bytes of heap, weight %d", st.len(), heap, st.bytes())
}

// TestWeigh_neverBelowTheHeapAnEntryHolds: for every kind of answer, the
// ordinary ones and those built to be expensive to parse, of any record
// type, an entry's weight is at least the heap it holds at its largest
// (rendered fresh and stale, a template per query shape). A weight below
// it is a byte budget that does not bound: an answer of seven NSEC records
// with full type bitmaps is 61 KB on the wire and megabytes parsed.
func TestWeigh_neverBelowTheHeapAnEntryHolds(t *testing.T) {
	for _, kind := range slices.Concat(answerKinds, answerKindsOtherTypes) {
		t.Run(kind.name, func(t *testing.T) {
			n := 20
			if kind.name == "A" {
				n = 2000
			}
			used, st := fillStore(t, kind, n, 1<<40, true)
			defer st.close()
			var weight int64
			st.each(func(_ key, e *entry) { weight += int64(e.weight) })
			if st.len() != n {
				t.Fatalf("%d of %d entries held", st.len(), n)
			}
			t.Logf("per entry: weight %d, heap held %d", weight/int64(n), used/int64(n))
			if weight < used {
				t.Errorf("weight %d per entry, below the %d bytes of heap it holds", weight/int64(n), used/int64(n))
			}
		})
	}
}

// TestStore_oversizedAnswerServedNotStored: an answer heavier than an
// entry's share of the budget (4 000 A records, megabytes parsed) is not
// stored and is counted; a small one beside it is stored.
func TestStore_oversizedAnswerServedNotStored(t *testing.T) {
	st := newStore(10000, DefaultMaxBytes)
	defer st.close()
	big := answerKinds[4].build("big.example.")
	e := prepare(big, keyOf(big), limits{max: 86400}, time.Now(), "", query.SourcePool)
	if st.put(keyOf(big), e) || st.oversized.Load() != 1 {
		t.Fatalf("a %d-byte entry stored (share %d), oversized %d", weigh(e), st.maxEntryWeight(), st.oversized.Load())
	}
	small := answerKinds[0].build("small.example.")
	if !st.put(keyOf(small), prepare(small, keyOf(small), limits{max: 86400}, time.Now(), "", query.SourcePool)) {
		t.Fatal("a small answer not stored")
	}
}

// BenchmarkStoreRSS fills a store of the default budget with 2 000 names of
// 60 KB TXT answers at their largest and reports the process's resident
// memory beside the heap the store holds, after a collection that returns
// the filling's garbage to the system: the budget bounds the heap, and the
// resident set is that heap and what the allocator keeps around it.
func BenchmarkStoreRSS(b *testing.B) {
	for b.Loop() {
	}
	rss0 := residentBytes(b)
	heap, st := fillStore(b, answerKinds[1], 2000, DefaultMaxBytes, true)
	defer st.close()
	debug.FreeOSMemory() // the answers' wire forms, held while filling, are garbage now
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(residentBytes(b)-rss0)/(1<<20), "RSS-growth-MiB")
	b.ReportMetric(float64(DefaultMaxBytes)/(1<<20), "budget-MiB")
	b.ReportMetric(float64(st.len()), "entries")
}

// residentBytes is the process's VmRSS.
func residentBytes(tb testing.TB) int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skip("no /proc/self/status:", err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}
