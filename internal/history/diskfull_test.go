package history

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

const fullEnv = "NXDNS_HISTORY_FULL_CHILD"

// TestHistory_fullDiskDegradesAndRecovers runs a child whose file size
// limit (RLIMIT_FSIZE, what a full disk looks like to write(2): the write
// fails) stops the store from growing. The failing flush must be counted
// and reported, Record must keep working, and once the limit is lifted the
// next flush writes again and the problem clears. The store is intact
// throughout.
func TestHistory_fullDiskDegradesAndRecovers(t *testing.T) {
	if path := os.Getenv(fullEnv); path != "" {
		fullChild(path)
		return
	}
	path := filePath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHistory_fullDiskDegradesAndRecovers$")
	cmd.Env = append(os.Environ(), fullEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "child ok") {
		t.Fatalf("child did not finish:\n%s", out)
	}
	k, err := openBolt(path, 1<<30)
	if err != nil {
		t.Fatalf("the store after the full disk: %v", err)
	}
	k.close()
}

func fullChild(path string) {
	fail := func(f string, a ...any) { fmt.Printf(f+"\n", a...); os.Exit(1) }
	signal.Ignore(syscall.SIGXFSZ) // the write fails with EFBIG instead of killing us
	h := Open(Options{Path: path, MaxBytes: 1 << 30, MaxAge: 24 * time.Hour, Flush: time.Hour})
	for i := range 100 {
		h.Record(event(time.Now(), i))
	}
	h.Flush()
	if h.Problem() != "" {
		fail("first flush: %s", h.Problem())
	}
	fi, _ := os.Stat(path)
	var old syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old)
	lim := syscall.Rlimit{Cur: uint64(fi.Size()), Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fail("setrlimit: %v", err)
	}
	for i := range 20000 { // more than the file's free pages hold
		h.Record(event(time.Now(), i))
	}
	h.Flush()
	s := h.Snapshot()
	if h.Problem() == "" || s.WriteErrors == 0 || s.Lost != 20000 || !s.Degraded {
		fail("full: problem %q, %+v", h.Problem(), s)
	}
	h.Record(event(time.Now(), 1)) // Record still works
	syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
	h.Flush()
	if p := h.Problem(); p != "" {
		fail("after the disk has room again: %s", p)
	}
	p, err := h.Search(context.Background(), Filter{Limit: MaxLimit})
	if err != nil || len(p.Rows) != 101 {
		fail("rows %d (%v), want the 100 before and the 1 after", len(p.Rows), err)
	}
	h.Close()
	fmt.Println("child ok")
}
