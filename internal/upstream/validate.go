package upstream

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// MaxResponseSize is the largest DNS message any transport accepts: the
// 16-bit length prefix of DNS over TCP/TLS (RFC 1035 §4.2.2) bounds it anyway,
// and DoH bodies are read with this limit so a hostile server cannot make us
// buffer more.
const MaxResponseSize = dns.MaxMsgSize

// Validate checks that resp is a response to q (docs/design.md#response-validation): QR set, same ID,
// same question (name case-insensitive, type, class). The returned error
// carries KindBadResponse or KindResponseMismatch. Every transport calls it
// after decoding, so the pool never sees an answer to another question.
func Validate(q, resp *dns.Msg) error {
	if resp == nil {
		return &AttemptError{Kind: KindBadResponse, Err: fmt.Errorf("no message")}
	}
	if !resp.Response {
		return &AttemptError{Kind: KindBadResponse, Err: fmt.Errorf("QR bit not set")}
	}
	if resp.Id != q.Id {
		return &AttemptError{Kind: KindResponseMismatch, Err: fmt.Errorf("id %d, want %d", resp.Id, q.Id)}
	}
	if len(q.Question) != len(resp.Question) {
		// A FORMERR may legitimately echo no question; anything else must.
		if len(resp.Question) == 0 && resp.Rcode == dns.RcodeFormatError {
			return nil
		}
		return &AttemptError{Kind: KindResponseMismatch, Err: fmt.Errorf("%d questions, want %d", len(resp.Question), len(q.Question))}
	}
	for i, want := range q.Question {
		got := resp.Question[i]
		if got.Qtype != want.Qtype || got.Qclass != want.Qclass || !strings.EqualFold(got.Name, want.Name) {
			return &AttemptError{Kind: KindResponseMismatch, Err: fmt.Errorf("question %s %s, want %s %s",
				got.Name, dns.TypeToString[got.Qtype], want.Name, dns.TypeToString[want.Qtype])}
		}
	}
	return nil
}

// ValidateStream is Validate for a stream transport (DoT, DoH, DNS over
// TCP), where TC=1 means nothing: the message was not cut to a datagram, so
// an upstream that sets it is broken or hostile, and its answer is a
// KindBadResponse that is never relayed (docs/design.md#response-validation). Over UDP, TC=1 is the
// signal to retry over TCP and Validate alone applies.
func ValidateStream(q, resp *dns.Msg) error {
	if err := Validate(q, resp); err != nil {
		return err
	}
	if resp.Truncated {
		return &AttemptError{Kind: KindBadResponse, Err: fmt.Errorf("TC set over a stream transport")}
	}
	return nil
}

// Unpack decodes a wire response, enforcing the size limit. Decoding errors
// are peer faults: the upstream sent something that is not DNS. A TTL with
// its top bit set is read as 0 here, where every transport's answer comes in
// (RFC 2181 §8), so neither the cache nor a client ever sees 4294967295.
func Unpack(wire []byte) (*dns.Msg, error) {
	if len(wire) > MaxResponseSize {
		return nil, &AttemptError{Kind: KindResponseTooLarge, Err: fmt.Errorf("%d bytes", len(wire))}
	}
	m := new(dns.Msg)
	if err := m.Unpack(wire); err != nil {
		return nil, &AttemptError{Kind: KindBadResponse, Err: err}
	}
	for _, sec := range [...][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			// An OPT record's TTL field holds its flags, not a TTL.
			if h := rr.Header(); h.Ttl > maxTTL && h.Rrtype != dns.TypeOPT {
				h.Ttl = 0
			}
		}
	}
	return m, nil
}

// maxTTL is the largest TTL field RFC 2181 §8 gives a meaning: 2^31 - 1.
const maxTTL = 1<<31 - 1
