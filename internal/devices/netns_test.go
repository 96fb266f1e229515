package devices

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// The neighbour tests build a small LAN of their own: two network
// namespaces joined by a veth pair whose ends carry fixed MAC addresses.
// The "router" namespace holds the table nxdns reads; the "phone" side
// answers its ARP and NDP. Nothing leaves the namespaces.

var netnsSeq atomic.Uint32

type lan struct {
	t        *testing.T
	router   string // namespace whose neighbour table is read
	phone    string // namespace of the device
	routerIf string
	phoneMAC string
	phone4   netip.Addr
	phone6   netip.Addr
}

// needRoot skips a test that creates network namespaces when it cannot.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the neighbour-table tests create network namespaces and veth pairs (ip netns add)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip to build the test namespaces")
	}
}

func run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newLAN makes the two namespaces and the veth pair; t.Cleanup removes them
// (deleting a namespace deletes the veth ends in it).
func newLAN(t *testing.T) *lan {
	needRoot(t)
	id := fmt.Sprintf("%d-%d", os.Getpid()%100000, netnsSeq.Add(1))
	l := &lan{
		t:        t,
		router:   "nxdr-" + id,
		phone:    "nxdp-" + id,
		routerIf: "vr",
		phoneMAC: "02:00:5e:10:00:02",
		phone4:   netip.MustParseAddr("10.99.0.2"),
		phone6:   netip.MustParseAddr("fd00:99::2"),
	}
	run(t, "netns", "add", l.router)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.router).Run() })
	run(t, "netns", "add", l.phone)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.phone).Run() })
	run(t, "-n", l.router, "link", "add", "vr", "address", "02:00:5e:10:00:01", "type", "veth",
		"peer", "name", "vp", "address", l.phoneMAC, "netns", l.phone)
	for _, c := range [][]string{
		{"-n", l.router, "addr", "add", "10.99.0.1/24", "dev", "vr"},
		{"-n", l.router, "addr", "add", "fd00:99::1/64", "dev", "vr", "nodad"},
		{"-n", l.router, "link", "set", "vr", "up"},
		{"-n", l.phone, "addr", "add", "10.99.0.2/24", "dev", "vp"},
		{"-n", l.phone, "addr", "add", "fd00:99::2/64", "dev", "vp", "nodad"},
		{"-n", l.phone, "link", "set", "vp", "up"},
	} {
		run(t, c...)
	}
	return l
}

// inNetns runs fn on a thread moved into namespace name. The thread is
// locked and, if it cannot be moved back, dies with its goroutine rather
// than serve other goroutines from the wrong namespace.
func inNetns(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + name)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", name, err)
			return
		}
		ferr := fn()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// opener opens the NETLINK_ROUTE sockets of the router's namespace.
func (l *lan) opener() func() (int, error) {
	return func() (int, error) {
		fd := -1
		err := inNetns(l.router, func() error {
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
func (l *lan) poke(dst netip.Addr) {
	l.t.Helper()
	err := inNetns(l.router, func() error {
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
		l.t.Fatalf("sending to %s: %v", dst, err)
	}
}
