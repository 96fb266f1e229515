package app

import (
	"context"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/forward"
	"github.com/nxdns/nxdns/internal/upstream"
)

// ProbeResult is one upstream's answer to `nxdns check --probe`.
type ProbeResult struct {
	Zone    string // the forward zone (FQDN) whose resolver URL is; "" for an upstream
	URL     string // redacted
	Latency time.Duration
	Err     error
}

// Probe sends one query (". NS") to each enabled upstream and each
// group's own (pools.go) once, then one (the
// zone's SOA) to each forward zone's resolver, each through a
// single-slot pool of its own, never through a serving pool: an operator's
// check must not take a slot from live queries or touch their health. The
// probes run one after another so each latency is the upstream's own.
func Probe(ctx context.Context, cfg config.Config) []ProbeResult {
	var results []ProbeResult
	for _, u := range probedUpstreams(cfg) {
		one := cfg
		one.Upstreams = []config.UpstreamURL{u}
		r := ProbeResult{URL: upstream.RedactString(u.URL)}
		pool, err := buildPool(one, zap.NewNop(), 1, nil)
		if err != nil {
			r.Err = err
			results = append(results, r)
			continue
		}
		q := new(dns.Msg)
		q.SetQuestion(".", dns.TypeNS)
		start := time.Now()
		resp, _, err := pool.Resolve(ctx, q)
		r.Latency = time.Since(start)
		switch {
		case err != nil:
			r.Err = err
		case resp.Rcode != dns.RcodeSuccess:
			r.Err = rcodeError(resp.Rcode)
		}
		pool.Close()
		results = append(results, r)
	}
	return append(results, probeZones(ctx, cfg)...)
}

// probedUpstreams are the enabled upstreams, then those groups name that
// are not among them (by URL).
func probedUpstreams(cfg config.Config) []config.UpstreamURL {
	ups := cfg.EnabledUpstreams()
	seen := map[string]bool{}
	for _, u := range ups {
		seen[u.URL] = true
	}
	for _, g := range cfg.PooledGroups() {
		for _, u := range cfg.GroupUpstreams(g) {
			if !seen[u.URL] {
				seen[u.URL] = true
				ups = append(ups, u)
			}
		}
	}
	return ups
}

// probeZones asks each forward zone's resolver for its zone's SOA through a
// table of its own (the probe the server runs in the background, docs/design.md#pool-probes),
// one after another.
func probeZones(ctx context.Context, cfg config.Config) []ProbeResult {
	tab, err := forward.NewTable(cfg.ForwardZones, cfg.Upstream.Read())
	if err != nil { // validated already; report rather than hide it
		return []ProbeResult{{Zone: "forward_zones", Err: err}}
	}
	defer tab.Close() // an encrypted resolver's connection
	var results []ProbeResult
	for _, z := range tab.Zones() {
		start := time.Now()
		err := z.Probe(ctx)
		results = append(results, ProbeResult{Zone: z.Name(), URL: z.URL(), Latency: time.Since(start), Err: err})
	}
	return results
}

type rcodeError int

func (r rcodeError) Error() string { return "answered " + dns.RcodeToString[int(r)] }
