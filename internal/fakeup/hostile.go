package fakeup

import (
	"strings"

	"github.com/miekg/dns"
)

// The hostile behaviours (issue 13): what a broken or malicious upstream
// sends to make a forwarder amplify, overflow or hang. Each is a Behaviour
// setting, so a listen URL asks for it ("dot://127.0.0.1:0?ede_text=65000")
// and a scenario runs it against the real binary.
//
//   - ede_text=N: every answer carries an Extended DNS Error whose text is N
//     bytes (an OPT record is added if the query had none);
//   - txt=N: a TXT question is answered with about N bytes of TXT records;
//   - tsig=1: a TSIG record ends the additional section (Msg.Truncate does
//     not truncate such a message);
//   - tc=1 on a stream (tcp, dot, doh): TC set where it means nothing;
//   - endless=1 (tcp, dot): after the first query, frames of answers to
//     another ID without end, until the client closes;
//   - slow_bytes=D (tcp, dot): each answer is written one byte every D.

// maxHostileBytes bounds ede_text and txt: a DNS message is at most 65535
// bytes, and the point is an answer near that size.
const maxHostileBytes = 65000

// hostile decorates reply r to q as b asks.
func hostile(r, q *dns.Msg, b Behaviour) {
	if b.TXT > 0 && len(q.Question) == 1 && q.Question[0].Qtype == dns.TypeTXT {
		r.Answer = append(r.Answer, txtRecords(q.Question[0].Name, b.TXT)...)
	}
	if b.EDEText > 0 {
		opt := r.IsEdns0()
		if opt == nil {
			r.SetEdns0(ednsSize, false)
			opt = r.IsEdns0()
		}
		opt.Option = append(opt.Option, &dns.EDNS0_EDE{
			InfoCode:  dns.ExtendedErrorCodeOther,
			ExtraText: strings.Repeat("x", b.EDEText),
		})
	}
	if b.TSIG {
		id := uint16(0)
		if r != nil {
			id = r.Id
		}
		r.Extra = append(r.Extra, &dns.TSIG{
			Hdr:       dns.RR_Header{Name: "hostile.key.", Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
			Algorithm: dns.HmacSHA256, TimeSigned: 1, Fudge: 300,
			MACSize: 32, MAC: strings.Repeat("00", 32), OrigId: id,
		})
	}
}

// txtRecords are TXT records for name holding about n bytes of text, in
// strings of 255 bytes (the most one string holds).
func txtRecords(name string, n int) []dns.RR {
	var rrs []dns.RR
	for n > 0 {
		k := min(n, 255)
		rrs = append(rrs, &dns.TXT{
			Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
			Txt: []string{strings.Repeat("t", k)},
		})
		n -= k + 12 + 2 // the record's own overhead counts against the size too
	}
	return rrs
}
