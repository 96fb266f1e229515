package devices

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/nxdns/nxdns/internal/query"
)

// How the neighbour table is read (docs/decisions/neighbour-netlink.md):
// raw rtnetlink through golang.org/x/sys/unix, as internal/localnet reads
// the interfaces. One dump (RTM_GETNEIGH, AF_UNSPEC: ARP and NDP in one
// answer) at start, then the RTNLGRP_NEIGH notifications, each applied as
// it comes; a lost notification (ENOBUFS: the socket's queue overflowed)
// and every rescanInterval a fresh dump replaces the table, so a burst of
// changes never leaves it stale for long.

// DefaultMaxNeighbours bounds the table. A household has tens of devices,
// each with an IPv4 and a few IPv6 addresses (privacy addresses rotate, RFC
// 8981); a /64 flooded with probes makes the kernel itself hold thousands
// of incomplete entries, which are never stored. An entry is ~60 B.
const DefaultMaxNeighbours = 16384

// rescanInterval re-reads the whole table now and then, so that a missed
// deletion (a notification the kernel could not queue) ages out.
const rescanInterval = 10 * time.Minute

// dumpTimeout bounds one dump: the kernel answers in microseconds, so this
// is only a guard against a socket that never answers.
const dumpTimeout = 5 * time.Second

// Neighbour states (linux/neighbour.h NUD_*). An entry in one of
// unusableStates has no link-layer address to believe.
const (
	nudIncomplete  = 0x01
	nudFailed      = 0x20
	nudNoARP       = 0x40
	unusableStates = nudIncomplete | nudFailed | nudNoARP
)

// Neighbour attributes (linux/neighbour.h NDA_*).
const (
	ndaDst    = 1
	ndaLLAddr = 2
)

// ndmsgLen is sizeof(struct ndmsg): family, 3 bytes of padding, ifindex,
// state, flags, type.
const ndmsgLen = 12

// NeighbourStats counts what the table has seen since it started
// (docs/reference/metrics.md, nxdns_neighbour_*).
type NeighbourStats struct {
	Entries  int    // addresses with a MAC now
	Flaps    uint64 // an address that changed MAC (a renumbered LAN, or ARP spoofing)
	Dropped  uint64 // new addresses not stored because the table was full
	Rescans  uint64 // full re-reads (the first, ENOBUFS, the periodic one)
	Failures uint64 // dumps or reads that failed
}

// Neighbours is the kernel's neighbour table as address → MAC.
//
// Guarantees: MAC never waits for the kernel (a read lock and a map
// lookup); the table holds at most its bound of addresses, and one whose MAC
// changes ("flapping") takes the newest MAC at once and is counted; a
// deleted or failed entry is forgotten. Close stops following the table
// and waits for its goroutine.
type Neighbours struct {
	log  *zap.Logger
	max  int
	open func() (int, error) // a NETLINK_ROUTE socket, in the right namespace

	mu     sync.RWMutex
	byAddr map[netip.Addr]MAC

	flaps, dropped, rescans, failures atomic.Uint64

	sock *os.File // the subscription; nil when none could be opened
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	// onChange, when set, is told each address that gains or changes its
	// MAC (from the goroutine that follows the table).
	onChange func(netip.Addr, MAC)
}

// NeighbourOptions configures WatchNeighbours.
type NeighbourOptions struct {
	Logger *zap.Logger
	Max    int // addresses kept; 0 means DefaultMaxNeighbours
	// Open makes a NETLINK_ROUTE socket; nil opens one in the process's
	// network namespace (tests open theirs in a namespace of their own).
	Open func() (int, error)
	// OnChange is told each address whose MAC is new or changed.
	OnChange func(netip.Addr, MAC)
}

