package tlscert

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/testutil"
)

type pairFiles struct {
	ca        *certs.CA
	cert, key string
	dir       string
	logs      *observer.ObservedLogs
	logger    *zap.Logger
}

func newPair(t *testing.T) *pairFiles {
	t.Helper()
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	core, logs := observer.New(zap.InfoLevel)
	p := &pairFiles{ca: ca, dir: dir, cert: filepath.Join(dir, "fullchain.pem"), key: filepath.Join(dir, "key.pem"), logs: logs, logger: zap.New(core)}
	p.write(t, "dns.home.example.org")
	return p
}

// write issues a fresh certificate for names and replaces the files the way
// an ACME client does: new files renamed over the old ones.
func (p *pairFiles) write(t *testing.T, names ...string) *certs.CA {
	t.Helper()
	c, err := p.ca.IssueValid(time.Now().Add(-time.Hour), time.Now().Add(90*24*time.Hour), names...) // as Let's Encrypt
	if err != nil {
		t.Fatal(err)
	}
	tmpC, tmpK := p.cert+".tmp", p.key+".tmp"
	if err := certs.WriteLeafFiles(c, tmpC, tmpK); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{tmpC, p.cert}, {tmpK, p.key}} {
		if err := os.Rename(r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	return p.ca
}

func TestStore_refreshReplacesAfterAChange(t *testing.T) {
	p := newPair(t)
	s, err := Open(p.cert, p.key, Options{Logger: p.logger})
	if err != nil {
		t.Fatal(err)
	}
	first := s.Leaf().SerialNumber
	if s.Refresh() {
		t.Fatal("Refresh replaced the certificate with the files unchanged")
	}
	p.write(t, "dns2.home.example.org")
	if !s.Refresh() {
		t.Fatal("Refresh did not notice the renamed-over files")
	}
	got, _ := s.GetCertificate(nil)
	if got.Leaf.SerialNumber.Cmp(first) == 0 || got.Leaf.DNSNames[0] != "dns2.home.example.org" {
		t.Fatalf("serving %v, want the new certificate", got.Leaf.DNSNames)
	}
	if st := s.Status(); st.ReloadsOK != 1 || st.ReloadsFailed != 0 {
		t.Fatalf("status %+v, want one good reload", st)
	}
}

func TestStore_badNewPairKeepsTheOldOneAndLogsOnce(t *testing.T) {
	p := newPair(t)
	s, err := Open(p.cert, p.key, Options{Logger: p.logger})
	if err != nil {
		t.Fatal(err)
	}
	old := s.Leaf().SerialNumber
	// A renewal half-way: the new chain is written, the key is still the old one.
	c, err := p.ca.Issue("dns.home.example.org")
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteLeafFiles(c, p.cert, filepath.Join(p.dir, "other-key.pem")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if s.Refresh() {
			t.Fatal("a mismatched pair replaced the serving certificate")
		}
	}
	if s.Leaf().SerialNumber.Cmp(old) != 0 {
		t.Fatal("the serving certificate changed")
	}
	if n := p.logs.FilterMessageSnippet("reload failed").Len(); n != 1 {
		t.Fatalf("%d failure lines for one bad state of the files, want 1", n)
	}
	st := s.Status()
	if st.ReloadsFailed != 1 || !strings.Contains(st.LastError, "private key does not match") {
		t.Fatalf("status %+v", st)
	}
	// The renewal completes: the matching key arrives, and the pair loads.
	if err := os.Rename(filepath.Join(p.dir, "other-key.pem"), p.key); err != nil {
		t.Fatal(err)
	}
	if !s.Refresh() || s.Leaf().SerialNumber.Cmp(c.Leaf.SerialNumber) != 0 {
		t.Fatal("the completed renewal was not picked up")
	}
}

func TestOpen_refusesWhatIsNotACertificateFile(t *testing.T) {
	p := newPair(t)
	fifo := filepath.Join(p.dir, "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(p.dir, "huge.pem")
	if err := os.WriteFile(huge, make([]byte, maxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	// The file errors are the shared reader's (safefile), the same for every
	// file the configuration names.
	for name, c := range map[string][3]string{
		"missing":   {filepath.Join(p.dir, "nope.pem"), p.key, "no such file"},
		"fifo":      {fifo, p.key, "not a regular file (a FIFO)"},
		"directory": {p.dir, p.key, "not a regular file (a directory)"},
		"huge":      {huge, p.key, "over the 1048576-byte limit"},
		"swapped":   {p.key, p.cert, ""},
	} {
		start := time.Now()
		_, err := Open(c[0], c[1], Options{})
		if err == nil {
			t.Errorf("%s: Open succeeded", name)
		} else if !strings.Contains(err.Error(), c[2]) {
			t.Errorf("%s: %v, want %q", name, err, c[2])
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: Open took %v: it must not block", name, d)
		}
	}
}

func TestStore_warnsOnceWithinTwoWeeksOfExpiry(t *testing.T) {
	p := newPair(t)
	now := time.Now()
	c, err := p.ca.IssueValid(now.Add(-time.Hour), now.Add(10*24*time.Hour), "dns.home.example.org")
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteLeafFiles(c, p.cert, p.key); err != nil {
		t.Fatal(err)
	}
	s, err := Open(p.cert, p.key, Options{Logger: p.logger})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.warnExpiry(s.cur.Load()) // what every poll does
	s.mu.Unlock()
	if n := p.logs.FilterMessageSnippet("expires soon").Len(); n != 1 {
		t.Fatalf("%d expiry warnings, want 1", n)
	}
	// A certificate with 30 days left warns nothing.
	p.logs.TakeAll()
	p.write(t, "dns.home.example.org")
	s.now = func() time.Time { return now.Add(-30 * 24 * time.Hour) }
	s.Refresh()
	if n := p.logs.FilterMessageSnippet("expires soon").Len(); n != 0 {
		t.Fatalf("%d expiry warnings for a certificate 120 days from its end", n)
	}
}

// TestStore_runPicksUpARenewal: the poll, not a handshake, notices the change.
func TestStore_runPicksUpARenewal(t *testing.T) {
	p := newPair(t)
	s, err := Open(p.cert, p.key, Options{Logger: p.logger})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { s.Run(stop, 5*time.Millisecond); close(done) }()
	defer func() { close(stop); <-done }()
	p.write(t, "renewed.home.example.org")
	testutil.WaitFor(t, "Run to pick up the renewal", 5*time.Second, func() bool { return s.Leaf().DNSNames[0] == "renewed.home.example.org" })
}
