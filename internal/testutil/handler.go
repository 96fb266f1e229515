package testutil

import (
	"context"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/fakeup"
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
type Handler = fakeup.AnswerFunc

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

// Fault is a misbehaviour a server applies to one query (see FailNext); the
// faults are fakeup's (internal/fakeup/hooks.go).
type Fault = fakeup.Fault

const (
	NoFault            = fakeup.NoFault
	FaultCloseOnQuery  = fakeup.FaultCloseOnQuery  // DoT: read the query, close without answering
	FaultPartialLength = fakeup.FaultPartialLength // DoT: one byte of the length prefix, then close
	FaultWrongID       = fakeup.FaultWrongID       // answer with another message ID
	FaultWrongQuestion = fakeup.FaultWrongQuestion // answer a different name
	FaultStatus500     = fakeup.FaultStatus500     // DoH: HTTP 500
	FaultContentType   = fakeup.FaultContentType   // DoH: Content-Type text/plain
	FaultOversized     = fakeup.FaultOversized     // DoH: a body larger than any DNS message
)
