// Package clock tells whether the system clock has been set by a time
// service. A Raspberry Pi has no real-time clock: after a power cut it boots
// with the time it saved at shutdown (or 1970), and until NTP corrects it
// every DoT and DoH certificate may look "not yet valid". nxdns does not wait
// for the clock (it would leave the LAN without DNS when NTP is unreachable)
// and never turns verification off; it reports the clock's state in its log
// and /api/health, and probes its upstreams again once the clock is set
// (internal/app), so they leave backoff at once instead of at their next
// scheduled probe.
package clock

import (
	"os"
	"path/filepath"
	"time"
)

// State is what can be known about the system clock.
type State string

const (
	// Synchronized: a time service has set the clock.
	Synchronized State = "synchronized"
	// Unsynchronized: a time service runs (or the kernel was told of one)
	// but has not set the clock yet.
	Unsynchronized State = "unsynchronized"
	// Unknown: nothing here says either way (no timesyncd, and the kernel's
	// status could not be read, as under systemd's ProtectClock=).
	Unknown State = "unknown"
)

// Reading is one observation of the clock.
type Reading struct {
	State  State
	Source string // "timesyncd", "kernel" or "plausibility"; "" when State is Unknown
}

// Source reads the clock's state. The zero Source knows nothing.
type Source struct {
	// TimesyncDir is systemd-timesyncd's runtime directory
	// (RuntimeDirectory=systemd/timesync): it exists while timesyncd runs,
	// and timesyncd creates "synchronized" in it at its first sync. ""
	// skips this source.
	TimesyncDir string
	// Kernel reports the kernel's synchronization status (adjtimex: the
	// STA_UNSYNC flag, which NTP daemons clear once they discipline the
	// clock); ok is false when it cannot be read. nil skips this source.
	Kernel func() (synced, ok bool)
	// Now is the clock itself, for the plausibility check below; nil
	// means time.Now.
	Now func() time.Time
}

// Plausible is the earliest time the clock can plausibly show: a clock
// before it (1970 after a power cut, or a saved time months old) is
// certainly wrong. It is a date before this code was written, so a clock
// at or after it is not judged, only one before it.
var Plausible = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// System reads the machine's own clock state: timesyncd's directory first,
// as NixOS and Debian use timesyncd and nxdns's unit cannot call adjtimex
// (ProtectClock=), then the kernel's flag, for chrony or ntpd (which clear
// it once synchronized), then the plausibility of the time itself.
func System() Source {
	return Source{TimesyncDir: "/run/systemd/timesync", Kernel: kernelSynced}
}

// Read observes the clock now. It never fails: what cannot be read is
// Unknown.
func (s Source) Read() Reading {
	if s.TimesyncDir != "" {
		if _, err := os.Stat(filepath.Join(s.TimesyncDir, "synchronized")); err == nil {
			return Reading{State: Synchronized, Source: "timesyncd"}
		}
		if fi, err := os.Stat(s.TimesyncDir); err == nil && fi.IsDir() {
			return Reading{State: Unsynchronized, Source: "timesyncd"}
		}
	}
	if s.Kernel != nil {
		if synced, ok := s.Kernel(); ok && synced {
			return Reading{State: Synchronized, Source: "kernel"}
		}
	}
	// The kernel's STA_UNSYNC flag alone is no evidence: it stays set on
	// a machine whose clock was set by hand, by a container's host or by
	// a daemon that does not clear it, so a clock that is fine would be
	// reported wrong at every start. Without a time service saying
	// otherwise, only a clock before Plausible is reported.
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	if now().Before(Plausible) {
		return Reading{State: Unsynchronized, Source: "plausibility"}
	}
	return Reading{State: Unknown}
}
