package vmtests

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/burst"
)

// TestCache_60KBAnswersStayInsideTheByteBudget: the real binary with
// dns.cache_max_bytes = 16 MiB and the default 10 000 entries; 600 unique
// names whose TXT answers are about 60 KB each (fakeup txt=60000), asked
// over TCP. The cache's weight stays within its budget and it holds far
// fewer than 600 of them; bounded by entries alone it held every one (each
// about 140 KB parsed and rendered, docs/cache.md "Memory"). The process's
// resident memory is logged, not asserted: the cache's benchmarks measure
// the memory an entry holds.
func TestCache_60KBAnswersStayInsideTheByteBudget(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0?txt=60000")
	const budget = 16 << 20
	p := startNxdns(t, ca, settings{dns: fmt.Sprintf("cache_max_bytes = %d\n", budget)}, up)
	rss0 := p.rssBytes(t)
	r := p.burst(t, func(c *burst.Config) {
		c.N, c.Waves, c.Baseline, c.TCP, c.Type = 20, 30, 0, true, dns.TypeTXT // 20 connections: within one client's TCP share
		c.Suffix = "big.test."
	})
	m := p.metrics(t)
	bytes, entries := metric(m, "nxdns_cache_bytes"), metric(m, "nxdns_cache_entries")
	t.Logf("%d TXT queries (%v NOERROR): cache %v entries, %v bytes of weight (budget %d), %v oversized; RSS %d → %d MiB",
		r.Queries, r.Rcodes["NOERROR"], entries, bytes, budget, metric(m, "nxdns_cache_oversized_total"),
		rss0>>20, p.rssBytes(t)>>20)
	if r.Rcodes["NOERROR"] < r.Queries*9/10 {
		t.Fatalf("only %d of %d TXT queries answered", r.Rcodes["NOERROR"], r.Queries)
	}
	if bytes > budget || bytes <= 0 {
		t.Errorf("cache weight %v, want within (0, %d]", bytes, budget)
	}
	if entries >= 600 || entries > budget/(60<<10) {
		t.Errorf("%v entries of 60 KB answers held under a %d-byte budget", entries, budget)
	}
}
