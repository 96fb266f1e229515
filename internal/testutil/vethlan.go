package testutil

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// VethLAN is a small LAN of a test's own: two named network namespaces
// ("router" and "phone") joined by a veth pair whose ends carry fixed MAC
// addresses, with IPv4 and IPv6 addresses (IPv6 without duplicate address
// detection, so they work at once). The router's neighbour table learns the
// phone's real MAC by ARP and NDP as soon as the two talk. Nothing leaves
// the namespaces.
type VethLAN struct {
	Router, Phone     string // namespace names (ip netns)
	RouterIf, PhoneIf string // the veth ends
	PhoneMAC          string
	Router4, Phone4   netip.Addr // 10.99.0.1, 10.99.0.2 (/24)
	Router6, Phone6   netip.Addr // fd00:99::1, fd00:99::2 (/64)
}

var vethSeq atomic.Uint32

// NewVethLAN builds the LAN; t.Cleanup deletes both namespaces (and the
// veth ends in them). It skips a test that is not root or lacks ip(8):
// named namespaces and veth pairs need both.
func NewVethLAN(t *testing.T) *VethLAN {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and a veth pair (ip netns add)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip to build the test namespaces")
	}
	id := fmt.Sprintf("%d-%d", os.Getpid()%100000, vethSeq.Add(1))
	l := &VethLAN{
		Router: "nxr-" + id, Phone: "nxp-" + id, RouterIf: "vr", PhoneIf: "vp",
		PhoneMAC: "02:00:5e:10:00:02",
		Router4:  netip.MustParseAddr("10.99.0.1"), Phone4: netip.MustParseAddr("10.99.0.2"),
		Router6: netip.MustParseAddr("fd00:99::1"), Phone6: netip.MustParseAddr("fd00:99::2"),
	}
	IP(t, "netns", "add", l.Router)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.Router).Run() })
	IP(t, "netns", "add", l.Phone)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.Phone).Run() })
	IP(t, "-n", l.Router, "link", "add", l.RouterIf, "address", "02:00:5e:10:00:01", "type", "veth",
		"peer", "name", l.PhoneIf, "address", l.PhoneMAC, "netns", l.Phone)
	for _, c := range [][]string{
		{"-n", l.Router, "addr", "add", l.Router4.String() + "/24", "dev", l.RouterIf},
		{"-n", l.Router, "addr", "add", l.Router6.String() + "/64", "dev", l.RouterIf, "nodad"},
		{"-n", l.Router, "link", "set", l.RouterIf, "up"},
		{"-n", l.Router, "link", "set", "lo", "up"},
		{"-n", l.Phone, "addr", "add", l.Phone4.String() + "/24", "dev", l.PhoneIf},
		{"-n", l.Phone, "addr", "add", l.Phone6.String() + "/64", "dev", l.PhoneIf, "nodad"},
		{"-n", l.Phone, "link", "set", l.PhoneIf, "up"},
	} {
		IP(t, c...)
	}
	return l
}

// RunInNetns runs fn on a thread moved into the named namespace. The thread
// is locked and, if it cannot be moved back, dies with its goroutine rather
// than serve other goroutines from the wrong namespace. A socket fn opens
// stays in that namespace.
func RunInNetns(name string, fn func() error) error {
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
