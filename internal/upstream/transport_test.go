package upstream

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/nxdns/nxdns/internal/testutil"
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
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(good, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if roots, err := LoadRoots(""); roots != nil || err != nil {
		t.Errorf("LoadRoots(\"\") = %v, %v; want nil, nil (the system roots)", roots, err)
	}
	for _, bad := range []string{junk, filepath.Join(dir, "missing.pem")} {
		if _, err := LoadRoots(bad); err == nil {
			t.Errorf("LoadRoots(%s): no error", filepath.Base(bad))
		}
	}
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
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
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
		c, err := NewClient(transportEndpoint(t, tc.url, tc.addr), caFile, nil)
		if err != nil {
			t.Fatalf("NewClient(%s): %v", tc.url, err)
		}
		if got := fmt.Sprintf("%T", c); got != tc.want {
			t.Errorf("NewClient(%s) is %s, want %s", tc.url, got, tc.want)
		}
		transportMustExchange(t, c, "a.example.")
		c.Close()
	}
	if _, err := NewClient(Endpoint{Scheme: "udp"}, "", nil); err == nil {
		t.Error("NewClient accepted scheme udp")
	}
}
