package main

import (
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/history"
)

// cmdHistoryCheck is the hidden `nxdns history-check FILE`: it opens the
// history file read-only as `run` would and walks every page, in a process
// of its own, so that a damaged file can crash only this one
// (docs/history.md, "Degraded, never DNS"). `run` starts it before opening
// the file and reads its exit code (history.CheckExit; a crash means
// damaged).
func cmdHistoryCheck(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: nxdns history-check FILE")
		return exitUsage
	}
	err := history.CheckFile(args[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
	}
	return history.CheckExit(err)
}

// historyCheck is the check `run` hands the history: this binary, run
// again as history-check. Without a path to itself the file is opened
// unchecked, and the log says so.
func historyCheck(log *zap.Logger) func(string) error {
	exe, err := os.Executable()
	if err != nil {
		log.Warn("the history file will be opened unchecked", zap.Error(err))
		return nil
	}
	return history.ExecCheck(exe)
}
