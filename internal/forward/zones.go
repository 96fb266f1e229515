// Package forward sends the queries of configured local zones to the LAN's
// own resolver (docs/design.md#forward-zones): longest-suffix zone matching, the UDP/TCP forward
// client whose one read_timeout deadline bounds the whole exchange, and
// client names learned by PTR lookups through reverse zones (docs/design.md#learned-names).
package forward

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/upstream"
)

// Resolver schemes (docs/design.md#config-upstreams forward_zones[].resolver).
const (
	netUDP = "udp" // one datagram; TC=1 falls back to TCP
	netTCP = "tcp" // straight to TCP, RFC 1035 §4.2.2 length framing
)

// Zone is one forward zone: names at or below it go to its one resolver.
// It implements the server's Resolver seam (Resolve, in client.go). Its
// configuration is fixed by NewTable; only the counters change.
type Zone struct {
	name    string         // lower-cased FQDN, e.g. "lan." or "168.192.in-addr.arpa."
	url     string         // canonical resolver URL, e.g. "udp://192.168.1.1:53"
	network string         // netUDP or netTCP: the first leg
	addr    netip.AddrPort // the resolver; never resolved by name
	udpAddr *net.UDPAddr   // addr, converted once for DialUDP
	tcpAddr string         // addr, formatted once for the dialer
	timeout time.Duration  // read_timeout: the whole exchange, every leg together

	client upstream.Client // a tls://, https://, quic:// or h3:// resolver's transport (encrypted.go); nil for udp/tcp

	queries   atomic.Uint64 // every Resolve call
	failures  atomic.Uint64 // exchanges that failed on the resolver's account (peer faults)
	truncated atomic.Uint64 // UDP answers with TC=1 that fell back to TCP

	health zoneHealth // reachability, from live exchanges and probes (probe.go)
}

// Name is the zone, a lower-cased FQDN.
func (z *Zone) Name() string { return z.name }

// URL is the zone's resolver as the query log and metrics name it.
func (z *Zone) URL() string { return z.url }

// Table is the set of forward zones, matched by longest suffix. It is
// immutable once built and safe for concurrent use; a reload builds a new one.
// A nil *Table matches nothing.
type Table struct {
	zones  []*Zone          // configuration order, for Snapshot
	byName map[string]*Zone // keyed by lower-cased FQDN

	stop func()         // ends the probers; nil until Start
	wg   sync.WaitGroup // the probers
}

// NewTable builds the forward zones of a configuration. readTimeout bounds
// each whole exchange (docs/design.md#config-budgets upstream.read_timeout_ms). Config validation
// reports the same rules with paths and codes; NewTable rejects them again so
// that a Table never holds an unusable zone.
func NewTable(zones []config.ForwardZone, readTimeout time.Duration) (*Table, error) {
	if readTimeout <= 0 {
		return nil, fmt.Errorf("forward: read timeout %v must be positive", readTimeout)
	}
	t := &Table{byName: make(map[string]*Zone, len(zones))}
	for i, fz := range zones {
		z, err := newZone(fz, readTimeout)
		if err != nil {
			t.closeClients()
			return nil, fmt.Errorf("forward_zones[%d].%w", i, err) // err names the key
		}
		if _, dup := t.byName[z.name]; dup {
			z.closeClient()
			t.closeClients()
			return nil, fmt.Errorf("forward_zones[%d].zone: %q is declared twice", i, z.name)
		}
		t.zones = append(t.zones, z)
		t.byName[z.name] = z
	}
	return t, nil
}

func newZone(fz config.ForwardZone, timeout time.Duration) (*Zone, error) {
	name := dns.CanonicalName(fz.Zone)
	if _, ok := dns.IsDomainName(name); !ok || fz.Zone == "" {
		return nil, fmt.Errorf("zone: %q is not a valid domain name", fz.Zone)
	}
	if config.EncryptedResolver(fz.Resolver) {
		return newEncryptedZone(name, fz, timeout)
	}
	network, addr, err := parseResolver(fz.Resolver)
	if err != nil {
		return nil, fmt.Errorf("resolver: %w", err)
	}
	return &Zone{
		name:    name,
		url:     network + "://" + addr.String(),
		network: network,
		addr:    addr,
		udpAddr: net.UDPAddrFromAddrPort(addr),
		tcpAddr: addr.String(),
		timeout: timeout,
		health:  newZoneHealth(),
	}, nil
}

