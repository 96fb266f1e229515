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
// instead of waiting for a writer (docs/design.md#file-reads: never hangs a reload).
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

// TestUpdate_metaFileThatIsNoRegularFileIsRefused: a list's
// state_dir/NAME.meta.json that is a FIFO with no writer, or /dev/zero, is
// refused before any byte is read (safefile.ReadFile): the update returns
// at once and the list serves its copy on disk; before, the FIFO hung start
// with the engine's lock held and /dev/zero grew memory without end.
func TestUpdate_metaFileThatIsNoRegularFileIsRefused(t *testing.T) {
	for _, tc := range []struct {
		what string
		make func(path string) error
	}{
		{"a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"/dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"a symlink to a FIFO", func(p string) error {
			fifo := p + ".fifo"
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				return err
			}
			return os.Symlink(fifo, p)
		}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			dir := t.TempDir()
			writeList(t, dir, "remote.list", "0.0.0.0 ads.example\n")
			meta := filepath.Join(dir, "remote.meta.json")
			if err := tc.make(meta); err != nil {
				t.Fatal(err)
			}
			e := New(Options{})
			done := make(chan struct{})
			go func() {
				// A URL no one answers: the download fails, the disk copy serves.
				e.Update(urlCfg(dir, "http://127.0.0.1:1/list.txt"))
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				if f, err := os.OpenFile(meta, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close() // let a stuck open of the FIFO return, so the test can end
				}
				t.Fatalf("Update did not return with %s as the meta file", tc.what)
			}
			defer e.Close()
			if !blocks(e, "ads.example") {
				t.Error("the copy on disk does not serve")
			}
		})
	}
}
