// Command nxdns is the DNS forwarder: `run` serves, `check` validates a
// configuration (and with --probe queries each upstream), `version` says
// which build this is. Flags and wiring only; the work is in internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/nxdns/nxdns/internal/buildinfo"
)

const usage = `usage: nxdns <command> [flags]

commands:
  run     [--config FILE] [--listen IP:PORT]... [--reload-status FILE]
                                     serve DNS (built-in config on 127.0.0.1:5300 and [::1]:5300
                                     without --config; --listen replaces dns.listen; --reload-status
                                     writes each reload's outcome for nxdns reload)
  check   [--config FILE] [--probe]  validate a configuration; --probe also queries each upstream and zone resolver
          [--files]                  --files: also read web.password_file and the [tls] pair, as a reload does
          [--tls [--tls-name NAME]]  --tls: will Android's Private DNS accept the DoT certificate?
  reload  --pid PID --status FILE    reload a running nxdns run --reload-status FILE and wait for the outcome
                                     (exit 1 when it was rejected)
  lists refresh [--config FILE]      ask the running nxdns to download its lists now (--name LIST: one);
                [--name LIST]        with web.password_file, the password is prompted for (or read from stdin)
  version                            print the version and commit
  export  --format ndjson|csv (--config FILE | --history FILE | --url URL --token-file FILE)
          [--from T] [--to T] [--client C] [--name N] [--source S] [--rcode R]
                                     write the query log to stdout (a stopped nxdns's file, or a running one's API)
  token   add NAME --scope read|control | list | revoke NAME  (--config FILE | --state-dir DIR)
                                     API tokens for scripts and Home Assistant (printed once, kept hashed)
  hash-password                      prompt for a password (8 characters or more; read from stdin when piped), print the hash for web.password_file

Run 'nxdns <command> -h' for a command's flags.
`

// exit codes
const (
	exitOK       = 0
	exitProblems = 1 // invalid configuration, failed probe, failed start
	exitUsage    = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stderr)
	case "check":
		return cmdCheck(ctx, args[1:], stdout, stderr)
	case "history-check": // hidden: run starts it (historycheck.go)
		return cmdHistoryCheck(args[1:], stderr)
	case "reload":
		return cmdReload(ctx, args[1:], stdout, stderr)
	case "export":
		return cmdExport(ctx, args[1:], stdout, stderr)
	case "token":
		return cmdToken(args[1:], stdout, stderr)
	case "hash-password":
		return cmdHashPassword(args[1:], os.Stdin, stdout, stderr)
	case "lists":
		return cmdLists(ctx, args[1:], os.Stdin, stdout, stderr)
	case "version":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "nxdns version takes no arguments\n\n%s", usage)
			return exitUsage
		}
		fmt.Fprintln(stdout, buildinfo.Get())
		return exitOK
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "nxdns: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// parseFlags parses a subcommand's flags; ok false means the caller returns
// code (usage errors exit 2, -h exits 0).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nxdns %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage, false
	}
	return 0, true
}
