package server

import (
	"context"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// fuzzResolver answers each query with one of the hostile answers of
// fit_test.go, picked by its type, so the fuzzer drives the sizing of
// oversized EDEs, TSIG-terminated records and nxdns's own EDE texts.
func fuzzResolver(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
	switch q.Question[0].Qtype % 5 {
	case 1:
		return hostileTSIG(ctx, q)
	case 2:
		return hostileEDE(ctx, q)
	case 3:
		return manyEDEs(ctx, q)
	case 4:
		return longTried(ctx, q)
	}
	return bigAnswer(ctx, q)
}

// clientLimit is the size the client's message allows, computed here from
// the wire independently of the handler: 512 without EDNS (or when the
// message does not parse, or carries more than one OPT), the advertised size
// clamped to [512, 1232] with it, 65535 over TCP.
func clientLimit(wire []byte, tcp bool) int {
	if tcp {
		return dns.MaxMsgSize
	}
	m := new(dns.Msg)
	if m.Unpack(wire) != nil {
		return 512
	}
	var opts []*dns.OPT
	for _, rr := range m.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			opts = append(opts, o)
		}
	}
	if len(opts) != 1 {
		return 512
	}
	return min(max(int(opts[0].UDPSize()), 512), 1232)
}

// FuzzHandle feeds the handler arbitrary wire messages, over UDP and TCP,
// answered by hostile resolvers (docs/design.md#fuzzing): it never panics, never
// answers a response (QR set) or a message shorter than a header, and never
// sends an answer larger than the client's limit or one that does not
// decode. The seeds are kept in testdata/fuzz/FuzzHandle with what the
// fuzzer found.
func FuzzHandle(f *testing.F) {
	seed := func(m *dns.Msg) {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	seed(newQuery("a.example.", dns.TypeA))
	seed(newQuery("big.example.", dns.TypeTXT))
	e := newQuery("ede.example.", dns.TypeCAA) // 257 % 5 == 2: the oversized EDE
	e.SetEdns0(1232, true)
	seed(e)
	two := newQuery("two.example.", dns.TypeA)
	two.SetEdns0(4096, false)
	two.Extra = append(two.Extra, two.Extra[0])
	seed(two)
	v1 := newQuery("v1.example.", dns.TypeA)
	v1.SetEdns0(512, false)
	v1.Extra[0].(*dns.OPT).SetVersion(1)
	seed(v1)
	notify := newQuery("n.example.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	seed(notify)
	resp := newQuery("r.example.", dns.TypeA)
	resp.Response = true
	seed(resp)
	f.Add([]byte{0, 1, 0, 0, 0, 1}, false)

	s := New(Options{}, state(resolverFunc(fuzzResolver)))
	client := netip.MustParseAddr("127.0.0.1")
	f.Fuzz(func(t *testing.T, wire []byte, tcp bool) {
		out := s.handle(context.Background(), wire, client, protoOf(tcp))
		if out == nil {
			return
		}
		if len(wire) < headerSize || wire[2]&0x80 != 0 {
			t.Fatalf("answered a message that is not a query (%d bytes, QR %v)", len(wire), len(wire) > 2 && wire[2]&0x80 != 0)
		}
		if limit := clientLimit(wire, tcp); len(out) > limit {
			t.Fatalf("answer of %d bytes, the client's limit is %d", len(out), limit)
		}
		m := new(dns.Msg)
		if err := m.Unpack(out); err != nil {
			t.Fatalf("answer does not decode: %v", err)
		}
		if !m.Response || m.Id != uint16(wire[0])<<8|uint16(wire[1]) {
			t.Fatalf("answer QR %v ID %d, want a response with the query's ID", m.Response, m.Id)
		}
	})
}

// FuzzControlMessages: whatever control-message bytes a read returns, the
// walk never panics or reads past its buffer, each message's data lies
// inside it, and the destination and drop count read from it are those
// of a message it found.
func FuzzControlMessages(f *testing.F) {
	f.Add(sourceOOB(netip.MustParseAddr("192.0.2.7")))
	f.Add(sourceOOB(netip.MustParseAddr("2001:db8::7")))
	f.Add(append(sourceOOB(netip.MustParseAddr("2001:db8::7")), sourceOOB(netip.MustParseAddr("192.0.2.7"))...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, oob []byte) {
		// The kernel's buffers are 8-aligned; so is a fresh slice.
		buf := append(make([]byte, 0, len(oob)), oob...)
		found := 0
		for _, _, data, rest, ok := nextControl(buf); ok; _, _, data, rest, ok = nextControl(rest) {
			if len(rest) >= len(buf) || len(data) > len(buf) {
				t.Fatalf("the walk did not advance inside the buffer: data %d, rest %d of %d", len(data), len(rest), len(buf))
			}
			buf = rest
			found++
		}
		if found == 0 && packetDst(oob).IsValid() {
			t.Fatal("a destination read from no control message")
		}
		var k kernelDrops
		k.update(oob)
	})
}
