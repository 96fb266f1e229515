package history

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// A damaged history file must never take DNS down (docs/history.md,
// "Degraded, never DNS"). bbolt cannot promise that in-process: garbage
// pages panic inside the freelist walk it runs at open in a goroutine of
// its own, where no recover of ours reaches, and a file shorter than its
// meta page says faults on the memory map (SIGBUS), which Go does not turn
// into a panic at all. So before the process opens a file, a child process
// opens it the same way and walks it (CheckFile, run as `nxdns
// history-check FILE`); a child that crashes or finds damage is the
// verdict, and the file is moved aside (quarantine) before a fresh store
// starts in its place.

// ErrCorrupt marks a file whose content is damaged: the check found a
// fault, bbolt refused its meta pages, or the checking process crashed.
var ErrCorrupt = errors.New("damaged store")

// Exit codes of the check subcommand (CheckExit, ExecCheck).
const (
	CheckOK      = 0 // the file opened and passed the consistency check
	CheckFailed  = 1 // the file could not be checked (locked, unreadable): not a verdict
	CheckCorrupt = 3 // the file is damaged
)

// CheckTimeout bounds the child's walk. A file at the largest packaged
// budget reads in seconds even from an SD card; a check that takes longer
// is not a verdict on the file, which is then left in place (the history
// runs in memory) rather than moved aside.
const CheckTimeout = 60 * time.Second

// keepCorrupt is how many moved-aside files are kept per path: the newest
// ones, so a file damaged again and again cannot fill the disk.
const keepCorrupt = 3

// CheckFile opens path read-only exactly as Open does (the freelist walk
// included) and runs bbolt's consistency check over every page. Damage
// found is wrapped in ErrCorrupt; any other error means the file could
// not be checked. It may crash the process on a damaged file: run it in a
// child (ExecCheck).
func CheckFile(path string) error {
	if fi, err := os.Stat(path); err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         time.Second, // another nxdns holding the file's lock
		ReadOnly:        true,
		PreLoadFreelist: true, // the walk a read-write open makes
		FreelistType:    bolt.FreelistMapType,
	})
	if err != nil {
		if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return err
	}
	defer db.Close()
	k := &boltKV{db: db}
	if err := k.check(); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return nil
}

// CheckExit is the check subcommand's exit code for CheckFile's result.
func CheckExit(err error) int {
	switch {
	case err == nil:
		return CheckOK
	case errors.Is(err, ErrCorrupt):
		return CheckCorrupt
	}
	return CheckFailed
}

// ExecCheck returns a Precheck that runs `exe history-check path` and
// reads its verdict: nil for a sound file, an error wrapping ErrCorrupt
// for a damaged one (the child said so, or crashed: a Go panic or fatal
// fault, or a fault signal), any other error when the file could not be
// checked (the child could not start or ended otherwise, or took longer
// than CheckTimeout).
func ExecCheck(exe string) func(path string) error {
	return func(path string) error {
		ctx, cancel := context.WithTimeout(context.Background(), CheckTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, exe, "history-check", path)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		said := verdictLine(out.String())
		var exit *exec.ExitError
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("checking %s took longer than %v; left in place", path, CheckTimeout)
		case !errors.As(err, &exit):
			return fmt.Errorf("checking %s: %w", path, err)
		case exit.ExitCode() == CheckFailed:
			return fmt.Errorf("checking %s: %s", path, said)
		case exit.ExitCode() == CheckCorrupt:
			return fmt.Errorf("%w: %s", ErrCorrupt, said)
		case crashed(exit, out.String()):
			return fmt.Errorf("%w: reading it crashed the checking process (%v: %s)", ErrCorrupt, err, said)
		}
		// Anything else (a binary without the subcommand, killed for
		// memory) says nothing about the file: it stays.
		return fmt.Errorf("checking %s: %v: %s", path, err, said)
	}
}

// crashed reports whether the child died of reading the file: a Go panic
// or fatal fault (exit 2 with the runtime's report), or a fault signal.
func crashed(exit *exec.ExitError, out string) bool {
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		switch ws.Signal() {
		case syscall.SIGBUS, syscall.SIGSEGV, syscall.SIGABRT:
			return true
		}
		return false
	}
	return exit.ExitCode() == 2 && (strings.Contains(out, "panic:") || strings.Contains(out, "fatal error:"))
}

// verdictLine is what the child said, at most 300 bytes: the line of its
// panic or fault if it crashed, else its last line (its error).
func verdictLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "unexpected fault") {
			return truncate(l, 300)
		}
	}
	return truncate(strings.TrimSpace(lines[len(lines)-1]), 300)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// corruptTime is the UTC time in a moved-aside file's name; it sorts as
// the time.
const corruptTime = "20060102T150405.000Z"

// quarantine moves the damaged file at path aside as
// path.corrupt-<UTC time>, keeping only the newest keepCorrupt of them,
// and returns the new name. Only names of that exact form are counted and
// removed: another file beside it (path.corrupt-notes) is not ours, and the
// path itself is never read as a pattern (a directory named "nxdns[1]").
func quarantine(path string, now time.Time) (string, error) {
	aside := path + ".corrupt-" + now.UTC().Format(corruptTime)
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("moving the damaged file aside: %w", err)
	}
	dir, prefix := filepath.Dir(path), filepath.Base(path)+".corrupt-"
	entries, _ := os.ReadDir(dir)
	var old []string
	for _, e := range entries {
		stamp, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if _, err := time.Parse(corruptTime, stamp); err == nil {
			old = append(old, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(old) // the time in the name sorts as the time
	for len(old) > keepCorrupt {
		os.Remove(old[0])
		old = old[1:]
	}
	return aside, nil
}
