package server

import (
	"strings"
	"unicode/utf8"

	"github.com/miekg/dns"
)

// fit encodes m so that its wire form is at most limit bytes, the client's
// limit (docs/design.md#answer-fit: the size is checked after packing, not
// assumed). It is the one place every answer's size is decided, for four
// reasons Msg.Truncate alone does not cover: Truncate never shrinks the OPT
// record, so an Extended DNS Error with a long EXTRA-TEXT (an upstream's, or
// ours naming long URLs on a long name) overflows any limit; it skips a
// message whose last record is a TSIG; it works on an estimate, which
// counts an NSEC3 12 bytes and an RRSIG up to 2 bytes longer than they
// pack; and it sends a message uncompressed whenever that fits.
//
// Every answer is compressed (RFC 1035 §4.1.4; docs/server.md "Handler")
// that has a name to compress (compressible), and the whole answer is
// packed first: a message that fits whole is never cut on Truncate's
// estimate, so TC means a record was left out (RFC 2181 §9). An answer
// that is cut keeps no signed RRset in part: Truncate cuts after the last
// record that fits, often an NSEC3 whose RRSIG did not, and wholeSigned
// drops such a set (RFC 4035 §3.1.1: the signatures go with the set), as
// Unbound's truncation does.
//
// Guarantee: a non-nil result is at most max(limit, the header plus the
// question plus a bare OPT) bytes — under 512 for any question — and what
// was cut is announced: records dropped set TC (the client retries over
// TCP), EDE text is shortened (docs/design.md#pool-answers: "EXTRA-TEXT is shortened rather
// than overflow it"), never dropped with its info code. m is modified.
// The result is packed into buf when it fits (Msg.PackBuffer), so the
// caller may hand in a reused buffer.
func fit(m *dns.Msg, limit int, buf []byte) ([]byte, error) {
	m.Compress = compressible(m)
	wire, err := m.PackBuffer(buf)
	if err != nil || len(wire) <= limit {
		return wire, err
	}
	truncate(m, limit)
	if wire, err = m.PackBuffer(buf); err != nil || len(wire) <= limit {
		return wire, err
	}
	// The OPT is what Truncate could not shrink: cut the EDE texts by the
	// excess and size the records again around the smaller OPT.
	if shortenEDE(m, len(wire)-limit) {
		truncate(m, limit)
		if wire, err = m.PackBuffer(buf); err != nil || len(wire) <= limit {
			return wire, err
		}
	}
	// Still too large (a record Truncate cannot measure right, a TSIG it
	// refused to touch): the header, the question and the OPT with empty
	// EDE texts, TC set.
	m.Answer, m.Ns = nil, nil
	var opt *dns.OPT
	for _, rr := range m.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			opt = o
		}
	}
	m.Extra = nil
	if opt != nil {
		// The first EDE alone, text emptied: its info code still says why.
		bare := &dns.OPT{Hdr: opt.Hdr}
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				e.ExtraText = ""
				bare.Option = []dns.EDNS0{e}
				break
			}
		}
		m.Extra = []dns.RR{bare}
	}
	m.Truncated = true
	m.Compress = compressible(m)
	return m.PackBuffer(buf)
}

// compressible reports whether m has a name besides its one question's,
// the only names compression can shorten. An answer with no record but an
// OPT (an empty NOERROR, nxdns's own errors) has the question's name, which comes
// first and so has nothing to point at, and the OPT's root name, a single
// octet a pointer cannot shorten (RFC 1035 §4.1.4): it packs to the same
// bytes uncompressed, without miekg/dns's compression map (2 allocations;
// docs/performance.md, "What is left, and the floor").
func compressible(m *dns.Msg) bool {
	if len(m.Question) > 1 || len(m.Answer) > 0 || len(m.Ns) > 0 {
		return true
	}
	for _, rr := range m.Extra {
		if _, ok := rr.(*dns.OPT); !ok || rr.Header().Name != "." {
			return true
		}
	}
	return false
}

// truncate is m.Truncate(limit), compressed (Truncate turns compression
// off when its estimate fits uncompressed), without the part of a signed
// RRset the cut left in the answer or authority section (wholeSigned).
func truncate(m *dns.Msg, limit int) {
	answer, ns := m.Answer, m.Ns
	m.Truncate(limit)
	m.Answer, m.Ns = wholeSigned(m.Answer, answer), wholeSigned(m.Ns, ns)
	m.Compress = true
}

