package web

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/crypto/bcrypt"

	"github.com/nxdns/nxdns/internal/testutil"
)

// observedLoginServer is a server on 127.0.0.1 with testPassword set, not
// started, whose log the returned observer holds.
func observedLoginServer(t *testing.T) (*Server, *observer.ObservedLogs) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	s := New("127.0.0.1:0", prometheus.NewRegistry(), func() Health { return Health{} }, zap.New(core))
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	s.SetPassword(hash)
	return s, logs
}

// A client hammering the login (issue 30 finding 17: 23 047 warnings in
// 10 s from one address) makes one warning when its episode starts and one
// line with the count when it ends, and the counters hold every refusal.
func TestLogin_rateLimitingLogsOncePerEpisode(t *testing.T) {
	s, logs := observedLoginServer(t)
	counters := &Counters{}
	s.ShareCounters(counters)
	s.limited.quiet = 300 * time.Millisecond
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + loopbackURLHost(t, s)
	c := browser(t)
	const hammer = 60
	refused := 0
	for range loginBurst + hammer {
		if resp, _ := do(t, c, "POST", base+"/login", url.Values{"password": {"guess"}}, nil); resp.StatusCode == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused < hammer {
		t.Fatalf("%d attempts refused, want at least %d", refused, hammer)
	}
	if n := logs.FilterMessageSnippet("rate-limited").Len(); n != 1 {
		t.Errorf("%d rate-limit warnings for %d refused attempts, want 1", n, refused)
	}
	if got := counters.LoginRateLimited.Load(); got != uint64(refused) {
		t.Errorf("nxdns_web_login_rate_limited_total %d, want %d", got, refused)
	}
	testutil.WaitFor(t, "the episode's end line", 10*time.Second, func() bool {
		return logs.FilterMessage("login rate limiting ended").Len() == 1
	})
	end := logs.FilterMessage("login rate limiting ended").All()[0].ContextMap()
	if end["refused"] != uint64(refused) || end["client"] != "127.0.0.1" {
		t.Errorf("end line %v, want client 127.0.0.1 and refused %d", end, refused)
	}
	// The bucket is still empty: the next refusal is a new episode.
	if resp, _ := do(t, c, "POST", base+"/login", url.Values{"password": {"guess"}}, nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("attempt after the episode: %d, want 429", resp.StatusCode)
	}
	if n := logs.FilterMessageSnippet("rate-limited").Len(); n != 2 {
		t.Errorf("%d rate-limit warnings after a second episode began, want 2", n)
	}
	if got := counters.LoginEpisodes.Load(); got != 2 {
		t.Errorf("nxdns_web_login_rate_limit_episodes_total %d, want 2", got)
	}
}
