// Package burst is the client side of the scenario tests: it fires waves of
// concurrent unique-name queries at a resolver, as a browser opening a page
// does (docs/design.md#burst-staircase), or a fixed query rate, and reports
// latencies, rcodes, Extended DNS Errors and the staircase ratio: how many
// single-query latencies the burst took. About 1 means the resolver served
// the burst in parallel; about N means it served it one query at a time.
//
// cmd/nxdns-burst is its command-line face; a Go scenario test can call Run
// directly. Every run is bounded in queries and in time before it starts.
package burst

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Bounds on a run, checked by Validate before anything is sent.
const (
	MaxN           = 10000            // concurrent queries per wave: each holds a socket
	MaxWaves       = 1000             //
	MaxWaveGap     = time.Minute      //
	MaxTimeout     = time.Minute      // per query
	MaxBaseline    = 1000             // sequential queries
	MaxRate        = 100000           // queries per second in fixed-rate mode
	MaxDuration    = 10 * time.Minute // of fixed-rate mode
	MaxRateQueries = 1000000          // rate × duration: one latency kept per query
	// MaxRun bounds the worst case of a whole run (every query timing out),
	// so a mistyped flag fails at once instead of holding a test for hours.
	MaxRun = 30 * time.Minute
	// maxInFlight bounds the queries outstanding in fixed-rate mode: past it
	// the schedule waits, and the run reports fewer queries than asked.
	maxInFlight = MaxN
)

// Config is one run. DefaultConfig gives the command's defaults.
type Config struct {
	Target   string        // host:port of the resolver under test
	N        int           // concurrent unique-name queries per wave
	Timeout  time.Duration // per query, client side (glibc's default is 5 s)
	Waves    int           // bursts, one after another
	WaveGap  time.Duration // pause between waves
	Rate     float64       // queries per second; > 0 selects fixed-rate mode instead of waves
	Duration time.Duration // length of fixed-rate mode
	Baseline int           // sequential queries on the idle target first; 0 skips the ratio
	Suffix   string        // names are "<run prefix>-<i>.<Suffix>"
	Type     uint16        // query type
	TCP      bool          // TCP instead of UDP
	Proto    string        // "" (UDP, or TCP with TCP set), ProtoDoT or ProtoDoQ
	Distinct int           // > 0: names cycle over this many, so every later query repeats one (a cache hit); 0: all unique
	CAFile   string        // dot, doq: PEM roots the server's certificate must chain to; empty: the system's
	TLSName  string        // dot, doq: the name verified and sent as SNI; empty: the target's host
	Insecure bool          // dot, doq: no certificate verification (loopback measurements)
}

// The encrypted protocols of Config.Proto. Each run holds one connection
// that every query shares (session.go); plain UDP and TCP use a fresh
// socket per query instead.
const (
	ProtoDoT = "dot" // DNS over TLS (RFC 7858), queries pipelined
	ProtoDoQ = "doq" // DNS over QUIC (RFC 9250), a stream per query
)

// DefaultConfig is a 30-query burst, the size of the field failure.
func DefaultConfig() Config {
	return Config{
		N:        30,
		Timeout:  5 * time.Second,
		Waves:    1,
		Baseline: 5,
		Suffix:   "burst.test.",
		Type:     dns.TypeA,
	}
}

// Validate reports every problem with c at once, one per line.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Target == "" {
		bad("target: required (host:port)")
	} else if err := checkHostPort(c.Target); err != nil {
		bad("target %q: %v", c.Target, err)
	}
	if c.Timeout <= 0 || c.Timeout > MaxTimeout {
		bad("timeout %v: want above 0 and at most %v", c.Timeout, MaxTimeout)
	}
	if c.Baseline < 0 || c.Baseline > MaxBaseline {
		bad("baseline %d: want 0..%d", c.Baseline, MaxBaseline)
	}
	if c.Rate > 0 {
		c.validateRate(bad)
	} else {
		c.validateWaves(bad)
	}
	if _, ok := dns.TypeToString[c.Type]; !ok || c.Type == 0 {
		bad("type %d: unknown", c.Type)
	}
	if err := checkSuffix(c.Suffix); err != nil {
		bad("suffix %q: %v", c.Suffix, err)
	}
	c.validateProto(bad)
	if c.Distinct < 0 || c.Distinct > MaxRateQueries {
		bad("distinct %d: want 0..%d", c.Distinct, MaxRateQueries)
	}
	if len(errs) == 0 && c.worstCase() > MaxRun {
		bad("worst case %v (every query timing out) exceeds %v", c.worstCase(), MaxRun)
	}
	return errors.Join(errs...)
}

func (c Config) validateWaves(bad func(string, ...any)) {
	if c.Rate < 0 {
		bad("rate %v: want above 0", c.Rate)
	}
	if c.Duration != 0 {
		bad("duration: only with rate")
	}
	if c.N < 1 || c.N > MaxN {
		bad("n %d: want 1..%d", c.N, MaxN)
	}
	if c.Waves < 1 || c.Waves > MaxWaves {
		bad("waves %d: want 1..%d", c.Waves, MaxWaves)
	}
	if c.WaveGap < 0 || c.WaveGap > MaxWaveGap {
		bad("wave-gap %v: want 0..%v", c.WaveGap, MaxWaveGap)
	}
}

func (c Config) validateRate(bad func(string, ...any)) {
	if c.Rate > MaxRate {
		bad("rate %v: want at most %d", c.Rate, MaxRate)
	}
	if c.Duration <= 0 || c.Duration > MaxDuration {
		bad("duration %v: required with rate, at most %v", c.Duration, MaxDuration)
	} else if c.rateQueries() > MaxRateQueries {
		bad("rate × duration = %d queries: want at most %d", c.rateQueries(), MaxRateQueries)
	} else if c.rateQueries() < 1 {
		bad("rate × duration < 1: no query to send")
	}
}

func (c Config) validateProto(bad func(string, ...any)) {
	switch c.Proto {
	case "", "udp", "tcp":
		if c.CAFile != "" || c.TLSName != "" || c.Insecure {
			bad("ca-file, tls-name, insecure: only with proto dot or doq")
		}
	case ProtoDoT, ProtoDoQ:
		if c.TCP {
			bad("tcp: not with proto %s", c.Proto)
		}
		if c.Insecure && (c.CAFile != "" || c.TLSName != "") {
			bad("insecure: verifies nothing, so not with ca-file or tls-name")
		}
	default:
		bad("proto %q: want udp, tcp, dot or doq", c.Proto)
	}
}

func (c Config) rateQueries() int { return int(c.Rate * c.Duration.Seconds()) }

// worstCase is how long the run takes if every query times out.
func (c Config) worstCase() time.Duration {
	d := time.Duration(c.Baseline) * c.Timeout
	if c.Rate > 0 {
		return d + c.Duration + c.Timeout
	}
	return d + time.Duration(c.Waves)*c.Timeout + time.Duration(c.Waves-1)*c.WaveGap
}

func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if host == "" {
		return errors.New("missing host")
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("port %q: want 1..65535", port)
	}
	return nil
}

// checkSuffix accepts a domain under which the longest generated name is
// still a valid name (RFC 1035 §2.3.4: 255 octets on the wire).
func checkSuffix(s string) error {
	if s == "" || s == "." {
		return errors.New("want a domain such as burst.test")
	}
	longest := strings.Repeat("x", prefixLen) + "-base" + strconv.Itoa(MaxRateQueries) + "." + dns.Fqdn(s)
	if _, ok := dns.IsDomainName(longest); !ok || len(longest) > 254 {
		return errors.New("not a valid domain, or too long for the generated names")
	}
	return nil
}
