package certs

import (
	"crypto/x509"
	"path/filepath"
	"testing"
)

func TestIssueVerifiesAgainstCA(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue("dot.test", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dot.test", "127.0.0.1"} {
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: ca.Pool()}); err != nil {
			t.Errorf("verify %s: %v", name, err)
		}
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: ca.Pool()}); err == nil {
		t.Error("certificate verified for a name it does not carry")
	}
}

func TestWriteAndLoadRoundTrip(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	if err := ca.WriteFiles(cf, kf); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(cf, kf)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := loaded.Issue("doh.test")
	if err != nil {
		t.Fatal(err)
	}
	// The original CA's pool trusts what the loaded copy issued.
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "doh.test", Roots: ca.Pool()}); err != nil {
		t.Fatal(err)
	}
}
