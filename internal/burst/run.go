package burst

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/sleep"
)

// prefixLen is the length of the random per-run label prefix: 50 bits of
// base32, so two runs never share a name and no cache answers for them.
const prefixLen = 10

// resolveTimeout bounds the one lookup of a target given by name.
const resolveTimeout = 5 * time.Second

// Run validates cfg, measures the baseline, runs the burst (or the fixed
// rate) and returns the report. It returns an error only when the run could
// not happen or was interrupted (ctx ended); queries that failed are counted
// in the report, not returned.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	addr, err := resolveTarget(ctx, cfg.Target)
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, addr: addr, prefix: runPrefix(), network: "udp"}
	if cfg.TCP || cfg.Proto == "tcp" {
		r.network = "tcp"
	}
	// One bound over the whole run, from the worst case Validate accepted,
	// plus a margin for scheduling: no path can outlive it.
	ctx, cancel := context.WithTimeout(ctx, cfg.worstCase()+time.Minute)
	defer cancel()
	if cfg.Proto == ProtoDoT || cfg.Proto == ProtoDoQ {
		if r.sess, err = dialSession(ctx, cfg, addr); err != nil {
			return nil, err
		}
		defer r.sess.close()
	}

	base := r.baseline(ctx)
	begin := time.Now()
	var results []result
	var firstWave time.Duration
	if cfg.Rate > 0 {
		results = r.fixedRate(ctx)
	} else {
		results, firstWave = r.waves(ctx)
	}
	wall := time.Since(begin)
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("run interrupted: %w", err)
	}
	return summarize(results, base, wall, firstWave), nil
}

// resolveTarget turns host:port into an address once, before any timing, so
// a name lookup never counts as query latency.
func resolveTarget(ctx context.Context, target string) (string, error) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return "", err
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(ip, mustPort(port)).String(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return "", fmt.Errorf("target %s: %w", host, err)
	}
	return netip.AddrPortFrom(ips[0].Unmap(), mustPort(port)).String(), nil
}

func mustPort(s string) uint16 {
	p, _ := strconv.ParseUint(s, 10, 16) // Validate checked it
	return uint16(p)
}

func runPrefix() string { return strings.ToLower(rand.Text()[:prefixLen]) }

type runner struct {
	cfg     Config
	addr    string
	network string
	prefix  string
	sess    session // the shared connection of -proto dot and doq; nil for UDP and TCP
}

func (r *runner) name(label string) string {
	return r.prefix + "-" + label + "." + dns.Fqdn(r.cfg.Suffix)
}

// label is the i-th query's label: i itself, or i modulo cfg.Distinct so
// that the names repeat.
func (r *runner) label(i int) string {
	if r.cfg.Distinct > 0 {
		i %= r.cfg.Distinct
	}
	return strconv.Itoa(i)
}

// one sends one query for name under the per-query timeout.
func (r *runner) one(ctx context.Context, name string) result {
	q := new(dns.Msg)
	q.SetQuestion(name, r.cfg.Type)
	q.SetEdns0(ednsSize, false)
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	if r.sess != nil {
		return exchange(ctx, r.sess.exchange, q)
	}
	return exchange(ctx, func(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
		return roundTrip(ctx, r.network, r.addr, q)
	}, q)
}

// baseline sends cfg.Baseline queries one after another on the idle target:
// the single-query latency the burst is measured against.
func (r *runner) baseline(ctx context.Context) []result {
	out := make([]result, 0, r.cfg.Baseline)
	for i := range r.cfg.Baseline {
		if ctx.Err() != nil {
			break
		}
		out = append(out, r.one(ctx, r.name("base"+strconv.Itoa(i))))
	}
	return out
}

// waves sends cfg.Waves bursts of cfg.N concurrent queries, cfg.WaveGap
// apart, and returns every result and the first wave's wall time.
func (r *runner) waves(ctx context.Context) ([]result, time.Duration) {
	all := make([]result, 0, r.cfg.N*r.cfg.Waves)
	var first time.Duration
	for w := range r.cfg.Waves {
		if w > 0 && !sleep.For(ctx, r.cfg.WaveGap) {
			break
		}
		res, wall := r.wave(ctx, w*r.cfg.N)
		if w == 0 {
			first = wall
		}
		all = append(all, res...)
		if ctx.Err() != nil {
			break
		}
	}
	return all, first
}

// wave starts cfg.N queries together: every goroutine waits at one gate,
// so the first query does not get a head start of the others' start-up.
func (r *runner) wave(ctx context.Context, firstIndex int) ([]result, time.Duration) {
	res := make([]result, r.cfg.N)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range r.cfg.N {
		name := r.name(r.label(firstIndex + i))
		wg.Go(func() {
			<-gate
			res[i] = r.one(ctx, name)
		})
	}
	begin := time.Now()
	close(gate)
	wg.Wait()
	return res, time.Since(begin)
}

// fixedRate sends rate × duration queries on a fixed schedule, at most
// maxInFlight outstanding; when that many are out the schedule waits.
func (r *runner) fixedRate(ctx context.Context) []result {
	total := r.cfg.rateQueries()
	interval := time.Duration(float64(time.Second) / r.cfg.Rate)
	res := make([]result, 0, total)
	var mu sync.Mutex // guards res
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	begin := time.Now()
schedule:
	for i := range total {
		if !sleep.For(ctx, time.Until(begin.Add(time.Duration(i)*interval))) {
			break
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			break schedule
		}
		name := r.name(r.label(i))
		wg.Go(func() {
			defer func() { <-slots }()
			one := r.one(ctx, name)
			mu.Lock()
			res = append(res, one)
			mu.Unlock()
		})
	}
	wg.Wait()
	return res
}
