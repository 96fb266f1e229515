package fakeup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/nxdns/nxdns/internal/certs"
)

// LoadOrCreateCA returns the CA in certFile and keyFile, or, when neither
// file exists, generates one and writes it there (created is then true), so
// the first fake upstream of a scenario makes the CA that the resolver and
// every later fake upstream trust. Exactly one of the two files existing is
// an error: silently replacing half a CA would leave clients trusting a key
// nobody holds.
//
// Two fake upstreams started together with the same paths must agree on one
// CA: the decision runs under an exclusive flock(2) on certFile's directory,
// and the files appear by rename, so no reader ever sees half a file.
func LoadOrCreateCA(certFile, keyFile string) (ca *certs.CA, created bool, err error) {
	unlock, err := lockDir(filepath.Dir(certFile))
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	certOK, err := exists(certFile)
	if err != nil {
		return nil, false, err
	}
	keyOK, err := exists(keyFile)
	if err != nil {
		return nil, false, err
	}
	switch {
	case certOK && keyOK:
		ca, err := certs.LoadCA(certFile, keyFile)
		if err != nil {
			return nil, false, fmt.Errorf("load CA: %w", err)
		}
		return ca, false, nil
	case certOK:
		return nil, false, fmt.Errorf("CA: %s exists but %s does not; give both files or neither", certFile, keyFile)
	case keyOK:
		return nil, false, fmt.Errorf("CA: %s exists but %s does not; give both files or neither", keyFile, certFile)
	}
	ca, err = certs.NewCA()
	if err != nil {
		return nil, false, fmt.Errorf("generate CA: %w", err)
	}
	if err := writeCA(ca, certFile, keyFile); err != nil {
		return nil, false, err
	}
	return ca, true, nil
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}

// writeCA writes both files under temporary names beside their targets and
// renames them into place, key first: a process that finds the certificate
// finds its key too.
func writeCA(ca *certs.CA, certFile, keyFile string) error {
	tmpCert, tmpKey := certFile+".tmp", keyFile+".tmp"
	if err := ca.WriteFiles(tmpCert, tmpKey); err != nil {
		os.Remove(tmpCert)
		os.Remove(tmpKey)
		return fmt.Errorf("write CA: %w", err)
	}
	if err := os.Rename(tmpKey, keyFile); err != nil {
		os.Remove(tmpCert)
		os.Remove(tmpKey)
		return fmt.Errorf("write CA: %w", err)
	}
	if err := os.Rename(tmpCert, certFile); err != nil {
		os.Remove(tmpCert)
		return fmt.Errorf("write CA: %w", err)
	}
	return nil
}

// lockDir takes an exclusive flock on dir and returns its release. Locking
// the directory leaves no lock file behind. The wait is unbounded in
// principle but not in practice: a holder only generates a key and writes
// two small files.
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("CA directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock CA directory %s: %w", dir, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
