package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/buildinfo"
	"github.com/nxdns/nxdns/internal/logging"
)

// cmdRun serves until ctx ends (SIGTERM or SIGINT).
func cmdRun(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (default: the built-in loopback configuration)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	cfg, name, err := loadConfig(*path)
	if err != nil {
		fmt.Fprint(stderr, problemLines(name, err))
		return exitProblems
	}
	lvl, err := logging.ParseLevel(cfg.Log.Level)
	if err != nil {
		fmt.Fprintf(stderr, "nxdns: %v\n", err)
		return exitProblems
	}
	opts := logging.FromEnv(zap.NewAtomicLevelAt(lvl))
	opts.Out = stderr
	log := logging.New(opts)
	defer log.Sync() //nolint:errcheck // stderr: nothing to do about a failed flush
	log.Info("serving", zap.String("version", buildinfo.Get().String()), zap.String("config", name))
	<-ctx.Done()
	log.Info("stopped")
	return exitOK
}