// wholeSigned is kept, the first records of section that Truncate kept,
// without the records of every signed RRset the cut went through: the
// set's records and RRSIGs alike, since a set without its signatures, or
// signatures without all of the set, validate nothing (RFC 4035 §3.1.1).
// An unsigned set may stay in part, as RFC 2181 §9 allows once TC is set.
// kept shares section's array, which the caller may share with the cache:
// it is never written to.
func wholeSigned(kept, section []dns.RR) []dns.RR {
	if len(kept) == len(section) {
		return kept
	}
	type rrset struct {
		name  string
		rtype uint16
	}
	of := func(rr dns.RR) rrset {
		t := rr.Header().Rrtype
		if sig, ok := rr.(*dns.RRSIG); ok {
			t = sig.TypeCovered
		}
		return rrset{strings.ToLower(rr.Header().Name), t}
	}
	signed := map[rrset]bool{}
	for _, rr := range section {
		if rr.Header().Rrtype == dns.TypeRRSIG {
			signed[of(rr)] = true
		}
	}
	cut := map[rrset]bool{}
	for _, rr := range section[len(kept):] {
		if k := of(rr); signed[k] {
			cut[k] = true
		}
	}
	if len(cut) == 0 {
		return kept
	}
	out := make([]dns.RR, 0, len(kept))
	for _, rr := range kept {
		if !cut[of(rr)] {
			out = append(out, rr)
		}
	}
	return out
}

// shortenEDE cuts the EXTRA-TEXT of m's Extended DNS Errors by at least
// excess bytes in all, longest first, and reports whether there was any
// text to cut. Texts are cut at a UTF-8 boundary (RFC 8914 §2: the text is
// UTF-8).
func shortenEDE(m *dns.Msg, excess int) bool {
	var edes []*dns.EDNS0_EDE
	for _, rr := range m.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			for _, opt := range o.Option {
				if e, ok := opt.(*dns.EDNS0_EDE); ok && e.ExtraText != "" {
					edes = append(edes, e)
				}
			}
		}
	}
	if len(edes) == 0 {
		return false
	}
	for _, e := range edes {
		if excess <= 0 {
			break
		}
		keep := max(len(e.ExtraText)-excess, 0)
		excess -= len(e.ExtraText) - keep
		e.ExtraText = truncateUTF8(e.ExtraText, keep)
	}
	return true
}

// truncateUTF8 is s cut to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// maxRelayedEDEText bounds the EXTRA-TEXT nxdns relays from a resolver's
// Extended DNS Error (docs/design.md#answer-fit: relayed EDE text is bounded). Real resolvers'
// texts are a phrase and perhaps a name ("validation failure <example.org.
// A IN>: signature expired"); 160 bytes keeps those whole, and with the
// largest question and nxdns's own OPT still fits a 512-byte answer.
const maxRelayedEDEText = 160

// maxRelayedEDEs bounds how many Extended DNS Errors of one answer are
// relayed: an upstream sending thousands of empty ones would otherwise grow
// the OPT record past any client's limit. Real answers carry one or two.
const maxRelayedEDEs = 3

// transactionRR reports whether rr belongs to the upstream's own exchange
// and must never be relayed (docs/design.md#answer-fit): TSIG and TKEY (RFC 8945, RFC 2930)
// and SIG(0) (RFC 2931: a SIG covering type 0). Relayed, they would be
// signatures over a message the client never saw, and a TSIG also stops
// Msg.Truncate from sizing the answer.
func transactionRR(rr dns.RR) bool {
	switch r := rr.(type) {
	case *dns.TSIG, *dns.TKEY:
		return true
	case *dns.SIG:
		return r.TypeCovered == 0
	}
	return false
}

// withoutTransactionRRs is rrs without the transaction records, sharing the
// slice when there are none (the common case costs no allocation).
func withoutTransactionRRs(rrs []dns.RR) []dns.RR {
	for i, rr := range rrs {
		if transactionRR(rr) {
			out := append(make([]dns.RR, 0, len(rrs)-1), rrs[:i]...)
			for _, rr := range rrs[i+1:] {
				if !transactionRR(rr) {
					out = append(out, rr)
				}
			}
			return out
		}
	}
	return rrs
}
