package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unicode"
)

// Ranges of docs/design.md#configuration and of the decisions written in
// docs/reference/configuration.md.
const (
	minTimeoutMS = 100     // below this not even a LAN TLS handshake completes
	maxTimeoutMS = 120_000 // two minutes: every stub resolver has given up long before

	maxCacheSize   = 1_000_000 // entries of a few hundred bytes: bounded well inside a Pi's memory
	minCacheBytes  = 1 << 20   // 1 MiB: a few hundred ordinary answers; an entry may take 1/64 of it (docs/cache.md)
	maxCacheBytes  = 64 << 30  // 64 GiB: beyond any household's memory
	maxCacheMinTTL = 3600      // seconds; raising TTLs further hides a changed record too long
	maxCacheMaxTTL = 604800    // seconds (7 days)
	maxStaleMaxAge = 604800    // seconds (7 days); RFC 8767 §5 suggests 1 to 3 days

	maxClientName = 64 // bytes; a log field, not a DNS name
)

// logLevels are the accepted log.level values, in increasing severity.
var logLevels = []string{"debug", "info", "warn", "error"}

// Validate checks c against every rule of docs/design.md#configuration and returns all problems,
// in the order of the model's sections; nil means c is valid. It is pure:
// the files c names are read and checked by ReadFiles, which Load calls
// first. The problems carry no line: Load adds lines for the keys a file
// declares.
func Validate(c Config) Problems {
	var ps Problems
	checkDNS(&ps, c.DNS)
	checkTimeouts(&ps, c.Upstream)
	checkUpstreams(&ps, c.Upstreams)
	checkZones(&ps, c.ForwardZones, c.DNS.Listen)
	checkClients(&ps, c.Clients)
	checkWeb(&ps, c.Web, c.TLS)
	checkTLS(&ps, c.TLS, c.DNS.Listen)
	checkLog(&ps, c.Log)
	checkHistory(&ps, c.History)
	checkWebAuth(&ps, c.Web)
	checkLocal(&ps, c.Local)
	checkFilter(&ps, c.Filter, c.Clients)
	checkGroupUpstreams(&ps, c) // pools.go
	checkDNSSEC(&ps, c.DNSSEC)
	checkDevices(&ps, c) // docs/devices.md
	checkMQTT(&ps, c.MQTT)
	checkPeers(&ps, c.Peers, c.Filter)
	return ps
}

func checkDNS(ps *Problems, d DNS) {
	checkListen(ps, d.Listen)
	checkAllow(ps, d.Allow)
	checkCache(ps, d)
	checkGuards(ps, d) // guards.go
}

func checkListen(ps *Problems, listen []string) { checkListenAt(ps, "dns.listen", listen) }

// checkListenAt checks a list of listen addresses; base names the list in
// problems ("dns.listen", or "--listen" for the command line's).
func checkListenAt(ps *Problems, base string, listen []string) {
	if len(listen) == 0 {
		ps.add(base, CodeRequired, "no listen address: nxdns would answer nobody")
	}
	seen := map[netip.AddrPort]int{}
	for i, s := range listen {
		path := fmt.Sprintf("%s[%d]", base, i)
		ap, msg := parseListen(s, "53")
		if msg != "" {
			ps.add(path, CodeInvalidListen, "%q: %s", s, msg)
			continue
		}
		if j, dup := seen[ap]; dup {
			ps.add(path, CodeDuplicate, "%s is already %s[%d]", ap, base, j)
			continue
		}
		seen[ap] = i
	}
}

func checkCache(ps *Problems, d DNS) {
	checkRange(ps, "dns.cache_size", d.CacheSize, 0, maxCacheSize)
	checkRange(ps, "dns.cache_max_bytes", d.CacheBytes, minCacheBytes, maxCacheBytes)
	minOK := checkRange(ps, "dns.cache_min_ttl", d.CacheMinTTL, 0, maxCacheMinTTL)
	maxOK := checkRange(ps, "dns.cache_max_ttl", d.CacheMaxTTL, 1, maxCacheMaxTTL)
	if minOK && maxOK && d.CacheMinTTL > d.CacheMaxTTL {
		ps.add("dns.cache_min_ttl", CodeMinAboveMax, "%d is above dns.cache_max_ttl (%d)", d.CacheMinTTL, d.CacheMaxTTL)
	}
	checkRange(ps, "dns.stale_max_age", d.StaleMaxAge, 0, maxStaleMaxAge)
	checkCacheFile(ps, d.CacheFile)
}

func checkTimeouts(ps *Problems, u Upstream) {
	attemptOK := checkRange(ps, "upstream.attempt_timeout_ms", u.AttemptTimeoutMS, minTimeoutMS, maxTimeoutMS)
	totalOK := checkRange(ps, "upstream.total_timeout_ms", u.TotalTimeoutMS, minTimeoutMS, maxTimeoutMS)
	checkRange(ps, "upstream.read_timeout_ms", u.ReadTimeoutMS, minTimeoutMS, maxTimeoutMS)
	if attemptOK && totalOK && u.AttemptTimeoutMS > u.TotalTimeoutMS {
		ps.add("upstream.attempt_timeout_ms", CodeAttemptAboveTotal,
			"%d is above upstream.total_timeout_ms (%d): no attempt can outlive the query's budget",
			u.AttemptTimeoutMS, u.TotalTimeoutMS)
	}
}

