package localnet

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// How the set is followed. Decision (docs/server.md): the kernel's rtnetlink
// notifications (RTMGRP_LINK and the IPv4 and IPv6 address groups, RFC 3549)
// are the trigger, and a fresh read of the interfaces (net.Interfaces, which
// the standard library itself answers over netlink) is the source of truth.
// Parsing the notifications would duplicate what the standard library does
// and could drift from it; re-reading costs a few hundred microseconds, a
// few times a day. A lost notification (ENOBUFS: the socket's queue
// overflowed) triggers a re-read too, so a burst of changes never leaves a
// stale set. Where a netlink socket cannot be opened (a sandbox that forbids
// AF_NETLINK), the interfaces are polled every pollInterval instead, which
// github.com/vishvananda/netlink would not improve on and which keeps the
// dependency list short.

// pollInterval is the fallback when no notification socket can be opened:
// short enough that a DHCP renumbering is noticed before a household does,
// long enough to cost nothing.
const pollInterval = 5 * time.Second

// Watcher holds the current local prefixes and calls its onChange function,
// from one goroutine, each time they change.
//
// Guarantee: after a kernel address or link notification, Prefixes reflects
// the interfaces as read after that notification, and onChange has been
// called with that set, unless the set did not change. Calls of onChange
// never overlap, and none runs after Close returns.
type Watcher struct {
	log      *zap.Logger
	onChange func([]netip.Prefix)
	cur      atomic.Pointer[[]netip.Prefix]

	sock *os.File      // the rtnetlink socket; nil when polling
	kick chan struct{} // capacity 1: a re-read is due
	done chan struct{} // closed by Close
	once sync.Once
	wg   sync.WaitGroup
}

// Watch reads the local prefixes once and follows them until Close. It fails
// only when the interfaces cannot be read at all; without a notification
// socket it falls back to polling and says so in the log.
func Watch(onChange func([]netip.Prefix), log *zap.Logger) (*Watcher, error) {
	if log == nil {
		log = zap.NewNop()
	}
	first, err := Prefixes()
	if err != nil {
		return nil, err
	}
	w := &Watcher{
		log:      log,
		onChange: onChange,
		kick:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	w.cur.Store(&first)
	sock, err := openNetlink()
	if err != nil {
		log.Warn(`dns.allow "local": no interface notifications; polling the interfaces instead`,
			zap.Duration("interval", pollInterval), zap.Error(err))
		w.wg.Go(w.poll)
	} else {
		w.sock = sock
		w.wg.Go(w.listen)
	}
	w.wg.Go(w.rescanLoop)
	return w, nil
}

// Prefixes is the current set, sorted. The slice is shared: do not modify it.
func (w *Watcher) Prefixes() []netip.Prefix { return *w.cur.Load() }

// Close stops following the interfaces and waits for the goroutines.
func (w *Watcher) Close() {
	w.once.Do(func() {
		close(w.done)
		if w.sock != nil {
			w.sock.Close() // wakes the blocked read
		}
	})
	w.wg.Wait()
}

// openNetlink subscribes to link and address changes. The socket is
// non-blocking so that os.File puts it in the runtime's poller: a read then
// parks a goroutine, not a thread, and Close wakes it.
func openNetlink() (*os.File, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	sa := &unix.SockaddrNetlink{
		Family: unix.AF_NETLINK,
		Groups: unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR,
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	return os.NewFile(uintptr(fd), "rtnetlink"), nil
}

// listen turns every notification into a kick; it does not parse them (see
// the decision above). A full kick channel already means "re-read".
func (w *Watcher) listen() {
	buf := make([]byte, 64<<10)
	for {
		_, err := w.sock.Read(buf)
		switch {
		case errors.Is(err, os.ErrClosed):
			return
		case err != nil && !errors.Is(err, unix.ENOBUFS):
			// Not expected from a bound netlink socket; polling keeps the
			// set right rather than leaving it frozen.
			w.log.Warn(`dns.allow "local": interface notifications failed; polling instead`, zap.Error(err))
			w.poll()
			return
		}
		w.trigger()
	}
}

func (w *Watcher) poll() {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
			w.trigger()
		}
	}
}

func (w *Watcher) trigger() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// rescanLoop re-reads the interfaces after each kick. Kicks that arrive
// during a re-read collapse into one more, so a burst of notifications (a
// link coming up brings several addresses) costs two reads, not one each.
func (w *Watcher) rescanLoop() {
	for {
		select {
		case <-w.done:
			return
		case <-w.kick:
		}
		w.rescan()
	}
}

func (w *Watcher) rescan() {
	next, err := Prefixes()
	if err != nil {
		w.log.Warn(`dns.allow "local": reading the interfaces failed; keeping the previous networks`, zap.Error(err))
		return
	}
	if slices.Equal(next, w.Prefixes()) {
		return
	}
	w.cur.Store(&next)
	w.log.Info(`dns.allow "local": networks changed`, zap.Stringers("networks", next))
	if w.onChange != nil {
		w.onChange(next)
	}
}
