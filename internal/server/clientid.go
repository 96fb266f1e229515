package server

import (
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"
	"go.uber.org/zap/zapcore"

	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/query"
)

// Identifier names a query's device (docs/devices.md): from ev.Client,
// ev.ClientMAC (a trusted forwarder's) and ev.ClientID, it sets
// ev.ClientName, ev.ClientMAC and ev.NewDevice. It must return at once.
type Identifier interface {
	Identify(ev *query.Event)
}

// uncounter is an Identifier that counts each query of a device
// (devices.View): the UDP fast path takes back the count of a query it
// identified and then hands to the general path, which counts it again.
type uncounter interface {
	Uncount(ev *query.Event)
}

// optionMAC is the EDNS0 option dnsmasq's add-mac puts the client's MAC in
// (six raw bytes; a code from the local/experimental range, RFC 6891 §9).
const optionMAC = 65001

// clientOptCounters count the client-identity options that were not
// believed (docs/reference/metrics.md nxdns_client_options_ignored_total)
// and the ClientIDs refused.
type clientOptCounters struct {
	macUntrusted    atomic.Uint64 // option 65001 from a source not in dns.trusted_forwarders
	subnetUntrusted atomic.Uint64 // client subnet from a source not in dns.trusted_forwarders
	macMalformed    atomic.Uint64 // option 65001 from a trusted forwarder that is not one unicast MAC
	subnetPartial   atomic.Uint64 // client subnet from a trusted forwarder naming a network, not one address
	clientIDInvalid atomic.Uint64 // a DoH path or DoT SNI label that is no valid ClientID
}

// ClientOptionCounts is clientOptCounters' snapshot.
type ClientOptionCounts struct {
	MACUntrusted, SubnetUntrusted, MACMalformed, SubnetPartial, ClientIDInvalid uint64
}

func (c *clientOptCounters) snapshot() ClientOptionCounts {
	return ClientOptionCounts{
		MACUntrusted: c.macUntrusted.Load(), SubnetUntrusted: c.subnetUntrusted.Load(),
		MACMalformed: c.macMalformed.Load(), SubnetPartial: c.subnetPartial.Load(),
		ClientIDInvalid: c.clientIDInvalid.Load(),
	}
}

// clientOptions reads the device a trusted forwarder names in the query's
// EDNS0 options (docs/devices.md "Behind a forwarder"): its MAC (option
// 65001) into ev.ClientMAC, and its address (a client subnet of a full
// /32 or /128, RFC 7871) into ev.Client, the forwarder then in ev.Via.
// From any other source the options are ignored and counted: a client
// could otherwise take another device's MAC or address, and with it that
// device's group. A client subnet of source prefix 0 is a client asking
// for none (RFC 7871 §7.1.2) and is not counted. The options are never
// forwarded (upstreamQuery builds nxdns's own OPT).
func (s *Server) clientOptions(q *pending) {
	if q.opt == nil || len(q.opt.Option) == 0 {
		return
	}
	trusted := allowed(q.st.Trusted, q.ev.Client)
	c := &s.stats.clientOpts
	for _, o := range q.opt.Option {
		switch o := o.(type) {
		case *dns.EDNS0_LOCAL:
			if o.Code != optionMAC {
				continue
			}
			mac, ok := devices.MAC{}, len(o.Data) == len(devices.MAC{})
			if ok {
				mac = devices.MAC(o.Data)
			}
			switch {
			case !trusted:
				c.macUntrusted.Add(1)
			case !ok || mac.IsZero() || mac[0]&1 != 0:
				c.macMalformed.Add(1)
			default:
				q.ev.ClientMAC = mac.String()
			}
		case *dns.EDNS0_SUBNET:
			if o.SourceNetmask == 0 {
				continue
			}
			if !trusted {
				c.subnetUntrusted.Add(1)
				continue
			}
			a, ok := netip.AddrFromSlice(o.Address)
			if !ok || int(o.SourceNetmask) != query.ClientOf(a).BitLen() {
				c.subnetPartial.Add(1)
				continue
			}
			q.ev.Via, q.ev.Client = q.ev.Client, query.ClientOf(a)
		}
	}
}

// dohClientID reads the ClientID of a DoH request path (docs/devices.md
// "ClientID"): "" for /dns-query, the ID for /dns-query/ID; ok is false
// for any other path, and for an ID that is no valid ClientID (markup, a
// further path, 10 kB of text), which is refused whole.
func dohClientID(path string) (id string, ok, valid bool) {
	if path == dohPath {
		return "", true, true
	}
	rest, found := strings.CutPrefix(path, dohPath+"/")
	if !found {
		return "", false, false
	}
	if !devices.ValidClientID(rest) {
		return "", true, false
	}
	return rest, true, true
}

// badClientID answers a DoH request whose ClientID is not one.
func (s *Server) badClientID(w http.ResponseWriter) {
	s.stats.clientOpts.clientIDInvalid.Add(1)
	s.dohError(w, http.StatusBadRequest, "invalid ClientID: want /dns-query/ID with ID one DNS label of 1 to 63 letters, digits or hyphens")
}

// sniClientID reads the ClientID of a DoT connection from its SNI
// (docs/devices.md "ClientID"): the first label of a server name one
// label longer than a name the served certificate holds ("tablet" in
// tablet.dns.example.org when the certificate holds dns.example.org or
// *.dns.example.org; never the served name itself). ok is false when the SNI names no ClientID; valid is
// false when its first label is no valid ClientID.
func sniClientID(sni string, served []string) (id string, ok, valid bool) {
	sni = strings.ToLower(strings.TrimSuffix(sni, "."))
	first, rest, found := strings.Cut(sni, ".")
	if !found {
		return "", false, false
	}
	for _, n := range served {
		if strings.EqualFold(n, sni) {
			return "", false, false // the served name itself
		}
	}
	for _, n := range served {
		n = strings.ToLower(strings.TrimPrefix(n, "*."))
		if rest == n {
			return first, true, devices.ValidClientID(first)
		}
	}
	return "", false, false
}

// dotClientID sets a DoT connection's ClientID from its SNI; it reports
// false, counted, for a ClientID label that is not valid: the connection is
// then closed before any query, the refusal a DoT client can be given.
func (s *Server) dotClientID(c *tcpConn, sni string) bool {
	st := s.gen.Load().st
	if sni == "" || st.ServedNames == nil {
		return true
	}
	id, ok, valid := sniClientID(sni, st.ServedNames())
	if ok && !valid {
		s.stats.clientOpts.clientIDInvalid.Add(1)
		return false
	}
	c.clientID = id
	return true
}

// addDevice adds the query-log fields of the device behind a query
// (docs/reference/logs.md): its MAC, its ClientID, the trusted forwarder it
// came through, and whether it is new; each only when there is one.
func addDevice(enc zapcore.ObjectEncoder, e *query.Event) {
	if e.ClientMAC != "" {
		enc.AddString("client_mac", e.ClientMAC)
	}
	if e.ClientID != "" {
		enc.AddString("client_id", e.ClientID)
	}
	if e.Via.IsValid() {
		enc.AddString("via", e.Via.String())
	}
	if e.NewDevice {
		enc.AddBool("new_device", true)
	}
}
