package app

import (
	"fmt"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"
)

// Systemd speaks the sd_notify protocol (sd_notify(3)) when NOTIFY_SOCKET is
// set, and does nothing otherwise, so the same binary runs under systemd
// (Type=notify, WatchdogSec=) and in a terminal.
type Systemd struct {
	log      *zap.Logger
	interval time.Duration // watchdog ping interval; 0 when no watchdog is asked for
	tick     *time.Ticker
}

// NewSystemd reads WATCHDOG_USEC: systemd expects a ping within that
// interval, and pinging at half of it is what sd_watchdog_enabled(3) advises.
func NewSystemd(log *zap.Logger) *Systemd {
	s := &Systemd{log: log}
	if d, err := daemon.SdWatchdogEnabled(false); err == nil && d > 0 {
		s.interval = d / 2
		s.tick = time.NewTicker(s.interval)
	}
	return s
}

// Watchdog delivers when a ping is due; a nil channel (never ready) when no
// watchdog is configured.
func (s *Systemd) Watchdog() <-chan time.Time {
	if s.tick == nil {
		return nil
	}
	return s.tick.C
}

// Ready says the listeners are bound and queries are being answered.
func (s *Systemd) Ready() { s.notify(daemon.SdNotifyReady) }

// Reloading says a reload started; systemd wants the monotonic time with it
// (Type=notify-reload; harmless for Type=notify).
func (s *Systemd) Reloading() {
	s.notify(fmt.Sprintf("%s\nMONOTONIC_USEC=%d", daemon.SdNotifyReloading, monotonicUsec()))
}

// Stopping says the drain began.
func (s *Systemd) Stopping() {
	if s.tick != nil {
		s.tick.Stop()
	}
	s.notify(daemon.SdNotifyStopping)
}

// Alive pings the watchdog: the main loop is turning.
func (s *Systemd) Alive() { s.notify(daemon.SdNotifyWatchdog) }

func (s *Systemd) notify(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		s.log.Warn("sd_notify failed", zap.Error(err))
	}
}
