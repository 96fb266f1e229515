// Command nxdns-pathemu puts an emulated network path in front of a server
// on loopback: it relays TCP connections and UDP datagrams from -listen to
// -to, delaying each direction by half of -rtt (plus -jitter), and drops UDP
// datagrams with probability -loss. TCP and TLS handshakes through it cost
// their real round trips. See docs/reference/tools.md; the logic lives in
// internal/pathemu.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/nxdns/nxdns/internal/pathemu"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run relays until SIGTERM or SIGINT.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return serve(ctx, args, stdout, stderr)
}

// serve relays until ctx ends. It prints the listen address (TCP and UDP
// share the port) on stdout once the relay is up, so a script that passed
// port 0 can read it.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nxdns-pathemu", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "host:port to listen on, TCP and UDP (port 0 picks one)")
	to := fs.String("to", "", "host:port of the server behind the path (required)")
	var p pathemu.Path
	fs.DurationVar(&p.RTT, "rtt", 0, "round trip the path adds, e.g. 30ms")
	fs.DurationVar(&p.Jitter, "jitter", 0, "extra one-way delay drawn uniformly from [0, jitter) per delivery")
	fs.Float64Var(&p.Loss, "loss", 0, "probability in [0, 1] that a UDP datagram is dropped, each direction")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *to == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: nxdns-pathemu -to HOST:PORT [-listen HOST:PORT] [-rtt D] [-jitter D] [-loss P]")
		return 2
	}
	r, err := pathemu.Start(*listen, *to, p)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintln(stdout, r.Addr)
	<-ctx.Done()
	if err := r.Close(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
