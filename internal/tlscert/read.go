package tlscert

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// maxFileSize bounds a certificate or key file. A full chain of four RSA-4096
// certificates is under 10 KiB; 1 MiB leaves room for any real file and keeps
// a mistaken path (a log, a disk image) from filling memory.
const maxFileSize = 1 << 20

// readFile reads a configuration-named file the way SPEC §9 asks: only a
// regular file, at most maxFileSize bytes, never blocking. The open is
// non-blocking so a FIFO put in the file's place (between the check and the
// open) returns at once instead of waiting for a writer, and the type is
// checked again on the open descriptor.
func readFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err // *fs.PathError names the path
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, fi.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a certificate or key file", path, maxFileSize)
	}
	return b, nil
}
