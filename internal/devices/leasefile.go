package devices

import (
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/safefile"
)

// Bounds of the lease files. A household's DHCP server holds tens of
// leases; an ISC dhcpd.leases file is a log that grows between its hourly
// rewrites, so allow a few MiB.
const (
	MaxLeaseFileBytes = 8 << 20
	maxLeases         = 16384
	// leaseCheckInterval is how often the files' size and mtime are
	// looked at; a changed file is read again. A new device's name shows
	// up within it.
	leaseCheckInterval = 10 * time.Second
)

// LeaseFile is one configured lease file.
type LeaseFile struct {
	Format string // one of Formats
	Path   string
}

// leaseIndex is every lease file's names, by MAC and by address; later
// leases win (a rewritten ISC file lists the newest last).
type leaseIndex struct {
	byMAC  map[MAC]string
	byAddr map[netip.Addr]string
}

// Leases holds the names of the configured lease files and reads a file
// again when its size or modification time changes.
//
// Guarantees: a file is read with internal/safefile's rules (a regular file
// of at most MaxLeaseFileBytes, never a FIFO, never blocking); a file that
// cannot be read or parsed keeps its last good names and is logged once
// per change of its error; at most maxLeases names are held. Name lookups
// never wait for a file (one atomic load).
type Leases struct {
	log   *zap.Logger
	files []LeaseFile
	idx   atomic.Pointer[leaseIndex]

	mu    sync.Mutex
	state []fileState // per file: what was last read, and its leases

	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

type fileState struct {
	size    int64
	mtime   time.Time
	leases  []Lease
	lastErr string
}

// NewLeases reads files once and, with follow, checks them for changes
// every leaseCheckInterval until Close.
func NewLeases(files []LeaseFile, log *zap.Logger, follow bool) *Leases {
	if log == nil {
		log = zap.NewNop()
	}
	l := &Leases{log: log, files: files, state: make([]fileState, len(files)), done: make(chan struct{})}
	l.Refresh()
	if follow && len(files) > 0 {
		l.wg.Go(l.loop)
	}
	return l
}

// Close stops following the files.
func (l *Leases) Close() {
	if l == nil {
		return
	}
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}

func (l *Leases) loop() {
	t := time.NewTicker(leaseCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
			l.Refresh()
		}
	}
}

// Refresh reads every file whose size or mtime changed and rebuilds the
// index when any did.
func (l *Leases) Refresh() {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := l.idx.Load() == nil
	for i, f := range l.files {
		st := &l.state[i]
		fi, err := os.Stat(f.Path)
		if err == nil && fi.Size() == st.size && fi.ModTime().Equal(st.mtime) && st.lastErr == "" {
			continue
		}
		leases, err := readLeases(f)
		if err != nil {
			if msg := err.Error(); msg != st.lastErr {
				l.log.Warn("lease file not read; keeping its last names", zap.String("path", f.Path),
					zap.String("format", f.Format), zap.Error(err))
				st.lastErr = msg
			}
			continue
		}
		st.lastErr, st.leases, changed = "", leases, true
		if fi != nil {
			st.size, st.mtime = fi.Size(), fi.ModTime()
		}
	}
	if !changed {
		return
	}
	idx := &leaseIndex{byMAC: map[MAC]string{}, byAddr: map[netip.Addr]string{}}
	for _, st := range l.state {
		for _, le := range st.leases {
			if len(idx.byMAC)+len(idx.byAddr) >= maxLeases {
				break
			}
			if !le.MAC.IsZero() {
				idx.byMAC[le.MAC] = le.Name
			}
			if le.Addr.IsValid() {
				idx.byAddr[le.Addr] = le.Name
			}
		}
	}
	l.idx.Store(idx)
}

// readLeases reads and parses one file.
func readLeases(f LeaseFile) ([]Lease, error) {
	b, err := safefile.ReadFile(f.Path, MaxLeaseFileBytes)
	if err != nil {
		return nil, err
	}
	return ParseLeases(f.Format, b)
}

// ByMAC is the lease name of mac, "" when none.
func (l *Leases) ByMAC(mac MAC) string {
	if l == nil || mac.IsZero() {
		return ""
	}
	if idx := l.idx.Load(); idx != nil {
		return idx.byMAC[mac]
	}
	return ""
}

// ByAddr is the lease name of addr, "" when none.
func (l *Leases) ByAddr(addr netip.Addr) string {
	if l == nil {
		return ""
	}
	if idx := l.idx.Load(); idx != nil {
		return idx.byAddr[addr]
	}
	return ""
}
