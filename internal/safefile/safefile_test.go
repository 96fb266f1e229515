package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ReadFile reads a regular file within its limit whole, and refuses at once,
// with the reason, anything that could hang or exhaust the process.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("12345678"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(ok, 8); err != nil || string(b) != "12345678" {
		t.Fatalf("a file at the limit: %q, %v", b, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		path  string
		limit int64
		want  string
	}{
		"over the limit": {ok, 7, "8 bytes, over the 7-byte limit"},
		"a FIFO":         {fifo, 1 << 20, "not a regular file (a FIFO)"},
		"a device":       {"/dev/zero", 1 << 20, "not a regular file (a character device)"},
		"a directory":    {dir, 1 << 20, "not a regular file (a directory)"},
		"missing":        {filepath.Join(dir, "none"), 1 << 20, "no such file"},
	} {
		start := time.Now()
		_, err := ReadFile(c.path, c.limit)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", name, err, c.path, c.want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: took %v, want at once", name, d)
		}
	}
}
