package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Size caps of the files a configuration names (SPEC §9 "Robustness": read
// once, with a size cap, only if they are regular files).
const (
	// MaxConfigFileSize bounds the configuration file: a household's file is
	// a few KiB; a megabyte is a hundred times the largest plausible one.
	MaxConfigFileSize = 1 << 20
	// MaxCAFileSize bounds a ca_file: a PEM bundle of every public root in
	// a distribution is about 220 KiB.
	MaxCAFileSize = 1 << 20
)

// ReadFile reads the named file whole, once, if it is a regular file of at
// most limit bytes. It is the one way nxdns reads a file the configuration
// names, so that none of them can hang or exhaust the process:
//
//   - the file is opened with O_NONBLOCK, so opening a FIFO with no writer
//     returns at once instead of waiting for one, and then fails the
//     regular-file check (a FIFO, a device such as /dev/zero, a socket or a
//     directory is refused with a clear error before any byte is read);
//   - the check is made on the opened descriptor (fstat), not on the path,
//     so the file checked is the file read;
//   - at most limit+1 bytes are read, so a huge (or growing) file costs
//     limit bytes of memory and an error, never more.
//
// Errors name the path.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err // *fs.PathError names the path and the reason
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("not a regular file (%s)", kind(st.Mode()))}
	}
	if st.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%d bytes, over the %d-byte limit", st.Size(), limit)}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit { // it grew since fstat
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("over the %d-byte limit", limit)}
	}
	return b, nil
}

// kind names a non-regular file's type for the error message.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}

// errNotAbsolute is a ca_file given relative: under systemd the working
// directory is /, not the configuration's directory, so a relative path
// would mean different files to `nxdns check` and the service.
var errNotAbsolute = errors.New("is not an absolute path")

// ReadFiles reads every file c names — today each upstream's ca_file — once
// (ReadFile), keeps the content in c (UpstreamURL.CA) for the transports to
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
		pem, err := readCAFile(u.CAFile)
		if err != nil {
			ps.add(fmt.Sprintf("upstreams[%d].ca_file", i), CodeCAFile, "%v", err)
			continue
		}
		u.CA = pem
	}
	return ps
}

func readCAFile(path string) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%q %w", path, errNotAbsolute)
	}
	pem, err := ReadFile(path, MaxCAFileSize)
	if err != nil {
		return nil, err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pem, nil
}
