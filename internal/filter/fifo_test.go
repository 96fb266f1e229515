package filter

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/config"
)

// TestUpdate_fifoListFailsAtOnce: a list path that is a FIFO with no
// writer fails that list with a clear error; the update returns at once
// instead of waiting for a writer (SPEC §9: never hangs a reload).
func TestUpdate_fifoListFailsAtOnce(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.list")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	e := New(Options{})
	done := make(chan struct{})
	go func() {
		e.Update(config.Filter{Lists: []config.FilterList{{Name: "fifo", Path: fifo}}})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		f, _ := os.OpenFile(fifo, os.O_WRONLY, 0) // let the stuck open return, so the test can end
		f.Close()
		<-done
		t.Fatal("Update waited for a writer of a FIFO list")
	}
	e.Close()
	if l := e.Snapshot().Lists[0]; !strings.Contains(l.Error, "not a regular file") {
		t.Errorf("FIFO list error %q", l.Error)
	}
}
