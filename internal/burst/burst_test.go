package burst

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/fakeup"
)

func config(target string) Config {
	c := DefaultConfig()
	c.Target = target
	return c
}

func mustRun(t *testing.T, cfg Config) *Report {
	t.Helper()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestRun_countsRcodesAndEDE(t *testing.T) {
	srv := startUDP(t, false, func(q *dns.Msg) plan {
		if index(q.Question[0].Name)%3 != 0 {
			return plan{reply: reply(q, dns.RcodeSuccess)}
		}
		r := reply(q, dns.RcodeServerFailure)
		r.SetEdns0(1232, false)
		r.IsEdns0().Option = append(r.IsEdns0().Option, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeNoReachableAuthority, ExtraText: "budget exhausted"})
		return plan{reply: r}
	})
	rep := mustRun(t, config(srv.addr()))
	if rep.Queries != 30 || rep.Timeouts != 0 || rep.Errors != 0 {
		t.Errorf("queries %d, timeouts %d, errors %d; want 30, 0, 0", rep.Queries, rep.Timeouts, rep.Errors)
	}
	if want := map[string]int{"NOERROR": 20, "SERVFAIL": 10}; !maps.Equal(rep.Rcodes, want) {
		t.Errorf("rcodes %v, want %v", rep.Rcodes, want)
	}
	if want := map[string]int{"22": 10}; !maps.Equal(rep.EDE, want) {
		t.Errorf("ede %v, want %v", rep.EDE, want)
	}
}

func TestRun_unansweredQueriesAreTimeouts(t *testing.T) {
	const timeout = 200 * time.Millisecond
	srv := startUDP(t, false, func(q *dns.Msg) plan {
		if index(q.Question[0].Name)%5 == 0 { // 0, 5, …, 25: six of thirty
			return plan{}
		}
		return plan{reply: reply(q, dns.RcodeSuccess)}
	})
	cfg := config(srv.addr())
	cfg.Timeout = timeout
	rep := mustRun(t, cfg)
	if rep.Timeouts != 6 || rep.Rcodes["NOERROR"] != 24 || rep.Errors != 0 {
		t.Errorf("timeouts %d, NOERROR %d, errors %d; want 6, 24, 0", rep.Timeouts, rep.Rcodes["NOERROR"], rep.Errors)
	}
	if rep.MaxMS < ms(timeout) {
		t.Errorf("max %v ms, want at least the %v timeout", rep.MaxMS, timeout)
	}
}

func TestRun_refusedPortCountsErrors(t *testing.T) {
	srv := startUDP(t, false, func(*dns.Msg) plan { return plan{} })
	addr := srv.addr()
	srv.conn.Close() // nothing listens there now: ICMP port unreachable
	cfg := config(addr)
	cfg.N, cfg.Baseline, cfg.Timeout = 5, 0, time.Second
	rep := mustRun(t, cfg)
	if rep.Errors != 5 || len(rep.Rcodes) != 0 {
		t.Errorf("errors %d timeouts %d rcodes %v; want all 5 failed as errors (connection refused), not timeouts", rep.Errors, rep.Timeouts, rep.Rcodes)
	}
}

// The staircase ratio tells a parallel resolver from a serial one: the shape
// of docs/design.md#field-failures, one query's latency against N of them.
func TestRun_staircaseRatio(t *testing.T) {
	const (
		n       = 10
		latency = 30 * time.Millisecond
	)
	answer := func(q *dns.Msg) plan { return plan{reply: reply(q, dns.RcodeSuccess), delay: latency} }
	for _, tt := range []struct {
		name   string
		serial bool
		ok     func(ratio float64) bool
		want   string
	}{
		{"parallel", false, func(r float64) bool { return r < 5 }, "below 5"},
		{"serial", true, func(r float64) bool { return r > n/3.0 }, "above N/3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := startUDP(t, tt.serial, answer)
			cfg := config(srv.addr())
			cfg.N, cfg.Baseline = n, 3
			rep := mustRun(t, cfg)
			if rep.Rcodes["NOERROR"] != n {
				t.Fatalf("rcodes %v, want %d NOERROR", rep.Rcodes, n)
			}
			if rep.BaselineP50MS < ms(latency) {
				t.Errorf("baseline p50 %v ms, want at least the %v latency", rep.BaselineP50MS, latency)
			}
			if !tt.ok(rep.StaircaseRatio) {
				t.Errorf("staircase ratio %v (wave %v ms, baseline %v ms), want %s",
					rep.StaircaseRatio, rep.FirstWaveMS, rep.BaselineP50MS, tt.want)
			}
		})
	}
}

