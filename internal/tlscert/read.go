package tlscert

import "github.com/nxdns/nxdns/internal/safefile"

// maxFileSize bounds a certificate or key file. A full chain of four RSA-4096
// certificates is under 10 KiB; 1 MiB leaves room for any real file and keeps
// a mistaken path (a log, a disk image) from filling memory.
const maxFileSize = 1 << 20

// readFile reads a certificate or key file the way docs/design.md#file-reads asks, through the
// one reader of configuration-named files: only a regular file, at most
// maxFileSize bytes, never blocking on a FIFO.
func readFile(path string) ([]byte, error) { return safefile.ReadFile(path, maxFileSize) }
