package fakeup

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Transport is one kind of listener.
type Transport string

const (
	UDP Transport = "udp" // plain DNS over UDP
	TCP Transport = "tcp" // plain DNS over TCP, RFC 7766 pipelining
	DoT Transport = "dot" // DNS over TLS, RFC 7858
	DoH Transport = "doh" // DNS over HTTPS, RFC 8484, HTTP/2
	DoQ Transport = "doq" // DNS over QUIC, RFC 9250 (doq.go)
)

// defaultDoHPath is the path RFC 8484 §3 uses in its examples and every public
// resolver serves.
const defaultDoHPath = "/dns-query"

// maxShaping bounds every shaping duration a listen URL can ask for, so a typo
// ("latency=30m" for "30ms") fails loudly instead of hanging a test run.
const maxShaping = 10 * time.Minute

// Behaviour is how one listener misbehaves. The zero value answers at once.
type Behaviour struct {
	Latency        time.Duration // added before every answer
	Jitter         time.Duration // a uniform 0..Jitter added on top of Latency
	Stall          bool          // read queries, count them, never answer
	HandshakeDelay time.Duration // DoT/DoH: wait this long before the TLS handshake
	IdleClose      time.Duration // close a connection with nothing to do for this long; 0 never
	TC             bool          // answer TC=1 with no records: over UDP clients retry over TCP; over a stream it is hostile
	Refuse         bool          // answer REFUSED
	CloseOnQuery   int           // TCP/DoT: close, unanswered, on a connection's Nth query; 0 never
	EarlyData      bool          // DoQ: issue tickets that allow 0-RTT and accept it (RFC 9250 §4.5)

	// Hostile behaviours (hostile.go).
	EDEText   int           // every answer carries an EDE with this many bytes of text
	TXT       int           // TXT questions get about this many bytes of TXT records
	TSIG      bool          // a TSIG record ends every answer
	Endless   bool          // TCP/DoT: after the first query, frames for another ID without end
	SlowBytes time.Duration // TCP/DoT: write each answer one byte every SlowBytes
}

// String lists the non-default settings as the start-up log shows them
// ("latency=30ms stall=1"), in a fixed order.
func (b Behaviour) String() string {
	var parts []string
	dur := func(k string, d time.Duration) {
		if d > 0 {
			parts = append(parts, k+"="+d.String())
		}
	}
	flag := func(k string, on bool) {
		if on {
			parts = append(parts, k+"=1")
		}
	}
	dur("latency", b.Latency)
	dur("jitter", b.Jitter)
	flag("stall", b.Stall)
	dur("handshake_delay", b.HandshakeDelay)
	dur("idle_close", b.IdleClose)
	flag("early_data", b.EarlyData)
	flag("tc", b.TC)
	flag("refuse", b.Refuse)
	if b.CloseOnQuery > 0 {
		parts = append(parts, "close_on_query="+strconv.Itoa(b.CloseOnQuery))
	}
	if b.EDEText > 0 {
		parts = append(parts, "ede_text="+strconv.Itoa(b.EDEText))
	}
	if b.TXT > 0 {
		parts = append(parts, "txt="+strconv.Itoa(b.TXT))
	}
	flag("tsig", b.TSIG)
	flag("endless", b.Endless)
	dur("slow_bytes", b.SlowBytes)
	return strings.Join(parts, " ")
}

// Listen is one parsed -listen URL.
type Listen struct {
	Transport Transport
	Addr      string // host:port to bind
	Path      string // DoH only: the URL path served
	Behaviour Behaviour
	Hooks     *Hooks   // set by a Go test after ParseListen; nil for none
	raw       *url.URL // the URL without its query, for the counters key
}

// ParseListen parses a listen URL such as "dot://127.0.0.1:8853?latency=30ms".
// Every problem is an error naming the URL; unknown query parameters and
// settings that do not apply to the transport are errors, not ignored.
func ParseListen(s string) (Listen, error) {
	l, err := parseListen(s)
	if err != nil {
		return Listen{}, fmt.Errorf("listen %q: %w", s, err)
	}
	return l, nil
}

