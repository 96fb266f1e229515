// Package tlscert is the certificate nxdns serves DoT and DoH with
// (docs/design.md#tls-certificate): loaded from tls.cert_file and tls.key_file, replaced when those
// files change (an ACME renewal) without a restart or a dropped connection,
// watched for expiry, and inspected for `nxdns check --tls`.
package tlscert

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// ExpiryWarning is how long before its expiry a certificate is logged as
// expiring soon: two renewal attempts of an ACME client running weekly.
const ExpiryWarning = 14 * 24 * time.Hour

// PollInterval is how often Run looks at the files. A renewal is noticed
// within it; a stat of two files every 10 s costs nothing.
const PollInterval = 10 * time.Second

// Store holds the serving certificate and replaces it when its files change.
//
// Guarantees:
//   - GetCertificate never blocks on the files and never returns nil: it
//     returns the last pair that loaded, so a handshake in progress or a
//     connection already open is unaffected by a reload, and new handshakes
//     get the new pair from the moment it loaded;
//   - a changed pair that fails to load (a half-written renewal, a key that
//     does not match) keeps the previous one; the failure is logged once per
//     state of the files, and tried again when they change again;
//   - Refresh is safe for concurrent use; reloads are serialised.
type Store struct {
	certFile, keyFile string
	log               *zap.Logger
	now               func() time.Time

	cur atomic.Pointer[loaded]

	mu       sync.Mutex // serialises Refresh; guards the fields below
	seen     [2]fileKey // the files' state at the last attempt, good or bad
	warned   string     // serial of the leaf last warned about expiring
	reloadOK uint64
	reloadKO uint64
	lastErr  string
}

// loaded is one pair that parsed and matched.
type loaded struct {
	cert *tls.Certificate // Leaf set
}

// fileKey is what Refresh compares to notice a change: ACME clients replace
// files by rename (a new inode) or rewrite them (a new mtime or size).
type fileKey struct {
	ino   uint64
	size  int64
	mtime time.Time
}

// Options are what Open needs besides the files.
type Options struct {
	Logger *zap.Logger      // named "tls" here; nil discards
	Now    func() time.Time // for expiry; nil is time.Now
}

// Open loads the pair; unlike a later reload, a pair that does not load
// here is an error (there is nothing to keep serving).
func Open(certFile, keyFile string, opts Options) (*Store, error) {
	s := &Store{certFile: certFile, keyFile: keyFile, log: opts.Logger, now: opts.Now}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.log = s.log.Named("tls")
	if s.now == nil {
		s.now = time.Now
	}
	keys := s.stat()
	l, err := loadPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	s.seen = keys
	s.cur.Store(l)
	s.warnExpiry(l)
	return s, nil
}

// Files are the certificate and key paths, as configured.
func (s *Store) Files() (certFile, keyFile string) { return s.certFile, s.keyFile }

// GetCertificate serves tls.Config.GetCertificate.
func (s *Store) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.cur.Load().cert, nil
}

// Leaf is the serving certificate now.
func (s *Store) Leaf() *x509.Certificate { return s.cur.Load().cert.Leaf }

// Refresh reloads the pair if either file changed since the last attempt,
// and reports whether the serving certificate was replaced.
func (s *Store) Refresh() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := s.stat()
	if keys == s.seen {
		return false
	}
	s.seen = keys
	l, err := loadPair(s.certFile, s.keyFile)
	if err != nil {
		s.reloadKO++
		s.lastErr = err.Error()
		s.log.Error("certificate reload failed; keeping the one serving",
			zap.String("cert_file", s.certFile), zap.String("key_file", s.keyFile), zap.Error(err),
			zap.Time("serving_not_after", s.Leaf().NotAfter))
		return false
	}
	s.reloadOK++
	s.lastErr = ""
	s.cur.Store(l)
	s.log.Info("certificate reloaded", zap.Strings("names", l.cert.Leaf.DNSNames),
		zap.Time("not_after", l.cert.Leaf.NotAfter))
	s.warnExpiry(l)
	return true
}

// warnExpiry logs once per certificate when it is within ExpiryWarning of
// its end. Called with mu held, or before the Store is shared.
func (s *Store) warnExpiry(l *loaded) {
	leaf := l.cert.Leaf
	left := leaf.NotAfter.Sub(s.now())
	if left > ExpiryWarning || s.warned == leaf.SerialNumber.String() {
		return
	}
	s.warned = leaf.SerialNumber.String()
	s.log.Warn("the serving certificate expires soon: renew it (phones refuse an expired one)",
		zap.String("cert_file", s.certFile), zap.Time("not_after", leaf.NotAfter),
		zap.Duration("left", left.Round(time.Minute)))
}

// Run polls the files every interval until stop closes, so a renewal is
// picked up and an approaching expiry is logged even without handshakes.
func (s *Store) Run(stop <-chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.Refresh()
			s.mu.Lock()
			s.warnExpiry(s.cur.Load())
			s.mu.Unlock()
		}
	}
}

// Status is the store's state for metrics and /api/health.
type Status struct {
	NotAfter      time.Time // of the serving leaf
	Names         []string  // its DNS names
	ReloadsOK     uint64    // replacements since Open
	ReloadsFailed uint64    // changed pairs that did not load
	LastError     string    // the last failed reload, "" after a good one
}

// Status reads the store's state.
func (s *Store) Status() Status {
	leaf := s.Leaf()
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{NotAfter: leaf.NotAfter, Names: leaf.DNSNames,
		ReloadsOK: s.reloadOK, ReloadsFailed: s.reloadKO, LastError: s.lastErr}
}

func (s *Store) stat() [2]fileKey {
	return [2]fileKey{statKey(s.certFile), statKey(s.keyFile)}
}

// statKey is the file's identity now; a missing file is the zero key, so
// its reappearance is a change.
func statKey(path string) fileKey {
	fi, err := os.Stat(path)
	if err != nil {
		return fileKey{}
	}
	k := fileKey{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.ino = st.Ino
	}
	return k
}

// loadPair reads and parses the pair, requiring a leaf that is currently
// parseable and a key that matches it.
func loadPair(certFile, keyFile string) (*loaded, error) {
	certPEM, err := readFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readFile(keyFile)
	if err != nil {
		return nil, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s and %s: %w", certFile, keyFile, err)
	}
	if c.Leaf == nil { // set by X509KeyPair since Go 1.23; keep the check explicit
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%s: %w", certFile, err)
		}
	}
	if len(c.Leaf.DNSNames) == 0 && len(c.Leaf.IPAddresses) == 0 {
		return nil, errors.New(certFile + ": the certificate names no host (no subjectAltName)")
	}
	return &loaded{cert: &c}, nil
}
