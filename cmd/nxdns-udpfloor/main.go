// Command nxdns-udpfloor answers every DNS query over UDP with the query
// itself, marked as a response, and does nothing else: no DNS library, no
// cache, no logging. It is the latency floor of a Go UDP server on the
// machine it runs on, for scripts/cache-perf.sh to print beside nxdns and
// its peers: what nxdns's cache hits cost above it is nxdns's, what is
// below it the Go runtime's (docs/performance.md "Answer cache").
//
// It reads each socket from one goroutine, as nxdns's readers do, with one
// SO_REUSEPORT socket per processor. With -blocking it reads blocking
// sockets from locked OS threads instead, as dnsdist does (blocking.go):
// the difference is what Go's poller costs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

// run serves until SIGTERM or SIGINT.
func run(args []string, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fs := flag.NewFlagSet("nxdns-udpfloor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:5353", "UDP `ADDR` (host:port) to answer on")
	sockets := fs.Int("sockets", runtime.GOMAXPROCS(0), "SO_REUSEPORT sockets, one reader each")
	blocking := fs.Bool("blocking", false, "blocking sockets outside the runtime's poller, each read by a locked OS thread (IPv4 only)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 || *sockets < 1 {
		fmt.Fprintln(stderr, "nxdns-udpfloor: usage: nxdns-udpfloor [-listen ADDR] [-sockets N] [-blocking]")
		return exitUsage
	}
	if *blocking {
		g, err := listenBlocking(*listen, *sockets)
		if err != nil {
			fmt.Fprintf(stderr, "nxdns-udpfloor: %v\n", err)
			return exitFail
		}
		var wg sync.WaitGroup
		for _, fd := range g.fds {
			wg.Go(func() { g.serve(fd) })
		}
		g.shutdown(ctx)
		wg.Wait()
		g.close()
		return exitOK
	}
	conns, err := listenGroup(ctx, *listen, *sockets)
	if err != nil {
		fmt.Fprintf(stderr, "nxdns-udpfloor: %v\n", err)
		return exitFail
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { serve(c) })
	}
	<-ctx.Done()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	return exitOK
}

// listenGroup opens n sockets on addr sharing it through SO_REUSEPORT.
func listenGroup(ctx context.Context, addr string, n int) ([]*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	var conns []*net.UDPConn
	for range n {
		pc, err := lc.ListenPacket(ctx, "udp", addr)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		conns = append(conns, pc.(*net.UDPConn))
		addr = pc.LocalAddr().String() // port 0 becomes the first socket's port
	}
	return conns, nil
}

// serve answers c's datagrams until c is closed.
func serve(c *net.UDPConn) {
	buf := make([]byte, 4096)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if reply, ok := answer(buf[:n]); ok {
			c.WriteToUDPAddrPort(reply, from) // a lost answer is the client's timeout, as in any server
		}
	}
}

// answer turns a query into its response in place: QR and RA set, opcode
// and RD kept, rcode NOERROR, the question echoed with no records. Anything
// shorter than a header, or already a response, gets nothing.
func answer(msg []byte) ([]byte, bool) {
	if len(msg) < 12 || msg[2]&0x80 != 0 {
		return nil, false
	}
	msg[2] = msg[2]&0x79 | 0x80 // QR; opcode and RD kept, AA and TC cleared
	msg[3] = 0x80               // RA, NOERROR
	return msg, true
}
