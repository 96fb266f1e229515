package app

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/clock"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/dnssec"
	"github.com/nxdns/nxdns/internal/safefile"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/web"
)

// DNSSEC validation (docs/dnssec.md): each generation builds a validator
// over its own routes and wraps the pool, and the forward zones with
// validate = true, in a dnssec.Guard; the verdict counts are the App's,
// across reloads.

// plausibleTime: a system clock before it has not been set, whatever the
// time service says (a Pi without one boots at its last shutdown or in
// 1970); enforce waits for both.
var plausibleTime = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// clockSet reports whether enforce may act: the clock is not known to be
// unsynchronized, and it reads a plausible time.
func (a *App) clockSet() bool {
	return a.clock.Current().State != clock.Unsynchronized && time.Now().After(plausibleTime)
}

// attachDNSSEC builds g's validator and wraps its resolvers, unless
// [dnssec] mode is off. A change of mode empties the cache: its entries
// carry the AD bit of the mode they were stored under (an upstream's in
// off, nxdns's own otherwise), and a bogus answer stored in shadow must not
// outlive the change to enforce.
func (a *App) attachDNSSEC(g *generation) error {
	c := g.cfg.DNSSEC
	last := a.dnssecMode
	if last == "" { // the start: the cache file's entries are the last run's
		last = cacheFileMode(g.cfg.DNS.CacheFile, c.Mode)
	}
	marker := c.Mode
	if last != c.Mode {
		if a.cache != nil {
			a.cache.Flush(".")
		}
		if !a.dropCacheFile(g.cfg.DNS.CacheFile) {
			marker = "unknown"
		}
	}
	a.dnssecMode = c.Mode
	a.markCacheFileMode(g.cfg.DNS.CacheFile, marker)
	if c.Mode == config.DNSSECOff {
		return nil
	}
	v, err := dnssec.New(dnssec.Config{
		Anchors: c.Anchors,
		Fetch:   g.fetchDNSSEC,
		Skew:    time.Duration(c.ClockSkew) * time.Second,
		NTAs:    c.NegativeTrustAnchors,
		// The dashboard's, with their end times (internal/filter nta.go).
		ExtraNTA: a.filter.NTAActive,
	})
	if err != nil {
		return err
	}
	g.validator = dnssec.NewGuard(v, dnssec.Mode(c.Mode), a.clockSet, a.log.Named("dnssec"), &a.dnssec, g.drainBound()-drainMargin).
		WithClockConfirmed(func() bool { return a.clock.Current().State == clock.Synchronized })
	g.validating = map[server.Resolver]server.Resolver{g.pool: g.validator.Wrap(g.pool)}
	// A group's own pool is validated like the main pool; the validator's
	// DS and DNSKEY fetches go through the main pool (public data).
	for _, gp := range g.groups {
		g.validating[gp.pool] = g.validator.Wrap(gp.pool)
	}
	for _, z := range g.cfg.ForwardZones {
		res, source := g.resolverIn(z.FQDN(), "")
		switch {
		case source == "pool":
		case z.Validates():
			g.validating[res] = g.validator.Wrap(res)
		default: // its AD bit is the router's word, not a validation
			g.validating[res] = g.validator.Unvalidated(res)
		}
	}
	return nil
}

// modeMarkerSuffix names the file beside dns.cache_file that says under
// which [dnssec] mode its entries were stored, so a restart with another
// mode does not serve them (attachDNSSEC).
const modeMarkerSuffix = ".dnssec-mode"

// cacheFileMode is the mode the cache file's entries were stored under:
// current without a cache file (nothing was loaded), "unknown" when the
// marker cannot be read (the entries are dropped).
func cacheFileMode(cacheFile, current string) string {
	if cacheFile == "" {
		return current
	}
	b, err := safefile.ReadFile(cacheFile+modeMarkerSuffix, 64)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// dropCacheFile deletes the cache file after the cache was emptied for
// DNSSEC's sake: the file is next written minutes later, and until then it
// holds the entries just dropped, which a crash would hand to the next
// start under the current marker. It reports false when the file is still
// there (the caller marks it "unknown", so the next start drops it).
func (a *App) dropCacheFile(cacheFile string) bool {
	if cacheFile == "" {
		return true
	}
	if err := os.Remove(cacheFile); err != nil && !os.IsNotExist(err) {
		a.log.Warn("could not remove the cache file after emptying the cache for DNSSEC; the next start empties the cache", zap.Error(err))
		return false
	}
	return true
}

func (a *App) markCacheFileMode(cacheFile, mode string) {
	if cacheFile == "" {
		return
	}
	if err := os.WriteFile(cacheFile+modeMarkerSuffix, []byte(mode+"\n"), 0o600); err != nil {
		a.log.Warn("could not record the DNSSEC mode beside the cache file; the next start empties the cache", zap.Error(err))
	}
}

// dnssecClockChanged empties the cache when enforce begins with the clock
// set: answers stored while it behaved as shadow may be bogus.
func (a *App) dnssecClockChanged(now clock.Reading) {
	g := a.gen.Load()
	if now.State == clock.Synchronized && g != nil && g.validator != nil && g.validator.Enforcing() {
		n := a.cache.Flush(".")
		if !a.dropCacheFile(g.cfg.DNS.CacheFile) {
			a.markCacheFileMode(g.cfg.DNS.CacheFile, "unknown")
		}
		a.log.Info("DNSSEC enforce mode active: the system clock is set", zap.Int("cache_entries_dropped", n))
	}
}

// fetchDNSSEC is the validator's Fetch: name and qtype asked of the
// resolver that answers name, with DO and CD set, with the query's own
// context (and so its deadline and its client's share of the pool).
func (g *generation) fetchDNSSEC(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	route := name
	if qtype == dns.TypeDS && name != "." {
		// A DS set lives in the parent zone (RFC 4035 §3.1.4.1): a forward
		// zone's own server, authoritative for the child alone, answers
		// it from the child's side.
		if i, end := dns.NextLabel(name, 0); !end {
			route = name[i:]
		} else {
			route = "."
		}
	}
	res, _ := g.resolverIn(route, "")
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.CheckingDisabled = true
	q.SetEdns0(1232, true)
	out, err := res.Exchange(ctx, q)
	return out.Msg, err
}

// dnssecHealth is /api/health's dnssec condition.
func (a *App) dnssecHealth() web.DNSSECHealth {
	g := a.gen.Load()
	h := web.DNSSECHealth{Mode: g.cfg.DNSSEC.Mode, Bogus: a.dnssec.Snapshot().Bogus}
	if g.validator != nil {
		h.Enforcing = g.validator.Enforcing()
		h.WaitingForClock = g.cfg.DNSSEC.Mode == config.DNSSECEnforce && !h.Enforcing
	}
	return h
}

// dnssecRoutes adds GET /api/dnssec/bogus: the last bogus verdicts, newest
// last, for the dashboard's list of what shadow would have refused (names
// the household asks: private).
func (a *App) dnssecRoutes(s *web.Server) {
	s.Handle("GET /api/dnssec/bogus", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a.dnssec.Snapshot().Recent)
	}), web.Private)
}