// parseResolver accepts udp://IP:port or tcp://IP:port (encrypted schemes
// go to newEncryptedZone first): an IP literal (nxdns
// never resolves a resolver's name) and a mandatory port, nothing else.
func parseResolver(raw string) (network string, addr netip.AddrPort, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", netip.AddrPort{}, fmt.Errorf("invalid URL %q", raw)
	}
	if u.Scheme != netUDP && u.Scheme != netTCP {
		return "", netip.AddrPort{}, fmt.Errorf("%q: scheme must be udp, tcp, tls, https, quic or h3", raw)
	}
	if u.User != nil || u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", netip.AddrPort{}, fmt.Errorf("%q: only scheme, IP and port are allowed", raw)
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil || ip.Zone() != "" {
		return "", netip.AddrPort{}, fmt.Errorf("%q: host must be an IP literal", raw)
	}
	port, err := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil || port == 0 {
		return "", netip.AddrPort{}, fmt.Errorf("%q: a port (1-65535) is required", raw)
	}
	return u.Scheme, netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
}

// Match returns the zone with the longest suffix of qname, comparing whole
// labels case-insensitively: "a.iot.lan." prefers zone "iot.lan." over
// "lan.", "lan." matches zone "lan.", and "notlan." does not match it. It
// walks qname's label suffixes from the longest and looks each up in a map,
// so its cost is one lookup per label, independent of the number of zones,
// and it allocates nothing for a lower-case FQDN (what a query carries).
func (t *Table) Match(qname string) (*Zone, bool) {
	if t == nil || len(t.byName) == 0 {
		return nil, false
	}
	name := strings.ToLower(qname) // returns qname itself when it has no upper case
	if !dns.IsFqdn(name) {
		name += "."
	}
	for off := 0; ; {
		if z, ok := t.byName[name[off:]]; ok {
			return z, true
		}
		next, end := dns.NextLabel(name, off) // skips escaped dots ("a\.b")
		if end {
			break
		}
		off = next
	}
	z, ok := t.byName["."] // the root zone covers every name
	return z, ok
}

// Zones lists the zones in configuration order.
func (t *Table) Zones() []*Zone {
	if t == nil {
		return nil
	}
	return append([]*Zone(nil), t.zones...)
}

// ZoneSnapshot is one zone's counters at one instant, for /metrics
// (docs/design.md#metrics: forward-zone queries, failures and TC=1 fallbacks).
type ZoneSnapshot struct {
	Zone      string // lower-cased FQDN
	Resolver  string // canonical resolver URL
	Queries   uint64 // Resolve calls, PTR lookups for client names included
	Failures  uint64 // failed on the resolver's account (peer faults only)
	Truncated uint64 // TC=1 answers that fell back to TCP

	Down         bool   // unreachable: consecutive failures or a failed probe, until an answer
	ProbesOK     uint64 // background probes answered
	ProbesFailed uint64 // background probes that failed
}

// Snapshot reads every zone's counters, in configuration order. Each counter
// is read atomically; the set is not one instant, which a scrape tolerates.
func (t *Table) Snapshot() []ZoneSnapshot {
	if t == nil {
		return nil
	}
	out := make([]ZoneSnapshot, len(t.zones))
	for i, z := range t.zones {
		out[i] = ZoneSnapshot{
			Zone:      z.name,
			Resolver:  z.url,
			Queries:   z.queries.Load(),
			Failures:  z.failures.Load(),
			Truncated: z.truncated.Load(),

			Down:         z.health.down.Load(),
			ProbesOK:     z.health.probesOK.Load(),
			ProbesFailed: z.health.probesFailed.Load(),
		}
	}
	return out
}
