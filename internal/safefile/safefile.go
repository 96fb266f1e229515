// Package safefile is the one reader of the files nxdns's configuration
// names (docs/design.md#robustness: read once, with a size cap, only if they are
// regular files). A leaf with no internal imports, so config (which imports
// nothing internal but leaves like this), tlscert and cache share it; each
// caller keeps its own size cap.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ReadFile reads the named file whole, once, if it is a regular file of at
// most limit bytes. It is the one way nxdns reads a file the configuration
// names (the file itself, ca_file, the serving certificate and key, the
// cache file), so that none of them can hang or exhaust the process:
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
	f, err := Open(path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit { // it grew since fstat
		return nil, &fs.PathError{Op: "read", Path: path, Err: tooLarge(fmt.Sprintf("over the %d-byte limit", limit))}
	}
	return b, nil
}

// Open opens the named file for reading with ReadFile's checks (O_NONBLOCK,
// a regular file by fstat, at most limit bytes now), for a reader that
// streams it rather than holding it whole (a filter list); the reader
// keeps to limit itself, as the file may grow after the check.
func Open(path string, limit int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err // *fs.PathError names the path and the reason
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("not a regular file (%s)", kind(st.Mode()))}
	}
	if st.Size() > limit {
		f.Close()
		return nil, &fs.PathError{Op: "read", Path: path, Err: tooLarge(fmt.Sprintf("%d bytes, over the %d-byte limit", st.Size(), limit))}
	}
	return f, nil
}

// ErrTooLarge is what errors.Is finds in the error for a file over its
// limit, so a caller can answer with its own message.
var ErrTooLarge = errors.New("over the size limit")

// tooLarge is the size error: its own words, and Is ErrTooLarge.
type tooLarge string

func (e tooLarge) Error() string        { return string(e) }
func (e tooLarge) Is(target error) bool { return target == ErrTooLarge }

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

// WriteFile replaces the named file with data atomically: a temporary file
// in the same directory, written and synced with mode perm, then renamed
// over path, and the directory synced. A crash leaves the old file or the
// new one, never half of one; a reader (ReadFile) sees one or the other.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil { // the rename itself survives a power cut
		d.Sync()
		d.Close()
	}
	return nil
}