func checkClients(ps *Problems, cs []Client) {
	seen := map[netip.Addr]int{}
	for i, c := range cs {
		path := fmt.Sprintf("clients[%d]", i)
		switch {
		case c.Name == "":
			ps.add(path+".name", CodeRequired, "missing: a client is an ip and a name")
		case len(c.Name) > maxClientName || strings.IndexFunc(c.Name, unicode.IsControl) >= 0:
			ps.add(path+".name", CodeInvalidName, "%q: at most %d bytes, no control characters", c.Name, maxClientName)
		}
		if c.IP == "" && (c.MAC != "" || c.ClientID != "") {
			continue // a device named by its MAC or ClientID (checkDevices)
		}
		if c.IP == "" {
			ps.add(path+".ip", CodeRequired, "missing: a client is a name and an ip, a mac or a client_id")
			continue
		}
		ip, err := netip.ParseAddr(c.IP)
		if err != nil || ip.Zone() != "" {
			ps.add(path+".ip", CodeInvalidAddress, "%q is not an IP address (without %%zone)", c.IP)
			continue
		}
		ip = ip.Unmap() // a v4 client may arrive as ::ffff:a.b.c.d on a dual-stack socket
		if j, dup := seen[ip]; dup {
			ps.add(path+".ip", CodeDuplicate, "%s is already clients[%d].ip", ip, j)
			continue
		}
		seen[ip] = i
	}
}

func checkWeb(ps *Problems, w Web, t TLS) {
	if w.TLSListen != "" {
		switch _, msg := parseListen(w.TLSListen, "9443"); {
		case msg != "":
			ps.add("web.tls_listen", CodeInvalidListen, "%q: %s", w.TLSListen, msg)
		case w.Listen == "":
			ps.add("web.tls_listen", CodeRequired, "needs web.listen: the web endpoint is off while web.listen is empty")
		case w.TLSListen == w.Listen:
			ps.add("web.tls_listen", CodeDuplicate, "%s is web.listen already: HTTPS needs an address or port of its own", w.TLSListen)
		case slices.Contains(t.DoHListen, w.TLSListen) || slices.Contains(t.DoTListen, w.TLSListen):
			ps.add("web.tls_listen", CodeDuplicate, "%s is a DoT or DoH listener already (tls.dot_listen, tls.doh_listen): the dashboard needs a port of its own, e.g. 9443", w.TLSListen)
		case t.CertFile == "" || t.KeyFile == "":
			ps.add("web.tls_listen", CodeRequired, "serving the dashboard over HTTPS needs tls.cert_file and tls.key_file")
		}
	}
	if w.Listen == "" {
		return // disabled
	}
	if _, msg := parseListen(w.Listen, "9153"); msg != "" {
		ps.add("web.listen", CodeInvalidListen, "%q: %s", w.Listen, msg)
	}
	for i, h := range w.Hostnames {
		if !validHost(h) {
			ps.add(fmt.Sprintf("web.hostnames[%d]", i), CodeInvalidName,
				"%q: want a host name without port or scheme, e.g. \"nxdns.home.arpa\" (IP addresses of web.listen are accepted already)", h)
		}
	}
}

func checkLog(ps *Problems, l Log) {
	for _, lv := range logLevels {
		if l.Level == lv {
			return
		}
	}
	ps.add("log.level", CodeInvalidLevel, "%q: want one of %s", l.Level, strings.Join(logLevels, ", "))
}

// checkRange adds OutOfRange unless lo <= v <= hi, and reports whether v is
// in range, so that cross-checks skip values already reported.
func checkRange[T int | int64](ps *Problems, path string, v, lo, hi T) bool {
	if v < lo || v > hi {
		ps.add(path, CodeOutOfRange, "%d is not between %d and %d", v, lo, hi)
		return false
	}
	return true
}

// parseListen parses a listen address: an IP literal and a port, since nxdns
// resolves no names (not even to bind). It returns a message on failure,
// whose examples use port.
func parseListen(s, port string) (netip.AddrPort, string) {
	ap, err := netip.ParseAddrPort(s)
	switch {
	case err != nil:
		if msg := portProblem(s); msg != "" {
			return ap, msg
		}
		return ap, fmt.Sprintf("want IP:port, e.g. 127.0.0.1:%s or [::1]:%s (0.0.0.0:%s for every IPv4 address)", port, port, port)
	case ap.Port() == 0:
		return ap, "port 0 is not a port to serve on"
	case ap.Addr().IsMulticast():
		return ap, "a multicast address"
	}
	return ap, ""
}
