package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/safefile"
)

// The reload status file (docs/operations.md, "Reloading"): `nxdns run
// --reload-status FILE` writes it at start and around every SIGHUP reload,
// and `nxdns reload` reads it, so that the unit's ExecReload — and with it
// `systemctl reload` — fails when nxdns rejects the file or cannot apply
// it, instead of returning 0 as soon as the signal is sent (issue 30
// finding 3).

// reloadStatus is the file's content: counts of reloads begun and ended,
// and the outcome of the last one that ended.
type reloadStatus struct {
	Started uint64 `json:"started"`
	Done    uint64 `json:"done"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}

// maxStatusFile bounds what `nxdns reload` reads: the error is one line of
// a few hundred bytes.
const maxStatusFile = 64 << 10

// writeStatus replaces path's content at once (a temporary file renamed over
// it), so a reader never sees half a status. "" writes nothing.
func writeStatus(path string, st reloadStatus) error {
	if path == "" {
		return nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".reload-status-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

func readStatus(path string) (reloadStatus, error) {
	var st reloadStatus
	b, err := safefile.ReadFile(path, maxStatusFile)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: not a reload status: %w", path, err)
	}
	return st, nil
}

// reloadWait is how long `nxdns reload` waits for the outcome by default:
// longer than a reload can take when it checks a history file in a child
// process (history.CheckTimeout; at a reload that opens the file, or at
// each reload while a file that did not open is tried again), so a slow
// check is not reported as a failed reload the daemon then applies, and
// shorter than systemd's default reload timeout (TimeoutStartSec, 90 s),
// so the command, not systemd, says what happened.
const reloadWait = history.CheckTimeout + 25*time.Second

// statusPoll is how often `nxdns reload` reads the status while it waits.
const statusPoll = 50 * time.Millisecond

// cmdReload sends SIGHUP to a running `nxdns run --reload-status FILE` and
// waits for that reload's outcome: exit 0 once it is applied, 1 with the
// reason when it was rejected or failed, or when no outcome came within
// --timeout.
func cmdReload(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	set := flag.NewFlagSet("reload", flag.ContinueOnError)
	pid := set.Int("pid", 0, "the process id of `nxdns run` (systemd: $MAINPID)")
	status := set.String("status", "", "the file given to nxdns run --reload-status")
	timeout := set.Duration("timeout", reloadWait, "how long to wait for the reload's outcome")
	if code, ok := parseFlags(set, args, stderr); !ok {
		return code
	}
	if *pid <= 0 || *status == "" {
		fmt.Fprintf(stderr, "nxdns reload: --pid and --status are required\n")
		return exitUsage
	}
	before, err := readStatus(*status)
	if err != nil {
		fmt.Fprintf(stderr, "nxdns reload: %v (does nxdns run with --reload-status %s?)\n", err, *status)
		return exitProblems
	}
	// A reload running now ends without this signal; the daemon then runs
	// one more, which reads the file as it is now.
	want := before.Done + 1
	if before.Started > before.Done {
		want = before.Started + 1
	}
	if err := syscall.Kill(*pid, syscall.SIGHUP); err != nil {
		fmt.Fprintf(stderr, "nxdns reload: signal process %d: %v\n", *pid, err)
		return exitProblems
	}
	deadline := time.NewTimer(*timeout)
	defer deadline.Stop()
	tick := time.NewTicker(statusPoll)
	defer tick.Stop()
	for {
		st, err := readStatus(*status)
		switch {
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(stderr, "nxdns reload: %v\n", err)
			return exitProblems
		case err == nil && st.Done >= want && st.OK:
			fmt.Fprintf(stdout, "nxdns: reloaded\n")
			return exitOK
		case err == nil && st.Done >= want:
			fmt.Fprintf(stderr, "nxdns: reload failed; the running configuration stays: %s\n", st.Error)
			return exitProblems
		}
		if syscall.Kill(*pid, 0) != nil {
			fmt.Fprintf(stderr, "nxdns reload: process %d is gone\n", *pid)
			return exitProblems
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			fmt.Fprintf(stderr, "nxdns reload: no outcome within %v (the reload may still be running; see the log)\n", *timeout)
			return exitProblems
		case <-ctx.Done():
			return exitProblems
		}
	}
}
