package main

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// blockingGroup is the floor's other shape, -blocking: each SO_REUSEPORT
// socket is a blocking descriptor the runtime's poller never sees, read by
// its own goroutine locked to an OS thread, one datagram a recvfrom and
// one sendto each, as dnsdist's UDP threads do. The difference between the
// two floors is what Go's poller and scheduler cost a query on the machine
// (docs/performance.md "Answer cache", eighth pass).
type blockingGroup struct {
	fds     []int
	closing atomic.Bool
}

// listenBlocking opens n blocking sockets on addr (an IPv4 host:port)
// sharing it through SO_REUSEPORT.
func listenBlocking(addr string, n int) (*blockingGroup, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	if !ap.Addr().Unmap().Is4() {
		return nil, fmt.Errorf("-blocking listens on IPv4 only, not %s", addr)
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	g := &blockingGroup{}
	for range n {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			if err == nil {
				err = unix.Bind(fd, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())})
			}
			if err != nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			g.close()
			return nil, err
		}
		g.fds = append(g.fds, fd)
		if ap.Port() == 0 { // port 0 becomes the first socket's port
			sa, err := unix.Getsockname(fd)
			if err != nil {
				g.close()
				return nil, err
			}
			ap = netip.AddrPortFrom(ap.Addr(), uint16(sa.(*unix.SockaddrInet4).Port))
		}
	}
	return g, nil
}

// serve answers fd's datagrams until the group closes.
func (g *blockingGroup) serve(fd int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, 4096)
	for !g.closing.Load() {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || from == nil {
			continue // EINTR, or the shutdown's wake-up (checked above)
		}
		if reply, ok := answer(buf[:n]); ok {
			unix.Sendto(fd, reply, 0, from) // a lost answer is the client's timeout
		}
	}
}

// shutdown stops the group once ctx ends.
func (g *blockingGroup) shutdown(ctx context.Context) {
	<-ctx.Done()
	g.stop()
}

// stop wakes every blocked reader for good: closing a descriptor does not
// wake a thread blocked in recvfrom on Linux, but shutdown(2) does, even
// on an unconnected UDP socket (with ENOTCONN to the caller), and later
// reads return at once. Calling it again does nothing new.
func (g *blockingGroup) stop() {
	g.closing.Store(true)
	for _, fd := range g.fds {
		unix.Shutdown(fd, unix.SHUT_RDWR)
	}
}

func (g *blockingGroup) close() {
	for _, fd := range g.fds {
		unix.Close(fd)
	}
}
