// Command nxdns-burst fires waves of concurrent unique-name queries (or a
// fixed query rate) at a resolver and prints one JSON report: latencies,
// rcodes, Extended DNS Errors and the staircase ratio of docs/design.md#burst-staircase. See
// docs/reference/tools.md; the logic lives in internal/burst.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/burst"
)

// Exit codes: a completed run exits 0 even with SERVFAILs, since callers
// assert on the JSON.
const (
	exitOK    = 0
	exitFail  = 1 // the run could not happen or was interrupted
	exitUsage = 2 // bad flags
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run stops early on SIGTERM or SIGINT, printing no report (exit 1).
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return runContext(ctx, args, stdout, stderr)
}

const usageText = `usage: nxdns-burst -target HOST:PORT [flags]

Sends -waves bursts of -n concurrent queries for unique names
"<random run prefix>-<i>.<suffix>" (or, with -rate and -duration, a fixed
query rate), after -baseline single queries on the idle target, and prints
one JSON object on stdout. Exit 0 when the run completed (whatever the
rcodes), 1 when it could not run or was interrupted, 2 on bad flags.

Example:
  nxdns-burst -target 127.0.0.1:53 -n 30 -timeout 5s

Flags:
`

type typeFlag uint16

func (t *typeFlag) String() string { return dns.TypeToString[uint16(*t)] }
func (t *typeFlag) Set(v string) error {
	code, ok := dns.StringToType[strings.ToUpper(v)]
	if !ok {
		return fmt.Errorf("unknown type %q", v)
	}
	*t = typeFlag(code)
	return nil
}

func parseFlags(args []string, stderr io.Writer) (burst.Config, int) {
	cfg := burst.DefaultConfig()
	qtype := typeFlag(cfg.Type)
	fs := flag.NewFlagSet("nxdns-burst", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.Target, "target", "", "resolver under test, `HOST:PORT` (required)")
	fs.IntVar(&cfg.N, "n", cfg.N, fmt.Sprintf("concurrent unique-name queries per wave (1..%d)", burst.MaxN))
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "client-side timeout per query (glibc's default is 5s)")
	fs.IntVar(&cfg.Waves, "waves", cfg.Waves, "number of bursts")
	fs.DurationVar(&cfg.WaveGap, "wave-gap", cfg.WaveGap, "pause between waves")
	fs.Float64Var(&cfg.Rate, "rate", 0, "fixed-rate mode: queries per second, instead of waves (needs -duration)")
	fs.DurationVar(&cfg.Duration, "duration", 0, fmt.Sprintf("fixed-rate mode length (at most %v)", burst.MaxDuration))
	fs.IntVar(&cfg.Baseline, "baseline", cfg.Baseline, "sequential queries on the idle target before the burst; 0 disables the staircase ratio")
	fs.StringVar(&cfg.Suffix, "suffix", cfg.Suffix, "domain under which the query names are made")
	fs.Var(&qtype, "type", "query `TYPE`: A or AAAA (any type mnemonic works)")
	fs.BoolVar(&cfg.TCP, "tcp", false, "query over TCP instead of UDP (as -proto tcp)")
	fs.StringVar(&cfg.Proto, "proto", "udp", "`udp`, tcp, dot (one TLS connection, queries pipelined) or doq (one QUIC connection, a stream per query)")
	fs.StringVar(&cfg.CAFile, "ca-file", "", "dot, doq: PEM `FILE` of the roots the server's certificate must chain to (default: the system's)")
	fs.StringVar(&cfg.TLSName, "tls-name", "", "dot, doq: the `NAME` verified in the certificate and sent as SNI (default: the target's host)")
	fs.BoolVar(&cfg.Insecure, "insecure", false, "dot, doq: do not verify the server's certificate (loopback measurements only)")
	fs.IntVar(&cfg.Distinct, "distinct", 0, "cycle the query names over `K` names, so every query after the first K repeats one (cache hits); 0: every name unique")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, exitOK
		}
		return cfg, exitUsage
	}
	cfg.Type = uint16(qtype)
	if err := check(fs, cfg); err != nil {
		fmt.Fprintf(stderr, "nxdns-burst: %v\n(nxdns-burst -h lists the flags)\n", err)
		return cfg, exitUsage
	}
	return cfg, -1
}

// check rejects positional arguments, wave flags given in fixed-rate mode
// (they would be silently ignored), and whatever Config.Validate rejects.
func check(fs *flag.FlagSet, cfg burst.Config) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var errs []error
	if cfg.Rate != 0 {
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "n", "waves", "wave-gap":
				errs = append(errs, fmt.Errorf("-%s: a wave flag, not allowed with -rate", f.Name))
			}
		})
	}
	errs = append(errs, cfg.Validate())
	return errors.Join(errs...)
}

func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code := parseFlags(args, stderr)
	if code >= 0 {
		return code
	}
	rep, err := burst.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "nxdns-burst: %v\n", err)
		return exitFail
	}
	if err := json.NewEncoder(stdout).Encode(rep); err != nil {
		fmt.Fprintf(stderr, "nxdns-burst: %v\n", err)
		return exitFail
	}
	return exitOK
}
