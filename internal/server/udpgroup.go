package server

import (
	"context"
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenUDP binds n UDP sockets to addr as one SO_REUSEPORT group: the
// kernel spreads the clients over them (by address and port), and each
// socket has a reader of its own. Readers sharing one socket pass its read
// lock to each other on every datagram, waking a second goroutine and
// often a second thread for each; that cost a cache hit more latency than
// anything else left on its path (docs/performance.md "Answer cache").
//
// Guarantee: an address another socket holds fails as it does without the
// group. The address is first bound alone, without SO_REUSEPORT, which the
// kernel refuses whatever options the holder set; only then is it bound
// again as the group, so nxdns does not quietly share a port another
// process holds. Only a process of nxdns's own user binding the port with
// SO_REUSEPORT in the moment between the two binds could join the group
// (under the NixOS module nxdns's user is its own, DynamicUser). Where the
// kernel refuses the group, one socket is bound as before. The first socket
// is the listener's address for every other use (worker answers, Addrs).
func listenUDP(ctx context.Context, network, addr string, n int) ([]*net.UDPConn, error) {
	var plain net.ListenConfig
	pc, err := plain.ListenPacket(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	first := pc.(*net.UDPConn)
	if n <= 1 {
		return []*net.UDPConn{first}, nil
	}
	bound := first.LocalAddr().String() // the port the kernel chose for ":0"
	first.Close()
	group := net.ListenConfig{Control: reusePort}
	conns := make([]*net.UDPConn, 0, n)
	for range n {
		c, err := group.ListenPacket(ctx, network, bound)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			if len(conns) == 0 && errors.Is(err, syscall.ENOPROTOOPT) {
				return listenUDP(ctx, network, bound, 1)
			}
			return nil, err
		}
		conns = append(conns, c.(*net.UDPConn))
	}
	return conns, nil
}

// reusePort sets SO_REUSEPORT on a socket before it is bound.
func reusePort(_, _ string, rc syscall.RawConn) error { return setSocketOption(rc, unix.SO_REUSEPORT) }
