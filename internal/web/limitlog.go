package web

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Counters are the web endpoint's counts for /metrics. One set is shared by
// the endpoints a reload replaces (ShareCounters), so a counter does not
// restart when web.listen changes.
type Counters struct {
	LoginRateLimited atomic.Uint64 // attempts refused by the rate limit
	LoginEpisodes    atomic.Uint64 // episodes of rate limiting started
}

// ShareCounters makes s count into c instead of its own. Call it before
// Start.
func (s *Server) ShareCounters(c *Counters) { s.limited.counters = c }

// limitEpisodes logs login rate limiting once per episode rather than once
// per refused attempt (docs/dashboard.md, "The login"): a client hammering
// the login made thousands of lines a second, enough for journald's rate
// limit to drop every other line nxdns and the system wrote. An episode of
// a client starts with its first refused attempt (one warning) and ends
// once none has been refused for limitQuiet (one line with the count).
//
// Guarantees: at most two lines per episode; at most maxLimited clients in
// an episode at once — beyond that, refusals are counted in the metric
// only; Close logs the end of every episode still open.
type limitEpisodes struct {
	log      *zap.Logger
	quiet    time.Duration // a field so tests can shorten it
	counters *Counters

	mu      sync.Mutex // guards open and closed
	open    map[netip.Prefix]*episode
	closed  bool
	overrun bool // a refusal found the table full (logged once per overrun)
}

// limitQuiet ends an episode: a minute without a refused attempt, by when
// the client's bucket holds all loginBurst attempts again.
const limitQuiet = loginBurst * loginRefill

type episode struct {
	start, last time.Time
	refused     uint64
	timer       *time.Timer
	ended       bool
}

func newLimitEpisodes(log *zap.Logger) *limitEpisodes {
	return &limitEpisodes{log: log, quiet: limitQuiet, counters: &Counters{}, open: map[netip.Prefix]*episode{}}
}

// refused notes one attempt from client (query.ClientShareKey) the rate
// limit refused.
func (l *limitEpisodes) refused(client netip.Prefix) {
	l.counters.LoginRateLimited.Add(1)
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if e := l.open[client]; e != nil {
		e.refused++
		e.last = now
		e.timer.Reset(l.quiet)
		return
	}
	if len(l.open) >= maxLimited {
		if !l.overrun {
			l.overrun = true
			l.log.Warn("login attempts rate-limited from more addresses than are logged one by one; counted in nxdns_web_login_rate_limited_total",
				zap.Int("addresses", len(l.open)))
		}
		return
	}
	l.overrun = false
	e := &episode{start: now, last: now, refused: 1}
	e.timer = time.AfterFunc(l.quiet, func() { l.end(client, e) })
	l.open[client] = e
	l.counters.LoginEpisodes.Add(1)
	l.log.Warn("login attempts rate-limited: further attempts from this client are refused unchecked until it slows down; one line when it ends",
		zap.String("client", shareName(client)))
}

// end closes e once no attempt was refused for l.quiet. A refusal that
// re-armed the timer while it fired leaves e open for the next firing.
func (l *limitEpisodes) end(client netip.Prefix, e *episode) {
	l.mu.Lock()
	if e.ended || l.closed || time.Since(e.last) < l.quiet {
		l.mu.Unlock()
		return
	}
	e.ended = true
	delete(l.open, client)
	l.mu.Unlock()
	l.logEnd(client, e)
}

func (l *limitEpisodes) logEnd(client netip.Prefix, e *episode) {
	l.log.Info("login rate limiting ended", zap.String("client", shareName(client)),
		zap.Uint64("refused", e.refused), zap.Duration("lasted", e.last.Sub(e.start).Round(time.Second)))
}

// close stops the timers and logs the end of every open episode.
func (l *limitEpisodes) close() {
	l.mu.Lock()
	l.closed = true
	open := l.open
	l.open = map[netip.Prefix]*episode{}
	for _, e := range open {
		e.timer.Stop()
		e.ended = true
	}
	l.mu.Unlock()
	for client, e := range open {
		l.logEnd(client, e)
	}
}

// shareName is how the log names a client share: the address of an IPv4
// one, the prefix of an IPv6 /64.
func shareName(p netip.Prefix) string {
	if p.Addr().Is4() {
		return p.Addr().String()
	}
	return p.String()
}