// WatchNeighbours reads the neighbour table and follows it until Close. It
// fails only when the first dump fails (no netlink at all); a table it
// cannot subscribe to is re-read every rescanInterval instead, with a
// warning.
func WatchNeighbours(opts NeighbourOptions) (*Neighbours, error) {
	n := &Neighbours{
		log:      opts.Logger,
		max:      opts.Max,
		open:     opts.Open,
		byAddr:   map[netip.Addr]MAC{},
		done:     make(chan struct{}),
		onChange: opts.OnChange,
	}
	if n.log == nil {
		n.log = zap.NewNop()
	}
	if n.max <= 0 {
		n.max = DefaultMaxNeighbours
	}
	if n.open == nil {
		n.open = openRoute
	}
	// Subscribe before the dump, so no change between the two is lost.
	sock, subErr := n.subscribe()
	if err := n.rescan(); err != nil {
		if sock != nil {
			sock.Close()
		}
		return nil, err
	}
	if subErr != nil {
		n.log.Warn("neighbour table: no change notifications; re-reading it periodically instead",
			zap.Duration("interval", rescanInterval), zap.Error(subErr))
	} else {
		n.sock = sock
		n.wg.Go(n.listen)
	}
	n.wg.Go(n.periodic)
	return n, nil
}

// MAC is the MAC address the kernel has for client now.
func (n *Neighbours) MAC(client netip.Addr) (MAC, bool) {
	if n == nil {
		return MAC{}, false
	}
	n.mu.RLock()
	m, ok := n.byAddr[query.ClientOf(client)]
	n.mu.RUnlock()
	return m, ok
}

// Addrs is every address the table has for mac now.
func (n *Neighbours) Addrs(mac MAC) []netip.Addr {
	var out []netip.Addr
	n.mu.RLock()
	for a, m := range n.byAddr {
		if m == mac {
			out = append(out, a)
		}
	}
	n.mu.RUnlock()
	return out
}

// Stats is the table's counters now.
func (n *Neighbours) Stats() NeighbourStats {
	n.mu.RLock()
	entries := len(n.byAddr)
	n.mu.RUnlock()
	return NeighbourStats{Entries: entries, Flaps: n.flaps.Load(), Dropped: n.dropped.Load(),
		Rescans: n.rescans.Load(), Failures: n.failures.Load()}
}

// Close stops following the table.
func (n *Neighbours) Close() {
	n.once.Do(func() {
		close(n.done)
		if n.sock != nil {
			n.sock.Close() // wakes the blocked read
		}
	})
	n.wg.Wait()
}

func openRoute() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	return fd, nil
}

// subscribe opens the notification socket for RTNLGRP_NEIGH, non-blocking
// so that os.File parks a goroutine rather than a thread on it.
func (n *Neighbours) subscribe() (*os.File, error) {
	fd, err := n.open()
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setnonblock", err)
	}
	// A household's table changes a few times a minute; a larger queue
	// than the default makes ENOBUFS (and a full re-read) rarer in a burst.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_NEIGH}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	return os.NewFile(uintptr(fd), "rtnetlink-neigh"), nil
}

// listen applies every notification; a lost one (ENOBUFS) re-reads the
// whole table.
func (n *Neighbours) listen() {
	buf := make([]byte, 256<<10)
	for {
		k, err := n.sock.Read(buf)
		switch {
		case errors.Is(err, os.ErrClosed):
			return
		case errors.Is(err, unix.ENOBUFS):
			if err := n.rescan(); err != nil {
				n.log.Warn("neighbour table: re-read failed", zap.Error(err))
			}
			continue
		case err != nil:
			n.failures.Add(1)
			n.log.Warn("neighbour table: notifications failed; re-reading it periodically instead", zap.Error(err))
			return
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:k])
		if err != nil {
			n.failures.Add(1)
			continue
		}
		for _, m := range msgs {
			n.apply(m)
		}
	}
}

func (n *Neighbours) periodic() {
	t := time.NewTicker(rescanInterval)
	defer t.Stop()
	for {
		select {
		case <-n.done:
			return
		case <-t.C:
			if err := n.rescan(); err != nil {
				n.log.Warn("neighbour table: re-read failed", zap.Error(err))
			}
		}
	}
}

// apply takes one notification into the table.
func (n *Neighbours) apply(m syscall.NetlinkMessage) {
	addr, mac, state, ok := parseNeigh(m)
	if !ok {
		return
	}
	if m.Header.Type == unix.RTM_DELNEIGH || state&unusableStates != 0 || mac.IsZero() {
		n.mu.Lock()
		delete(n.byAddr, addr)
		n.mu.Unlock()
		return
	}
	n.set(addr, mac)
}

