package app

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/clock"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/testutil"
)

// The boot path of a Pi without RTC: the upstream cannot be verified while
// the clock is wrong (here: it is not there at all) and is in backoff, far
// into its schedule. When timesyncd reports the clock set, nxdns probes again
// at once: the upstream is back well before its next scheduled probe.
func TestClockSync_probesUpstreamsInBackoffAgain(t *testing.T) {
	r := newRig(t)
	port := testutil.FreePort(t)
	upstreamAddr := fmt.Sprintf("127.0.0.1:%d", port)
	timesync := filepath.Join(r.dir, "timesync")
	if err := os.Mkdir(timesync, 0o755); err != nil {
		t.Fatal(err)
	}
	w := clock.NewWatcher(clock.Source{TimesyncDir: timesync}, 20*time.Millisecond)

	path := r.write(t, fmt.Sprintf(`[dns]
listen = [%q]
[web]
listen = ""
[log]
queries = false
[[upstreams]]
url = "tls://%s"
tls_name = "upstream.test"
ca_file = %q
`, loopbackAddr(t), upstreamAddr, r.caFile))
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Start(cfg, Options{Logger: r.log, Level: zap.NewAtomicLevel(), Clock: w})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, a) })

	if n := r.observed.FilterMessageSnippet("system clock not synchronized").Len(); n != 1 {
		t.Errorf("%d start-up lines about the unsynchronized clock, want 1", n)
	}
	h := a.health()
	if h.Clock.State != clock.Unsynchronized || h.Clock.Source != "timesyncd" {
		t.Errorf("health clock %+v, want unsynchronized from timesyncd", h.Clock)
	}

	// The start-up probe and the first two backoff probes fail (1–2 s, then
	// 2–4 s later): the next scheduled probe is at least 4 s away.
	testutil.WaitFor(t, "three failed probes", 15*time.Second, func() bool {
		s := a.gen.Load().pool.Snapshot().Upstreams[0]
		return s.InBackoff && s.ProbeFailures >= 3
	})
	if !strings.Contains(strings.Join(a.health().Problems, "\n"), "clock is not synchronized") {
		t.Errorf("health problems %q do not name the clock", a.health().Problems)
	}
	startFake(t, r.ca, "dot://"+upstreamAddr)
	synced := time.Now()
	if err := os.WriteFile(filepath.Join(timesync, "synchronized"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the upstream to leave backoff", 2*time.Second, func() bool {
		return a.health().Upstreams.InBackoff == 0
	})
	t.Logf("upstream back %v after the clock was set", time.Since(synced).Round(time.Millisecond))
	if h := a.health(); h.Clock.State != clock.Synchronized || len(h.Problems) != 0 {
		t.Errorf("health after the sync: %+v", h)
	}
	if n := r.observed.FilterMessage("system clock synchronized").Len(); n != 1 {
		t.Errorf("%d lines saying the clock was synchronized, want 1", n)
	}
}
