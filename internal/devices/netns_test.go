package devices

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nxdns/nxdns/internal/testutil"
)

// The neighbour tests read the table of testutil.VethLAN's router
// namespace: its veth peer, the "phone", answers ARP and NDP with a fixed
// MAC. Nothing leaves the namespaces.

// opener opens the NETLINK_ROUTE sockets of the router's namespace.
func opener(l *testutil.VethLAN) func() (int, error) {
	return func() (int, error) {
		fd := -1
		err := testutil.RunInNetns(l.Router, func() error {
			var err error
			fd, err = openRoute()
			return err
		})
		return fd, err
	}
}

// poke sends one UDP datagram from the router to dst (the discard port, no
// listener): the kernel resolves the phone's MAC by ARP or NDP first, as
// it does for any traffic.
func poke(t *testing.T, l *testutil.VethLAN, dst netip.Addr) {
	t.Helper()
	err := testutil.RunInNetns(l.Router, func() error {
		family := unix.AF_INET6
		var sa unix.Sockaddr = &unix.SockaddrInet6{Port: 9, Addr: dst.As16()}
		if dst.Is4() {
			family = unix.AF_INET
			sa = &unix.SockaddrInet4{Port: 9, Addr: dst.As4()}
		}
		fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Sendto(fd, []byte("nxdns"), 0, sa)
	})
	if err != nil {
		t.Fatalf("sending to %s: %v", dst, err)
	}
}