func parseListen(s string) (Listen, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Listen{}, err
	}
	l := Listen{Transport: Transport(u.Scheme), Addr: u.Host}
	switch l.Transport {
	case UDP, TCP, DoT, DoH, DoQ:
	default:
		return Listen{}, fmt.Errorf("scheme %q: want udp, tcp, dot, doh or doq", u.Scheme)
	}
	if u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return Listen{}, errors.New("want scheme://host:port[/path][?settings] with no userinfo or fragment")
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return Listen{}, fmt.Errorf("address %q: want host:port", u.Host)
	}
	switch {
	case l.Transport == DoH && (u.Path == "" || u.Path == "/"):
		l.Path = defaultDoHPath
	case l.Transport == DoH:
		l.Path = u.Path
	case u.Path != "" && u.Path != "/":
		return Listen{}, fmt.Errorf("path %q: only doh listeners have a path", u.Path)
	}
	if l.Behaviour, err = parseBehaviour(u.Query(), l.Transport); err != nil {
		return Listen{}, err
	}
	bare := *u
	bare.RawQuery, bare.ForceQuery = "", false
	l.raw = &bare
	return l, nil
}

// parseBehaviour reads the settings of one listener. Each key appears at most
// once; a setting meaningless for the transport is rejected so a test that
// asks for it learns at once that it would not happen.
func parseBehaviour(q url.Values, t Transport) (Behaviour, error) {
	var b Behaviour
	for key, vals := range q {
		if len(vals) != 1 {
			return b, fmt.Errorf("%s given %d times", key, len(vals))
		}
		v := vals[0]
		var err error
		switch key {
		case "latency":
			b.Latency, err = parseDuration(v)
		case "jitter":
			b.Jitter, err = parseDuration(v)
		case "stall":
			b.Stall, err = strconv.ParseBool(v)
		case "handshake_delay":
			if t != DoT && t != DoH {
				return b, errors.New("handshake_delay applies to dot and doh only")
			}
			b.HandshakeDelay, err = parseDuration(v)
		case "idle_close":
			if t == UDP {
				return b, errors.New("idle_close applies to connections, not udp")
			}
			b.IdleClose, err = parseDuration(v)
		case "early_data":
			if t != DoQ {
				return b, errors.New("early_data applies to doq only")
			}
			b.EarlyData, err = strconv.ParseBool(v)
		case "tc":
			b.TC, err = strconv.ParseBool(v) // over a stream: hostile (docs/design.md#response-validation)
		case "refuse":
			b.Refuse, err = strconv.ParseBool(v)
		case "close_on_query":
			if t != TCP && t != DoT {
				return b, errors.New("close_on_query applies to tcp and dot only")
			}
			b.CloseOnQuery, err = parseCount(v)
		case "ede_text":
			b.EDEText, err = parseBytes(v)
		case "txt":
			b.TXT, err = parseBytes(v)
		case "tsig":
			b.TSIG, err = strconv.ParseBool(v)
		case "endless":
			if t != TCP && t != DoT {
				return b, errors.New("endless applies to tcp and dot only")
			}
			b.Endless, err = strconv.ParseBool(v)
		case "slow_bytes":
			if t != TCP && t != DoT {
				return b, errors.New("slow_bytes applies to tcp and dot only")
			}
			b.SlowBytes, err = parseDuration(v)
		default:
			return b, fmt.Errorf("unknown setting %q (want latency, jitter, stall, handshake_delay, idle_close, early_data, tc, refuse, close_on_query, ede_text, txt, tsig, endless, slow_bytes)", key)
		}
		if err != nil {
			return b, fmt.Errorf("%s=%s: %w", key, v, err)
		}
	}
	if b.Latency+b.Jitter > maxShaping {
		return b, fmt.Errorf("latency+jitter %v exceeds %v", b.Latency+b.Jitter, maxShaping)
	}
	return b, nil
}

func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, err
	case d < 0:
		return 0, errors.New("negative duration")
	case d > maxShaping:
		return 0, fmt.Errorf("above the %v bound", maxShaping)
	}
	return d, nil
}

// parseBytes reads a hostile size: 1 to maxHostileBytes.
func parseBytes(v string) (int, error) {
	n, err := parseCount(v)
	if err == nil && n > maxHostileBytes {
		return 0, fmt.Errorf("above the %d-byte bound", maxHostileBytes)
	}
	return n, err
}

// parseCount reads a query count: a whole number from 1 up.
func parseCount(v string) (int, error) {
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return 0, err
	case n < 1:
		return 0, errors.New("want 1 or more")
	}
	return n, nil
}

// key is the counters key: the listen URL without its query, with a port 0
// replaced by the port actually bound so two ephemeral listeners stay apart.
func (l Listen) key(bound net.Addr) string {
	u := *l.raw
	host, port, _ := net.SplitHostPort(u.Host)
	if port == "0" && bound != nil {
		if _, p, err := net.SplitHostPort(bound.String()); err == nil {
			u.Host = net.JoinHostPort(host, p)
		}
	}
	return u.String()
}
