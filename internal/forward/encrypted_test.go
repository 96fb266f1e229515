package forward

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/upstream"
)

// encryptedZone is the zone "corp." at resolver, trusting ca, with tls_name
// tlsName (may be empty), closed at cleanup.
func encryptedZone(t *testing.T, ca *certs.CA, resolver, tlsName string, timeout time.Duration) *Zone {
	t.Helper()
	tab, err := NewTable([]config.ForwardZone{{Zone: "corp", Resolver: resolver, TLSName: tlsName, CA: ca.PEM}}, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tab.Close)
	z, ok := tab.Match("host.corp.")
	if !ok {
		t.Fatal("zone corp. not built")
	}
	return z
}

// resolveA asks z for host.corp./A with client ID 4242 and checks the answer
// came back under that ID from the zone's resolver, naming it.
func resolveA(t *testing.T, z *Zone, want string) {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion("host.corp.", dns.TypeA)
	q.Id = 4242
	resp, up, err := z.Resolve(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if up != z.URL() {
		t.Errorf("upstream %q, want the zone's resolver %q", up, z.URL())
	}
	if resp.Id != 4242 || len(resp.Answer) != 1 {
		t.Fatalf("answer %v, want one record under ID 4242", resp)
	}
	if a, ok := resp.Answer[0].(*dns.A); !ok || a.A.String() != want {
		t.Errorf("answer %v, want A %s", resp.Answer[0], want)
	}
}

func TestResolve_DoTZoneQueriesGoToItsDoTResolver(t *testing.T) {
	ca := testutil.NewCA(t)
	srv := testutil.StartDoT(t, ca, "resolver.corp.test", testutil.AnswerA("192.0.2.53"))
	z := encryptedZone(t, ca, "tls://"+srv.Addr.String(), "resolver.corp.test", 5*time.Second)
	if z.URL() != "tls://"+srv.Addr.String() {
		t.Errorf("URL %q", z.URL())
	}
	resolveA(t, z, "192.0.2.53")
	resolveA(t, z, "192.0.2.53")
	if srv.Queries() != 2 || srv.Accepts() != 1 {
		t.Errorf("DoT server read %d queries on %d connections, want 2 on 1 (reused)", srv.Queries(), srv.Accepts())
	}
}

func TestResolve_DoQZoneQueriesGoToItsDoQResolver(t *testing.T) {
	ca := testutil.NewCA(t)
	srv := testutil.StartDoQ(t, ca, "127.0.0.1", testutil.AnswerA("192.0.2.54"))
	// No tls_name: the certificate must carry the URL's IP.
	z := encryptedZone(t, ca, "quic://"+srv.Addr.String(), "", 5*time.Second)
	resolveA(t, z, "192.0.2.54")
	if srv.Queries() != 1 {
		t.Errorf("DoQ server read %d queries, want 1", srv.Queries())
	}
}

func TestResolve_DoHZoneQueriesGoToItsDoHResolver(t *testing.T) {
	ca := testutil.NewCA(t)
	srv := testutil.StartDoH(t, ca, "resolver.corp.test", testutil.AnswerA("192.0.2.55"))
	z := encryptedZone(t, ca, "https://"+srv.Addr.String()+"/dns-query/account-token", "resolver.corp.test", 5*time.Second)
	if z.URL() != "https://"+srv.Addr.String() {
		t.Errorf("URL %q: the query log and metrics must not carry the path (docs/design.md#redaction)", z.URL())
	}
	resolveA(t, z, "192.0.2.55")
	if srv.Requests() != 1 {
		t.Errorf("DoH server got %d requests, want 1", srv.Requests())
	}
}

// A stalled encrypted resolver costs the zone's one read_timeout, and the
// failure is the resolver's (KindPeerTimeout), as for a udp:// zone.
func TestResolve_StalledDoTZoneSpendsOneBudget(t *testing.T) {
	ca := testutil.NewCA(t)
	stall := func(ctx context.Context, _ *dns.Msg) *dns.Msg { <-ctx.Done(); return nil }
	srv := testutil.StartDoT(t, ca, "resolver.corp.test", stall)
	z := encryptedZone(t, ca, "tls://"+srv.Addr.String(), "resolver.corp.test", 300*time.Millisecond)
	q := new(dns.Msg)
	q.SetQuestion("host.corp.", dns.TypeA)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, up, err := z.Resolve(ctx, q)
	mustFailWith(t, z, up, err, upstream.KindPeerTimeout)
	if ctx.Err() != nil {
		t.Error("the exchange outlived the caller's 10 s: the zone's read_timeout did not bound it")
	}
}

// A resolver whose certificate the zone does not trust never gets the query.
// An h3:// zone resolver (DoH over HTTP/3) goes through the upstreams' DoH3
// client, verified against tls_name.
func TestResolve_DoH3ZoneQueriesGoToItsDoH3Resolver(t *testing.T) {
	ca := testutil.NewCA(t)
	srv := testutil.StartDoH3(t, ca, "resolver.corp.test", testutil.AnswerA("192.0.2.55"))
	z := encryptedZone(t, ca, "h3://"+srv.Addr.String()+"/dns-query", "resolver.corp.test", 5*time.Second)
	if z.URL() != "h3://"+srv.Addr.String() {
		t.Errorf("URL %q, want the redacted h3:// URL", z.URL())
	}
	resolveA(t, z, "192.0.2.55")
	resolveA(t, z, "192.0.2.55")
	if srv.Requests() != 2 {
		t.Errorf("resolver saw %d requests, want 2", srv.Requests())
	}
}

func TestResolve_EncryptedZoneRejectsAnUntrustedCertificate(t *testing.T) {
	srv := testutil.StartDoT(t, testutil.NewCA(t), "resolver.corp.test", testutil.AnswerA("192.0.2.53"))
	z := encryptedZone(t, testutil.NewCA(t), "tls://"+srv.Addr.String(), "resolver.corp.test", 5*time.Second)
	q := new(dns.Msg)
	q.SetQuestion("host.corp.", dns.TypeA)
	if _, _, err := z.Resolve(context.Background(), q); err == nil {
		t.Fatal("answered through an untrusted certificate")
	}
	if srv.Queries() != 0 {
		t.Errorf("the untrusted resolver read %d queries", srv.Queries())
	}
}

func TestNewTable_EncryptedResolverErrorsNameTheKey(t *testing.T) {
	for _, resolver := range []string{"tls://resolver.corp.test", "quic://127.0.0.1:0x", "https://user:pw@127.0.0.1/q"} {
		_, err := NewTable([]config.ForwardZone{{Zone: "corp", Resolver: resolver}}, time.Second)
		if err == nil {
			t.Errorf("%q accepted", resolver)
			continue
		}
		if got := err.Error(); !strings.HasPrefix(got, "forward_zones[0].resolver: ") || strings.Contains(got, "pw") {
			t.Errorf("%q: error %q does not name forward_zones[0].resolver, or shows the password", resolver, got)
		}
	}
}
