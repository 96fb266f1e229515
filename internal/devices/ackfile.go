package devices

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/safefile"
)

// DevicesFile is the file under filter.state_dir — where the dashboard
// keeps its allow list (internal/filter's AllowFile) — that keeps the
// devices seen and which were acknowledged across restarts, so a device is
// new once, not once per restart. One device a line: "KEY FIRST_SEEN ACK"
// (ACK 1 or 0).
const DevicesFile = "dashboard-devices.txt"

// maxDevicesFileBytes bounds the file read back: DefaultMaxDevices lines of
// at most ~80 bytes, with room to spare.
const maxDevicesFileBytes = 1 << 20

// ackStore writes the registry's devices to its file from one goroutine
// whenever kicked; a burst of new devices is one write.
type ackStore struct {
	reg  *Registry
	path string
	kc   chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

// kick asks for a write; a nil store (no state directory) does nothing.
func (s *ackStore) kick() {
	if s == nil {
		return
	}
	select {
	case s.kc <- struct{}{}:
	default:
	}
}

// UseStateDir keeps the registry's devices in dir's DevicesFile: what it
// holds is loaded (a device listed there is not new again; one listed
// unacknowledged is still new), and every new device or acknowledgement
// is written back. It is called once, at start; "" keeps them in memory.
// A missing file is an empty one. An unreadable one (too large, not a
// regular file) is reported and left as it is: the registry starts empty
// and keeps its devices in memory only, rather than overwrite
// acknowledgements it could not read.
func (r *Registry) UseStateDir(dir string) error {
	if dir == "" || r.store != nil {
		return nil
	}
	path := filepath.Join(dir, DevicesFile)
	if err := r.load(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s (devices kept in memory only until it is fixed and nxdns restarted): %w", path, err)
	}
	s := &ackStore{reg: r, path: path, kc: make(chan struct{}, 1), done: make(chan struct{})}
	r.store = s
	s.wg.Go(s.loop)
	return nil
}

// Close stops the writer after a last write of pending changes.
func (r *Registry) Close() {
	if r.store == nil {
		return
	}
	close(r.store.done)
	r.store.wg.Wait()
}

func (s *ackStore) loop() {
	for {
		select {
		case <-s.kc:
			s.write()
		case <-s.done:
			select {
			case <-s.kc:
				s.write()
			default:
			}
			return
		}
	}
}

func (s *ackStore) write() {
	var b bytes.Buffer
	b.WriteString("# Devices nxdns has seen: KEY FIRST_SEEN(unix) ACKNOWLEDGED(1/0). Written by nxdns.\n")
	s.reg.mu.RLock()
	for _, rec := range s.reg.devs {
		ack := "0"
		if rec.acked.Load() || !rec.isNew {
			ack = "1"
		}
		fmt.Fprintf(&b, "%s %d %s\n", rec.key, rec.firstSeen.Unix(), ack)
	}
	s.reg.mu.RUnlock()
	if err := safefile.WriteFile(s.path, b.Bytes(), 0o600); err != nil {
		s.reg.log.Warn("devices file not written", zap.String("path", s.path), zap.Error(err))
	}
}

// load reads the devices file into the registry; a line that does not
// parse is skipped.
func (r *Registry) load(path string) error {
	b, err := safefile.ReadFile(path, maxDevicesFileBytes)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 3 || strings.HasPrefix(f[0], "#") || len(r.devs) >= r.max {
			continue
		}
		k, ok := parseDevKey(f[0])
		first, err := strconv.ParseInt(f[1], 10, 64)
		if !ok || err != nil {
			continue
		}
		rec := &record{key: k, firstSeen: time.Unix(first, 0), isNew: f[2] != "1"}
		if k.id == "" {
			rec.macStr = k.mac.String()
		}
		r.devs[k] = rec
	}
	return nil
}

// parseDevKey reads a key as devKey.String writes it.
func parseDevKey(s string) (devKey, bool) {
	if id, ok := strings.CutPrefix(s, "id:"); ok {
		if !ValidClientID(id) {
			return devKey{}, false
		}
		return devKey{id: strings.ToLower(id)}, true
	}
	if m, ok := strings.CutPrefix(s, "mac:"); ok {
		mac, ok := ParseMAC(m)
		return devKey{mac: mac}, ok
	}
	return devKey{}, false
}
