package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/nxdns/nxdns/internal/safefile"
)

// Size caps of the files a configuration names (docs/design.md#file-reads: read
// once, with a size cap, only if they are regular files).
const (
	// MaxConfigFileSize bounds the configuration file: a household's file is
	// a few KiB; a megabyte is a hundred times the largest plausible one.
	MaxConfigFileSize = 1 << 20
	// MaxCAFileSize bounds a ca_file: a PEM bundle of every public root in
	// a distribution is about 220 KiB.
	MaxCAFileSize = 1 << 20
)

// errNotAbsolute is a ca_file given relative: under systemd the working
// directory is /, not the configuration's directory, so a relative path
// would mean different files to `nxdns check` and the service.
var errNotAbsolute = errors.New("is not an absolute path")

// ReadFiles reads every file c names — today each upstream's ca_file — once
// (safefile.ReadFile), keeps the content in c (UpstreamURL.CA) for the transports to
// use, and returns a problem for each one that cannot be read or holds no
// PEM certificate. Load and LoadFile call it before Validate, so the file
// checked is the file used: nothing reads it a second time.
func (c *Config) ReadFiles() Problems {
	var ps Problems
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.CAFile == "" {
			continue
		}
		u.CA = readCA(&ps, fmt.Sprintf("upstreams[%d].ca_file", i), u.CAFile)
	}
	c.readZoneCAs(&ps)
	if err := c.DNSSEC.readAnchors(); err != nil {
		ps.add("dnssec.trust_anchors_file", CodeTrustAnchors, "%v", err)
	}
	return ps
}

// readCA reads the ca_file at path for key, or adds its problem and
// returns nil.
func readCA(ps *Problems, key, path string) []byte {
	pem, err := readCAFile(path)
	if err != nil {
		ps.add(key, CodeCAFile, "%v", err)
	}
	return pem
}

func readCAFile(path string) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%q %w", path, errNotAbsolute)
	}
	pem, err := safefile.ReadFile(path, MaxCAFileSize)
	if err != nil {
		return nil, err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pem, nil
}
