package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/upstream"
	"github.com/nxdns/nxdns/internal/wireform"
)

// base is the skeleton of every answer to a parsed query: the client's ID,
// opcode, RD and CD echoed, and its question as it sent it (the resolver's
// answer may differ in case, and 0x20 clients compare it). RA is set: nxdns
// offers recursion.
func (q *pending) base() *dns.Msg {
	req := q.req
	var a *answerMsg
	if q.inline && q.ans == nil {
		a = &q.ownAns // the first answer built; a rebuilt one gets its own
	} else {
		a = new(answerMsg)
	}
	q.ans = a
	m := &a.msg
	*m = dns.Msg{MsgHdr: dns.MsgHdr{
		Id:                 req.Id,
		Response:           true,
		Opcode:             req.Opcode,
		RecursionDesired:   req.RecursionDesired,
		CheckingDisabled:   req.CheckingDisabled,
		RecursionAvailable: true,
	}}
	if len(req.Question) == 1 {
		m.Question = req.Question
	}
	return m
}

// answerMsg is an answer and the records nxdns adds to it, allocated
// together: the OPT record and room for the additional section, which for
// most answers is that OPT alone. It is the event's Reply, kept as a whole.
type answerMsg struct {
	msg     dns.Msg
	opt     dns.OPT
	optUsed bool
	extra   [1]dns.RR
}

// reply is an answer the server gives itself, with an rcode and no records.
func (q *pending) reply(rcode int) *dns.Msg {
	m := q.base()
	m.Rcode = rcode
	q.attachOPT(m)
	return m
}

// attachOPT gives the answer nxdns's OPT record, carrying edes, when the
// client sent one, and nothing otherwise: RFC 6891 §7 forbids an OPT in the
// answer to a query without one, and an Extended DNS Error lives only in an
// OPT (RFC 8914 §2). So a client without EDNS gets a bare SERVFAIL; the
// query log and the counters still record why.
func (q *pending) attachOPT(m *dns.Msg, edes ...*dns.EDNS0_EDE) {
	if q.opt == nil {
		return
	}
	var o *dns.OPT
	if a := q.ans; a != nil && m == &a.msg && !a.optUsed {
		a.optUsed = true
		o = &a.opt
		setOPT(o, q.opt.Do())
	} else {
		o = newOPT(q.opt.Do())
	}
	addKeepalive(o, q.ev.Proto) // keepalive.go
	for _, e := range edes {
		o.Option = append(o.Option, e)
	}
	if len(edes) > 0 {
		q.ev.EDE = &query.EDE{Code: edes[0].InfoCode, Text: edes[0].ExtraText}
	}
	m.Extra = append(m.Extra, o)
}

// relay turns a resolver's answer into the client's. It copies record slices
// but never modifies resp, which a cache may share between queries: the
// additional section is rebuilt, the upstream's OPT replaced by nxdns's own
// (keeping only its Extended DNS Errors, which docs/design.md#pool-answers relays, for
// example a DNSSEC failure or a blocked name).
func (q *pending) relay(resp *dns.Msg) *dns.Msg {
	m := q.base()
	m.Rcode = resp.Rcode
	if m.Rcode > 0xF {
		// An extended rcode (BADVERS, BADCOOKIE) answers nxdns's own EDNS
		// exchange with the upstream; it means nothing to the client.
		m.Rcode = dns.RcodeServerFailure
	}
	m.Authoritative = resp.Authoritative
	// RA stays as base set it: nxdns offers recursion to its clients,
	// whatever the upstream said of itself (docs/design.md#listeners).
	m.Truncated = resp.Truncated
	// RFC 6840 §5.8: AD only to a client that showed it understands it.
	m.AuthenticatedData = resp.AuthenticatedData && (q.req.AuthenticatedData || q.opt != nil && q.opt.Do())
	m.Answer, m.Ns = withoutTransactionRRs(resp.Answer), withoutTransactionRRs(resp.Ns)
	if n := len(resp.Extra) + 1; n <= len(q.ans.extra) {
		m.Extra = q.ans.extra[:0:n] // the usual case: nxdns's OPT alone
	} else {
		m.Extra = make([]dns.RR, 0, n)
	}
	var edes []*dns.EDNS0_EDE
	for _, rr := range resp.Extra {
		o, isOPT := rr.(*dns.OPT)
		if !isOPT {
			if !transactionRR(rr) {
				m.Extra = append(m.Extra, rr)
			}
			continue
		}
		for _, opt := range o.Option {
			if e, isEDE := opt.(*dns.EDNS0_EDE); isEDE && len(edes) < maxRelayedEDEs {
				edes = append(edes, &dns.EDNS0_EDE{InfoCode: e.InfoCode, ExtraText: truncateUTF8(e.ExtraText, maxRelayedEDEText)})
			}
		}
	}
	q.attachOPT(m, edes...)
	return m
}

