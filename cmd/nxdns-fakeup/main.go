// Command nxdns-fakeup is the fake upstream resolver of the scenario tests:
// DoT, DoH, TCP and UDP listeners that answer any name with a deterministic
// synthetic address and misbehave as each -listen URL asks. See
// docs/reference/tools.md; the logic lives in internal/fakeup.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/fakeup"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // could not start: a bind, the CA
	exitUsage = 2 // bad flags
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run serves until SIGTERM or SIGINT, then prints the counters as one JSON
// line on stdout and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return serve(ctx, args, stdout, stderr)
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	listen        listFlag
	caCert, caKey string
	certNames     string
	ttl           uint64
	httpAddr      string
	needsCA       bool // a dot, doh or doq listener is configured
	usage         bool // config failed on a flag: exit 2, not 1
}

const usageText = `usage: nxdns-fakeup -listen URL [-listen URL ...] [flags]

A fake upstream DNS resolver for scenario tests. Answers any name: A with a
deterministic address in 198.18.0.0/15, AAAA in 2001:db8::/32, other types
NODATA. Exits 0 on SIGTERM or SIGINT, printing its counters as JSON.

Listen URLs (behaviour in the query, any listener unless noted):
  udp://HOST:PORT  tcp://HOST:PORT  dot://HOST:PORT  doh://HOST:PORT[/PATH]
  latency=DUR  jitter=DUR  stall=1  refuse=1  idle_close=DUR (tcp, dot, doh)
  handshake_delay=DUR (dot, doh)  tc=1  close_on_query=N (tcp, dot)
  hostile: ede_text=N  txt=N  tsig=1  endless=1 (tcp, dot)  slow_bytes=DUR (tcp, dot)

Example:
  nxdns-fakeup -listen 'dot://127.0.0.1:8853?latency=30ms' \
    -listen 'doh://127.0.0.1:8443/dns-query?stall=1' \
    -ca-cert ca.pem -ca-key ca.key -http 127.0.0.1:9100

Flags:
`

func parseFlags(args []string, stderr io.Writer) (*options, int) {
	o := &options{}
	fs := flag.NewFlagSet("nxdns-fakeup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.Var(&o.listen, "listen", "listener `URL`; repeat for several (required)")
	fs.StringVar(&o.caCert, "ca-cert", "", "CA certificate `FILE` (PEM); with -ca-key, generated and written if both are absent")
	fs.StringVar(&o.caKey, "ca-key", "", "CA private key `FILE` (PEM)")
	fs.StringVar(&o.certNames, "cert-names", strings.Join(fakeup.DefaultCertNames, ","), "comma-separated DNS names and IPs of the leaf certificate")
	fs.Uint64Var(&o.ttl, "ttl", fakeup.DefaultTTL, "TTL of synthetic answers, seconds")
	fs.StringVar(&o.httpAddr, "http", "", "`ADDR` (host:port) serving GET /counters and /healthz; empty disables")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK
		}
		return nil, exitUsage
	}
	if err := o.check(fs.Args()); err != nil {
		fmt.Fprintf(stderr, "nxdns-fakeup: %v\n(nxdns-fakeup -h lists the flags)\n", err)
		return nil, exitUsage
	}
	return o, -1
}

func (o *options) check(rest []string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q", rest[0])
	case len(o.listen) == 0:
		return errors.New("at least one -listen is required")
	case (o.caCert == "") != (o.caKey == ""):
		return errors.New("-ca-cert and -ca-key go together")
	case o.ttl > math.MaxInt32: // RFC 2181 §8
		return fmt.Errorf("-ttl %d: at most %d", o.ttl, math.MaxInt32)
	}
	for n := range strings.SplitSeq(o.certNames, ",") {
		if strings.TrimSpace(n) == "" {
			return fmt.Errorf("-cert-names %q: empty name", o.certNames)
		}
	}
	return nil
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code := parseFlags(args, stderr)
	if code >= 0 {
		return code
	}
	cfg, err := o.config(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "nxdns-fakeup: %v\n", err)
		if o.usage {
			return exitUsage
		}
		return exitFail
	}
	s, err := fakeup.Start(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "nxdns-fakeup: %v\n", err)
		return exitFail
	}
	<-ctx.Done()
	s.Close()
	if err := json.NewEncoder(stdout).Encode(s.Counters()); err != nil {
		fmt.Fprintf(stderr, "nxdns-fakeup: counters: %v\n", err)
		return exitFail
	}
	return exitOK
}

// config builds fakeup's Config from the flags. A problem in the flags sets
// o.usage, so the caller exits 2 rather than 1.
func (o *options) config(stderr io.Writer) (fakeup.Config, error) {
	cfg := fakeup.Config{TTL: uint32(o.ttl), HTTP: o.httpAddr, Log: stderr}
	for n := range strings.SplitSeq(o.certNames, ",") {
		cfg.CertNames = append(cfg.CertNames, strings.TrimSpace(n))
	}
	for _, u := range o.listen {
		l, err := fakeup.ParseListen(u)
		if err != nil {
			o.usage = true
			return cfg, err
		}
		o.needsCA = o.needsCA || l.Transport == fakeup.DoT || l.Transport == fakeup.DoH || l.Transport == fakeup.DoQ
		cfg.Listen = append(cfg.Listen, l)
	}
	if !o.needsCA {
		return cfg, nil
	}
	if o.caCert == "" {
		o.usage = true
		return cfg, errors.New("dot and doh listeners need -ca-cert and -ca-key")
	}
	ca, err := loadCA(o.caCert, o.caKey, stderr)
	cfg.CA = ca
	return cfg, err
}

func loadCA(certFile, keyFile string, stderr io.Writer) (*certs.CA, error) {
	ca, created, err := fakeup.LoadOrCreateCA(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	verb := "loaded"
	if created {
		verb = "created"
	}
	fmt.Fprintf(stderr, "ca %s cert=%s key=%s\n", verb, certFile, keyFile)
	return ca, nil
}
