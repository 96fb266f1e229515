package testutil

import (
	"context"
	"net/netip"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/nxdns/nxdns/internal/certs"
)

// NewCA makes a fresh CA for one test; a failure ends the test.
func NewCA(t testing.TB) *certs.CA {
	t.Helper()
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatalf("new CA: %v", err)
	}
	return ca
}

// Handler answers one query. ctx ends when the query's connection or the
// server closes, so a handler that blocks must select on it. A nil answer
// sends nothing (the query stalls).
type Handler func(ctx context.Context, q *dns.Msg) *dns.Msg

// AnswerA answers every query with one A record for its name (TTL 60), which
// makes each response checkable against its question.
func AnswerA(ip string) Handler {
	addr := netip.MustParseAddr(ip)
	return func(_ context.Context, q *dns.Msg) *dns.Msg {
		r := new(dns.Msg)
		r.SetReply(q)
		if len(q.Question) == 1 {
			r.Answer = append(r.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A:   addr.AsSlice(),
			})
		}
		return r
	}
}

// Fault is a misbehaviour a server applies to one query (see FailNext).
type Fault int

const (
	NoFault Fault = iota
	// FaultCloseOnQuery (DoT): read the query, then close the connection
	// without answering — an upstream's idle close racing the query.
	FaultCloseOnQuery
	// FaultPartialLength (DoT): send one byte of the length prefix, then close.
	FaultPartialLength
	// FaultWrongID (DoT, DoH): answer with another message ID.
	FaultWrongID
	// FaultWrongQuestion (DoT, DoH): answer a different name.
	FaultWrongQuestion
	// FaultStatus500 (DoH): answer HTTP 500.
	FaultStatus500
	// FaultContentType (DoH): answer with Content-Type text/plain.
	FaultContentType
	// FaultOversized (DoH): answer a body larger than any DNS message.
	FaultOversized
)

// faults is a FIFO of one-shot faults shared by a server's connections.
type faults struct {
	mu sync.Mutex
	q  []Fault
}

func (f *faults) push(x Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.q = append(f.q, x)
}

func (f *faults) take() Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.q) == 0 {
		return NoFault
	}
	x := f.q[0]
	f.q = f.q[1:]
	return x
}

// mangle applies the answer-level faults shared by DoT and DoH.
func mangle(r *dns.Msg, f Fault) {
	switch f {
	case FaultWrongID:
		r.Id++
	case FaultWrongQuestion:
		if len(r.Question) > 0 {
			r.Question[0].Name = "wrong." + r.Question[0].Name
		}
	default: // the other faults act on the connection, not the answer
	}
}
