package web

import (
	"net/netip"
	"sync"
	"time"
)

// loginLimiter bounds password guesses: each client (an IPv4 address or an
// IPv6 /64, query.ClientShareKey, as the connection caps count) has a bucket
// of loginBurst attempts refilled at one per loginRefill, and all clients
// together share one more bucket, so that neither one host nor a spread of
// addresses can try more than a few passwords a minute — and bcrypt, which
// costs a Pi a quarter second per try, never eats the CPU DNS needs.
//
// Guarantee: between two refills, at most loginBurst attempts from one
// client and at most globalBurst from all clients reach the password
// check. A host picks any address of its /64 at will (RFC 8981), so a
// bucket per IPv6 address let one host spend the shared bucket alone and
// lock every other client out of the login.
type loginLimiter struct {
	now func() time.Time

	mu      sync.Mutex // guards the fields below
	clients map[netip.Prefix]*bucket
	global  bucket
}

const (
	loginBurst   = 5
	loginRefill  = 12 * time.Second // 5 a minute per address
	globalBurst  = 20
	globalRefill = 3 * time.Second // 20 a minute in all
	// maxLimited bounds the per-address table; when full, idle buckets
	// (full again) are dropped, and if none is idle the attempt is refused.
	maxLimited = 1024
)

type bucket struct {
	tokens float64
	at     time.Time
}

// take refills b for the time since its last use and takes one token.
func (b *bucket) take(now time.Time, burst int, refill time.Duration) bool {
	if b.at.IsZero() {
		b.tokens, b.at = float64(burst), now
	}
	b.tokens = min(float64(burst), b.tokens+float64(now.Sub(b.at))/float64(refill))
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{now: time.Now, clients: map[netip.Prefix]*bucket{}}
}

// allow reports whether client may try a password now.
func (l *loginLimiter) allow(client netip.Prefix) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.clients[client]
	if b == nil {
		if len(l.clients) >= maxLimited {
			for a, old := range l.clients {
				if now.Sub(old.at) >= loginBurst*loginRefill {
					delete(l.clients, a)
				}
			}
			if len(l.clients) >= maxLimited {
				return false
			}
		}
		b = &bucket{}
		l.clients[client] = b
	}
	if !b.take(now, loginBurst, loginRefill) {
		return false
	}
	return l.global.take(now, globalBurst, globalRefill)
}
