package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/app"
	"github.com/nxdns/nxdns/internal/buildinfo"
	"github.com/nxdns/nxdns/internal/logging"
)

// cmdRun serves until ctx ends (SIGTERM or SIGINT); SIGHUP reloads.
func cmdRun(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (default: the built-in loopback configuration)")
	var listen listFlag
	fs.Var(&listen, "listen", "`IP:port` to serve DNS on, replacing dns.listen; repeat for several")
	statusPath := fs.String("reload-status", "", "write each reload's outcome to this `file`, for nxdns reload (reload.go)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	cfg, name, err := loadConfig(*path)
	if err == nil {
		err = cfg.OverrideListen(listen).Err()
	}
	if err != nil {
		fmt.Fprint(stderr, problemLines(name, err))
		return exitProblems
	}
	lvl, err := logging.ParseLevel(cfg.Log.Level)
	if err != nil {
		fmt.Fprintf(stderr, "nxdns: %v\n", err)
		return exitProblems
	}
	level := zap.NewAtomicLevelAt(lvl)
	opts := logging.FromEnv(level)
	opts.Out = stderr
	opts.Async = true // a stalled journald costs log lines, never queries (docs/design.md#log-never-blocks)
	log := logging.New(opts)
	// A reader of stderr that went away (journald restarted, a closed pipe)
	// must not kill the process: ignored, SIGPIPE becomes an EPIPE that the
	// logger counts as dropped lines (docs/design.md#log-never-blocks).
	signal.Ignore(syscall.SIGPIPE)
	defer log.Sync() //nolint:errcheck // stderr: nothing to do about a failed flush

	// Subscribe before starting, so a SIGHUP sent right after READY is never
	// lost to the default action (which would kill the process).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	a, err := app.Start(cfg, app.Options{Logger: log, Level: level, Listen: listen, HistoryCheck: historyCheck(log)})
	if err != nil {
		log.Error("start failed", zap.Error(err))
		return exitProblems
	}
	status := reloadStatus{OK: true}
	saveStatus := func() {
		if err := writeStatus(*statusPath, status); err != nil {
			log.Warn("reload status not written: nxdns reload cannot learn the outcome", zap.String("file", *statusPath), zap.Error(err))
		}
	}
	saveStatus()
	sd := app.NewSystemd(log)
	sd.Ready()
	log.Info("serving", zap.String("version", buildinfo.Get().String()), zap.String("config", name))

	// A reload runs off this loop, so SIGTERM is handled whatever a reload
	// meets (docs/design.md#file-reads: files are read off the signal-handling path). A SIGHUP
	// during a reload is kept and runs once that one ends.
	reloaded := make(chan error, 1) // buffered: a reload ending after SIGTERM does not block
	reloading, again := false, false
	reload := func() {
		reloading = true
		status.Started++
		saveStatus()
		sd.Reloading()
		go func() {
			reloaded <- a.ReloadFile(*path) // logs its own outcome; a bad file keeps the running configuration
		}()
	}
	for {
		select {
		case <-hup:
			switch {
			case *path == "":
				log.Warn("SIGHUP ignored: running the built-in configuration, there is no file to reload")
				status.Started++
				status.Done, status.OK, status.Error = status.Started, false, "running the built-in configuration: no file to reload"
				saveStatus()
			case reloading:
				again = true
			default:
				reload()
			}
		case err := <-reloaded:
			reloading = false
			sd.Ready() // before the status: nxdns reload returning means systemd has READY=1
			status.Done, status.OK, status.Error = status.Started, err == nil, ""
			if err != nil {
				status.Error = strings.ReplaceAll(err.Error(), "\n", "; ")
			}
			saveStatus()
			if again {
				again = false
				reload()
			}
		case <-sd.Watchdog():
			sd.Alive()
		case <-ctx.Done():
			sd.Stopping()
			// Every query already accepted gets its answer: the drain waits
			// as long as the longest budget (total_timeout_ms or
			// read_timeout_ms) plus a margin.
			bound := a.DrainBound()
			log.Info("stopping: draining queries in flight", zap.Duration("bound", bound))
			dctx, cancel := context.WithTimeout(context.Background(), bound)
			err := a.Shutdown(dctx)
			cancel()
			if err != nil {
				log.Warn("stopped with queries cut off at the drain bound", zap.Error(err))
			} else {
				log.Info("stopped")
			}
			return exitOK
		}
	}
}

// listFlag is a flag that may be given several times (--listen A --listen B).
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ", ") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}