// failure is the answer to a query the resolver could not answer (docs/design.md#pool-answers):
// SERVFAIL with an Extended DNS Error naming the reason, or nothing at all
// when the query was cancelled. It logs nothing: the query-log line and the
// counters are the record (no per-query warning for budget exhaustion).
func (q *pending) failure(ctx context.Context, err error) *dns.Msg {
	if ctx.Err() != nil {
		// Shutdown (or the client's connection) ended the query: whatever
		// error the resolver made of that, nobody is waiting for an answer.
		return nil
	}
	kind := upstream.Classify(err) // no Kind (or no error with no answer) is LocalResource
	qe, _ := errors.AsType[*upstream.QueryError](err)
	var ede *dns.EDNS0_EDE
	switch kind.Group() {
	case upstream.Cancellation:
		return nil
	case upstream.BudgetExhausted:
		ede = &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeNoReachableAuthority, ExtraText: budgetText(qe)}
	case upstream.PeerFault:
		ede = &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeNetworkError, ExtraText: peerText(kind, qe, q.ev.Upstream)}
	case upstream.LocalResource:
		ede = &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeOther, ExtraText: kind.Error()}
	}
	m := q.base()
	m.Rcode = dns.RcodeServerFailure
	q.attachOPT(m, ede)
	return m
}

// budgetText is EDE 22's text: "budget exhausted after 4000 ms".
func budgetText(qe *upstream.QueryError) string {
	if qe == nil || qe.Budget <= 0 {
		return upstream.KindBudgetExhausted.Error()
	}
	return fmt.Sprintf("%v after %d ms", upstream.KindBudgetExhausted, qe.Budget.Milliseconds())
}

// maxEDEText bounds EDE 23's text: with a 255-byte question name and the
// OPT record, the SERVFAIL still fits a 512-byte UDP answer.
const maxEDEText = 200

// shorten cuts s to at most n bytes on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// maxEDENames bounds the upstreams EDE 23's text lists, so that with many
// upstreams the SERVFAIL still fits a 512-byte UDP answer.
const maxEDENames = 4

// peerText is EDE 23's text: the (redacted) upstreams tried and the last
// failure, e.g. "tried tls://9.9.9.9:853, tls://1.1.1.1:853: upstream timeout".
func peerText(kind upstream.Kind, qe *upstream.QueryError, attributed string) string {
	var tried []string
	cause := kind.Error()
	if qe != nil {
		tried = qe.Tried
		cause = upstream.Explain(qe) // "certificate signed by unknown authority: set ca_file …"
	}
	if len(tried) == 0 && attributed != "" {
		tried = []string{attributed}
	}
	if len(tried) == 0 {
		return cause
	}
	var b strings.Builder
	b.WriteString("tried ")
	b.WriteString(strings.Join(tried[:min(len(tried), maxEDENames)], ", "))
	if n := len(tried) - maxEDENames; n > 0 {
		fmt.Fprintf(&b, " and %d more", n)
	}
	b.WriteString(": ")
	b.WriteString(cause)
	return shorten(b.String(), maxEDEText)
}

// Size bounds of a UDP answer. Without EDNS a client takes 512 bytes (RFC
// 1035 §4.2.1); with it, what it advertises, but at least 512 (RFC 6891
// §6.2.5) and at most upstreamUDPSize: nxdns does not send fragmented
// datagrams (DNS Flag Day 2020); a larger answer gets TC and the client
// retries over TCP.
const (
	minUDPAnswer = dns.MinMsgSize
	maxUDPAnswer = upstreamUDPSize
)

func (q *pending) sizeLimit() int {
	switch {
	case q.ev.Proto.Stream():
		return dns.MaxMsgSize // the 16-bit length prefix
	case q.opt == nil:
		return udpLimit(false, 0)
	default:
		return udpLimit(true, q.opt.UDPSize())
	}
}

// padded reports whether the answer is to be padded (RFC 7830 §3: a
// responder pads when the query was padded; RFC 8467 §4.1: to a multiple
// of 468 octets): a query over DoT or DoH whose OPT carries the Padding
// option. Never over plain UDP or TCP, whose bytes are readable anyway.
func (q *pending) padded() bool {
	if q.opt == nil || q.ev.Proto != query.DoT && q.ev.Proto != query.DoH && q.ev.Proto != query.DoQ && q.ev.Proto != query.DoH3 {
		return false
	}
	for _, o := range q.opt.Option {
		if o.Option() == dns.EDNS0PADDING {
			return true
		}
	}
	return false
}

// udpLimit is a UDP answer's size limit: 512 bytes without EDNS, else the
// client's payload size within 512 and nxdns's own 1232.
func udpLimit(edns bool, size uint16) int {
	if !edns {
		return minUDPAnswer
	}
	return min(max(int(size), minUDPAnswer), maxUDPAnswer)
}

// pack sizes the answer to the client and encodes it into buf, or a buffer
// of its own if buf is too small (fit: the one place an answer's size is
// decided), recording the rcode sent.
func (s *Server) pack(q *pending, m *dns.Msg, buf []byte) []byte {
	limit := q.sizeLimit()
	wire, err := fit(m, limit, buf)
	if err != nil && q.req != nil && len(q.req.Question) == 1 {
		// A record the resolver built that does not encode is a bug on our
		// side of the wire, not the client's: SERVFAIL, EDE Other.
		s.log.Warn("answer does not encode", zap.String("name", q.req.Question[0].Name), zap.Error(err))
		m = q.base()
		m.Rcode = dns.RcodeServerFailure
		q.ev.EDE = nil
		q.attachOPT(m, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeOther, ExtraText: "answer does not encode"})
		wire, err = fit(m, limit, buf)
	}
	if err != nil || len(wire) > limit {
		return nil // cannot happen for a question that parsed (see fit); never send oversize
	}
	if q.padded() {
		wire, _ = wireform.Pad(wire, wireform.ResponseBlock, limit)
	}
	q.ev.Rcode = m.Rcode
	q.ev.Reply = m
	return wire
}
