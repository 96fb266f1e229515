package upstream

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/wireform"
)

func TestTransportError_doesNotRepeatTheKind(t *testing.T) {
	err := transportError(context.Background(), "tls://192.0.2.1:853",
		&AttemptError{Kind: KindBadResponse, Err: errors.New("QR bit not set")})
	if want := "tls://192.0.2.1:853: bad response: QR bit not set"; err.Error() != want {
		t.Errorf("error %q, want %q", err.Error(), want)
	}
}

func TestLoadRoots(t *testing.T) {
	ca := testutil.NewCA(t)
	if roots, err := LoadRoots(nil); roots != nil || err != nil {
		t.Errorf("LoadRoots(nil) = %v, %v; want nil, nil (the system roots)", roots, err)
	}
	if _, err := LoadRoots([]byte("not a certificate\n")); err == nil {
		t.Error("LoadRoots(junk): no error")
	}
	good := ca.PEM
	roots, err := LoadRoots(good)
	if err != nil {
		t.Fatalf("LoadRoots: %v", err)
	}
	leaf, err := ca.Issue("dot.test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "dot.test", Roots: roots}); err != nil {
		t.Errorf("a certificate from the ca_file CA does not verify: %v", err)
	}
}

// NewClient picks the transport by scheme and trusts ca_file: both
// transports answer through a CA that only the file names.
func TestNewClient_dispatchesBySchemeAndTrustsCAFile(t *testing.T) {
	ca := testutil.NewCA(t)
	dot := testutil.StartDoT(t, ca, "dot.test", testutil.AnswerA("192.0.2.1"))
	doh := testutil.StartDoH(t, ca, "doh.test", testutil.AnswerA("192.0.2.2"))
	for _, tc := range []struct {
		url  string
		addr netip.AddrPort
		want string
	}{
		{fmt.Sprintf("tls://dot.test:%d", dot.Addr.Port()), dot.Addr, "*upstream.DoT"},
		{doh.URL("/dns-query"), doh.Addr, "*upstream.DoH"},
	} {
		c, err := NewClient(transportEndpoint(t, tc.url, tc.addr), ca.PEM, nil)
		if err != nil {
			t.Fatalf("NewClient(%s): %v", tc.url, err)
		}
		if got := fmt.Sprintf("%T", c); got != tc.want {
			t.Errorf("NewClient(%s) is %s, want %s", tc.url, got, tc.want)
		}
		transportMustExchange(t, c, "a.example.")
		c.Close()
	}
	if _, err := NewClient(Endpoint{Scheme: "udp"}, nil, nil); err == nil {
		t.Error("NewClient accepted scheme udp")
	}
}

// Queries to DoT and DoH upstreams are padded to a multiple of 128 octets
// (RFC 8467 §4.1) with one EDNS(0) Padding option, and the answer is the
// upstream's as ever.
func TestTransport_padsQueriesTo128OctetBlocks(t *testing.T) {
	var sizes sync.Map // transport → packed length of the query the server read
	record := func(name string) testutil.Handler {
		return func(ctx context.Context, q *dns.Msg) *dns.Msg {
			if o := q.IsEdns0(); o != nil && len(o.Option) > 0 && o.Option[len(o.Option)-1].Option() == dns.EDNS0PADDING {
				if wire, err := q.Pack(); err == nil {
					sizes.Store(name, len(wire))
				}
			}
			return testutil.AnswerA("192.0.2.1")(ctx, q)
		}
	}
	_, dot, _ := dotTestSetup(t, "dot.test", record("dot"))
	_, doh := dohTestSetup(t, "doh.test", record("doh"))
	for name, c := range map[string]Client{"dot": dot, "doh": doh} {
		for _, qname := range []string{"a.example.", strings.Repeat("long-label.", 12) + "example."} {
			q := transportQuery(qname)
			q.SetEdns0(1232, false) // as nxdns's own queries: always an OPT record
			if r, err := c.Exchange(transportCtx(t), q); err != nil || len(r.Answer) != 1 {
				t.Fatalf("%s, %s: %v, %v", name, qname, r, err)
			}
			n, ok := sizes.LoadAndDelete(name)
			if !ok || n.(int)%128 != 0 {
				t.Errorf("%s, %s: query of %v bytes (padded %v), want a padded multiple of 128", name, qname, n, ok)
			}
		}
	}
}

// packPadded sends the bytes Pack and then Pad made before it packed into a
// buffer with room for the padding, for names of every length mod 128 (the
// padding from none to a whole block), DO, a cookie, compression asked for
// and no OPT at all; and a padded query costs one allocation, its wire form.
func TestPackPadded_sameBytesAsPackThenPadInOneAllocation(t *testing.T) {
	var queries []*dns.Msg
	for n := 2; n <= 2+wireform.QueryBlock; n++ {
		var name strings.Builder // n characters, dots included
		for rest := n; rest > 0; {
			l := min(63, rest-1)
			if rest-l-1 == 1 {
				l-- // no one-character remainder: a label is at least "a."
			}
			name.WriteString(strings.Repeat("a", l) + ".")
			rest -= l + 1
		}
		q := transportQuery(name.String())
		q.SetEdns0(1232, n%2 == 0)
		queries = append(queries, q)
	}
	cookie := transportQuery("cookie.example.")
	cookie.SetEdns0(1232, true)
	cookie.IsEdns0().Option = append(cookie.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"})
	compressed := transportQuery("compressed.example.")
	compressed.SetEdns0(1232, false)
	compressed.Compress = true
	queries = append(queries, cookie, compressed, transportQuery("no-opt.example."))
	for _, q := range queries {
		old, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		old, _ = wireform.Pad(old, wireform.QueryBlock, dns.MaxMsgSize)
		wire, err := packPadded(q)
		if err != nil || string(wire) != string(old) {
			t.Fatalf("%s: packPadded gave %x (%v), Pack and Pad %x", q.Question[0].Name, wire, err, old)
		}
	}
	q := queries[10]
	if allocs := testing.AllocsPerRun(100, func() { _, _ = packPadded(q) }); allocs != 1 {
		t.Errorf("%.0f allocations to pack and pad a query, want 1 (its wire form)", allocs)
	}
}