func TestRun_namesAreUniqueAcrossBaselineAndWaves(t *testing.T) {
	srv := startUDP(t, false, func(q *dns.Msg) plan { return plan{reply: reply(q, dns.RcodeSuccess)} })
	cfg := config(srv.addr())
	cfg.N, cfg.Waves, cfg.Baseline, cfg.Suffix = 5, 3, 2, "Scenario.Example"
	rep := mustRun(t, cfg)
	names := srv.received()
	if rep.Queries != 15 || len(names) != 17 {
		t.Fatalf("report says %d queries, server saw %d names; want 15 and 17 (with baseline)", rep.Queries, len(names))
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] || !strings.HasSuffix(n, ".Scenario.Example.") {
			t.Errorf("name %q repeated or outside the suffix", n)
		}
		seen[n] = true
	}
	// A second run must not reuse the first run's names (no cache hit).
	mustRun(t, cfg)
	for _, n := range srv.received()[17:] {
		if seen[n] {
			t.Errorf("second run reused %q", n)
		}
	}
}

func TestRun_overTCP(t *testing.T) {
	l, err := fakeup.ParseListen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up, err := fakeup.Start(fakeup.Config{Listen: []fakeup.Listen{l}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	cfg := config(up.Listeners()[0].Addr.String())
	cfg.TCP, cfg.N, cfg.Baseline, cfg.Type = true, 10, 2, dns.TypeAAAA
	rep := mustRun(t, cfg)
	if rep.Rcodes["NOERROR"] != 10 {
		t.Errorf("rcodes %v, want 10 NOERROR", rep.Rcodes)
	}
	if got := up.Counters().Connections; got != 12 {
		t.Errorf("%d TCP connections, want 12: one per query, as separate stub resolvers", got)
	}
}

func TestRun_fixedRate(t *testing.T) {
	srv := startUDP(t, false, func(q *dns.Msg) plan { return plan{reply: reply(q, dns.RcodeSuccess)} })
	cfg := config(srv.addr())
	cfg.N, cfg.Waves, cfg.Baseline = 0, 0, 0
	cfg.Rate, cfg.Duration = 200, 250*time.Millisecond
	rep := mustRun(t, cfg)
	if rep.Queries != 50 || rep.Rcodes["NOERROR"] != 50 {
		t.Errorf("queries %d, rcodes %v; want 50 answered (200/s for 250ms)", rep.Queries, rep.Rcodes)
	}
	// The schedule spreads them: the last is sent about 245 ms after the first.
	if rep.WallMS < 200 {
		t.Errorf("wall %v ms, want the schedule's ~250 ms", rep.WallMS)
	}
	if rep.StaircaseRatio != 0 || rep.FirstWaveMS != 0 {
		t.Errorf("ratio %v, first wave %v; want 0 in fixed-rate mode", rep.StaircaseRatio, rep.FirstWaveMS)
	}
}

func TestRun_interruptedRunEndsPromptly(t *testing.T) {
	srv := startUDP(t, false, func(*dns.Msg) plan { return plan{} }) // never answers
	cfg := config(srv.addr())
	cfg.Timeout = 30 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel) // the operator's Ctrl-C
	begin := time.Now()
	if _, err := Run(ctx, cfg); err == nil {
		t.Fatal("an interrupted run reported success")
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("interrupted run took %v, want well under the 30s query timeout", took)
	}
}

func TestPercentile(t *testing.T) {
	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	tests := []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"empty", nil, 50, 0},
		{"single", []float64{7}, 99, 7},
		{"median of even count is the lower middle", []float64{1, 2, 3, 4}, 50, 2},
		{"median of odd count", []float64{1, 2, 3}, 50, 2},
		{"p90 of ten", ten, 90, 9},
		{"p99 of ten is the max", ten, 99, 10},
		{"p100 is the max", ten, 100, 10},
		{"p7 of 1..100 (no float overshoot)", hundred, 7, 7},
		{"p99 of 1..100", hundred, 99, 99},
		{"p0 clamps to the min", ten, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestReport_JSONShape(t *testing.T) {
	burst := []result{
		{latency: 10 * time.Millisecond, reply: &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeSuccess}}},
		{latency: 5 * time.Second, timeout: true},
	}
	base := []result{{latency: 10 * time.Millisecond, reply: &dns.Msg{}}}
	b, err := json.Marshal(summarize(burst, base, 5*time.Second, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"baseline_p50_ms", "ede", "errors", "first_wave_ms", "max_ms", "p50_ms", "p90_ms", "p99_ms",
		"queries", "rcodes", "staircase_ratio", "timeouts", "wall_ms"}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	if string(got["ede"]) != "{}" || string(got["rcodes"]) != `{"NOERROR":1}` {
		t.Errorf("ede %s rcodes %s; want {} and {\"NOERROR\":1}", got["ede"], got["rcodes"])
	}
	if string(got["staircase_ratio"]) != "500" || string(got["p50_ms"]) != "10" {
		t.Errorf("ratio %s p50 %s; want 500 and 10", got["staircase_ratio"], got["p50_ms"])
	}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string
	}{
		{"defaults with a target", func(*Config) {}, ""},
		{"no target", func(c *Config) { c.Target = "" }, "target: required"},
		{"target without port", func(c *Config) { c.Target = "127.0.0.1" }, "target"},
		{"port zero", func(c *Config) { c.Target = "127.0.0.1:0" }, "port"},
		{"n zero", func(c *Config) { c.N = 0 }, "n 0"},
		{"n too big", func(c *Config) { c.N = MaxN + 1 }, "n "},
		{"timeout zero", func(c *Config) { c.Timeout = 0 }, "timeout"},
		{"waves zero", func(c *Config) { c.Waves = 0 }, "waves"},
		{"duration without rate", func(c *Config) { c.Duration = time.Second }, "only with rate"},
		{"rate without duration", func(c *Config) { c.Rate = 10 }, "required with rate"},
		{"rate too long", func(c *Config) { c.Rate, c.Duration = 10, time.Hour }, "duration"},
		{"rate too many queries", func(c *Config) { c.Rate, c.Duration = 100000, time.Minute }, "queries"},
		{"rate below one query", func(c *Config) { c.Rate, c.Duration = 1, 100*time.Millisecond }, "no query"},
		{"bad suffix", func(c *Config) { c.Suffix = "a..b" }, "suffix"},
		{"worst case too long", func(c *Config) { c.Waves, c.Timeout = MaxWaves, MaxTimeout }, "worst case"},
		{"negative baseline", func(c *Config) { c.Baseline = -1 }, "baseline"},
		{"dot with a CA file", func(c *Config) { c.Proto, c.CAFile = ProtoDoT, "/ca.pem" }, ""},
		{"doq insecure", func(c *Config) { c.Proto, c.Insecure = ProtoDoQ, true }, ""},
		{"unknown proto", func(c *Config) { c.Proto = "quic" }, "proto"},
		{"tcp with dot", func(c *Config) { c.Proto, c.TCP = ProtoDoT, true }, "tcp: not with proto dot"},
		{"CA file over UDP", func(c *Config) { c.CAFile = "/ca.pem" }, "only with proto dot or doq"},
		{"insecure with a CA file", func(c *Config) { c.Proto, c.Insecure, c.CAFile = ProtoDoQ, true, "/ca.pem" }, "insecure"},
		{"negative distinct", func(c *Config) { c.Distinct = -1 }, "distinct"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config("127.0.0.1:53")
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}
