package fakeup

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestLoadOrCreateCA_writesWhenAbsentThenReuses(t *testing.T) {
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	first, created, err := LoadOrCreateCA(cf, kf)
	if err != nil || !created {
		t.Fatalf("first call: created=%v err=%v, want a new CA", created, err)
	}
	for _, f := range []string{cf, kf} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	again, created, err := LoadOrCreateCA(cf, kf)
	if err != nil || created {
		t.Fatalf("second call: created=%v err=%v, want the CA loaded", created, err)
	}
	if !again.Cert.Equal(first.Cert) {
		t.Error("second call returned a different CA")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestLoadOrCreateCA_halfACAIsAnError(t *testing.T) {
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(cf, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateCA(cf, kf); err == nil {
		t.Fatal("a certificate without its key was accepted")
	}
	if _, err := os.Stat(kf); err == nil {
		t.Error("a key was written beside someone else's certificate")
	}
}

// Fake upstreams started together on the same paths agree on one CA.
func TestLoadOrCreateCA_concurrentCallersAgree(t *testing.T) {
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	const callers = 4
	var wg sync.WaitGroup
	raw := make([][]byte, callers)
	made := make([]bool, callers)
	for i := range callers {
		wg.Go(func() {
			ca, created, err := LoadOrCreateCA(cf, kf)
			if err != nil {
				t.Error(err)
				return
			}
			raw[i], made[i] = ca.Cert.Raw, created
		})
	}
	wg.Wait()
	creators := 0
	for i := range callers {
		if made[i] {
			creators++
		}
		if string(raw[i]) != string(raw[0]) {
			t.Errorf("caller %d got a different CA", i)
		}
	}
	if creators != 1 {
		t.Errorf("%d callers created a CA, want exactly 1", creators)
	}
}
