package history

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	crashEnv   = "NXDNS_HISTORY_CRASH_CHILD"
	crashBatch = 5000
)

// TestHistory_crashDuringFlushKeepsWholeBatches kills a writer process
// (SIGKILL, as a power cut or the OOM killer would) while it flushes, three
// times over the same file. After each kill the store must open without a
// problem, pass bbolt's consistency check and hold only whole batches: a
// flush is one transaction, all or nothing.
func TestHistory_crashDuringFlushKeepsWholeBatches(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	path := filePath(t)
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHistory_crashDuringFlushKeepsWholeBatches$")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		flushes := 0
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "flushing") {
				if flushes++; flushes == 3+round {
					cmd.Process.Signal(syscall.SIGKILL) // mid-flush: it announced the flush and started it
					break
				}
			}
		}
		cmd.Wait()
		if flushes != 3+round {
			t.Fatalf("round %d: the child announced %d flushes and exited", round, flushes)
		}

		k, err := openBolt(path, 1<<30) // runs tx.Check
		if err != nil {
			t.Fatalf("round %d: reopening after the kill: %v", round, err)
		}
		var rows int
		k.view(func(tx kvTx) error {
			c := tx.bucket(bucketRows).cursor()
			for key, _ := c.First(); key != nil; key, _ = c.Next() {
				rows++
			}
			return nil
		})
		k.close()
		if rows%crashBatch != 0 || rows < (2+round)*crashBatch {
			t.Fatalf("round %d: %d rows: want whole batches of %d, at least the %d committed before the kill", round, rows, crashBatch, 2+round)
		}
		t.Logf("round %d: %d rows after the kill", round, rows)
	}
}

// crashChild writes batches until it is killed.
func crashChild(path string) {
	h := Open(Options{Path: path, MaxBytes: 1 << 30, MaxAge: 1 << 62, Flush: time.Hour})
	if p := h.Problem(); p != "" {
		fmt.Fprintln(os.Stderr, p)
		os.Exit(3)
	}
	at := time.Now()
	for i := 0; ; i++ {
		for j := range crashBatch {
			h.Record(event(at, j))
			at = at.Add(time.Microsecond)
		}
		fmt.Printf("flushing %d\n", i)
		h.Flush()
	}
}
