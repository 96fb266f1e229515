package upstream

import (
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/testutil"
)

// TestExplain_certificateFailuresSayWhatToDo: real DoT handshakes that fail
// verification are explained with the fix (issue 16, finding 16).
func TestExplain_certificateFailuresSayWhatToDo(t *testing.T) {
	t.Run("wrong name", func(t *testing.T) {
		_, c, _ := dotTestSetup(t, "other.test", testutil.AnswerA("192.0.2.1"))
		_, err := c.Exchange(transportCtx(t), transportQuery("a.example."))
		wantText(t, Explain(err), "certificate not valid for dot.test", "it names other.test", "check tls_name")
	})
	t.Run("unknown authority", func(t *testing.T) {
		srv := testutil.StartDoT(t, testutil.NewCA(t), "dot.test", testutil.AnswerA("192.0.2.1"))
		ep := transportEndpoint(t, fmt.Sprintf("tls://dot.test:%d", srv.Addr.Port()), srv.Addr)
		c := NewDoT(ep, testutil.NewCA(t).Pool(), nil) // trusts another CA
		t.Cleanup(func() { c.Close() })
		_, err := c.Exchange(transportCtx(t), transportQuery("a.example."))
		wantText(t, Explain(err), "unknown authority", "set ca_file")
	})
}

// TestExplain_clock: a certificate outside its validity is explained by the
// clock first, since a Pi without a real-time clock boots in the past.
func TestExplain_clock(t *testing.T) {
	ca := testutil.NewCA(t)
	pair, err := ca.Issue("dot.test")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	verify := func(at time.Time) error {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "dot.test", CurrentTime: at})
		return err
	}
	past := time.Date(1970, 1, 1, 0, 0, 10, 0, time.UTC)
	wantText(t, explainAt(verify(past), past), "not yet valid", "1970-01-01", "check the clock")
	future := leaf.NotAfter.Add(24 * time.Hour)
	wantText(t, explainAt(verify(future), future), "expired on "+leaf.NotAfter.UTC().Format(time.DateOnly), "check the clock")
}

func TestExplain_fallsBackToTheKind(t *testing.T) {
	err := &AttemptError{Kind: KindPeerTimeout, Err: fmt.Errorf("read: i/o timeout")}
	if got := Explain(err); got != KindPeerTimeout.Error() {
		t.Errorf("Explain = %q, want %q", got, KindPeerTimeout.Error())
	}
	if Explain(nil) != "" {
		t.Error("Explain(nil) is not empty")
	}
}

func wantText(t *testing.T, got string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(got, s) {
			t.Errorf("%q lacks %q", got, s)
		}
	}
}