// set records addr → mac within the bound.
func (n *Neighbours) set(addr netip.Addr, mac MAC) {
	n.mu.Lock()
	old, had := n.byAddr[addr]
	switch {
	case had && old == mac:
		n.mu.Unlock()
		return
	case !had && len(n.byAddr) >= n.max:
		n.mu.Unlock()
		n.dropped.Add(1)
		return
	}
	n.byAddr[addr] = mac
	n.mu.Unlock()
	if had {
		n.flaps.Add(1)
		n.log.Debug("neighbour changed MAC", zap.Stringer("addr", addr),
			zap.Stringer("old", old), zap.Stringer("new", mac))
	}
	if n.onChange != nil {
		n.onChange(addr, mac)
	}
}

// rescan dumps the whole table and replaces the map with it.
func (n *Neighbours) rescan() error {
	n.rescans.Add(1)
	next, err := n.dump()
	if err != nil {
		n.failures.Add(1)
		return err
	}
	var changed []netip.Addr
	n.mu.Lock()
	for a, m := range next {
		if old, ok := n.byAddr[a]; !ok || old != m {
			changed = append(changed, a)
			if ok {
				n.flaps.Add(1)
			}
		}
	}
	n.byAddr = next
	n.mu.Unlock()
	if n.onChange != nil {
		for _, a := range changed {
			n.onChange(a, next[a])
		}
	}
	return nil
}

// dump asks the kernel for every neighbour entry, IPv4 and IPv6 at once.
func (n *Neighbours) dump() (map[netip.Addr]MAC, error) {
	fd, err := n.open()
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(dumpTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, os.NewSyscallError("setsockopt", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("bind", err)
	}
	const seq = 1
	req := make([]byte, unix.SizeofNlMsghdr+ndmsgLen)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.RTM_GETNEIGH)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], seq)
	req[unix.SizeofNlMsghdr] = unix.AF_UNSPEC
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("sendto", err)
	}
	out := map[netip.Addr]MAC{}
	buf := make([]byte, 256<<10)
	for {
		k, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, os.NewSyscallError("recvfrom", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:k])
		if err != nil {
			return nil, fmt.Errorf("neighbour dump: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				return nil, fmt.Errorf("neighbour dump: the kernel answered an error")
			case unix.RTM_NEWNEIGH:
				addr, mac, state, ok := parseNeigh(m)
				if !ok || state&unusableStates != 0 || mac.IsZero() {
					continue
				}
				if _, had := out[addr]; !had && len(out) >= n.max {
					n.dropped.Add(1)
					continue
				}
				out[addr] = mac
			}
		}
	}
}

// parseNeigh reads an RTM_NEWNEIGH or RTM_DELNEIGH message: the entry's
// address (unzoned: clients are, query.ClientOf), its MAC (zero when it
// has none, or one that is not 6 bytes) and its NUD state. ok is false for
// a message that is not a neighbour entry or does not parse.
func parseNeigh(m syscall.NetlinkMessage) (addr netip.Addr, mac MAC, state uint16, ok bool) {
	if m.Header.Type != unix.RTM_NEWNEIGH && m.Header.Type != unix.RTM_DELNEIGH || len(m.Data) < ndmsgLen {
		return netip.Addr{}, MAC{}, 0, false
	}
	family := m.Data[0]
	if family != unix.AF_INET && family != unix.AF_INET6 {
		return netip.Addr{}, MAC{}, 0, false
	}
	state = binary.NativeEndian.Uint16(m.Data[8:])
	b := m.Data[ndmsgLen:]
	for len(b) >= unix.SizeofRtAttr {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:])
		if l < unix.SizeofRtAttr || l > len(b) {
			return netip.Addr{}, MAC{}, 0, false
		}
		v := b[unix.SizeofRtAttr:l]
		switch typ {
		case ndaDst:
			if a, good := netip.AddrFromSlice(v); good {
				addr = query.ClientOf(a)
			}
		case ndaLLAddr:
			mac, _ = macFromBytes(v)
		}
		b = b[min((l+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1), len(b)):]
	}
	return addr, mac, state, addr.IsValid()
}

// FixedNeighbours is a table that never changes and follows nothing: for
// benchmarks and tests of the packages that name devices.
func FixedNeighbours(table map[netip.Addr]MAC) *Neighbours {
	n := &Neighbours{log: zap.NewNop(), max: DefaultMaxNeighbours, byAddr: map[netip.Addr]MAC{}, done: make(chan struct{})}
	for a, m := range table {
		n.byAddr[query.ClientOf(a)] = m
	}
	return n
}
