package config

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// Local is the [local] section: local records and the names nxdns answers
// itself instead of leaking them to public upstreams (docs/design.md#local-answers).
type Local struct {
	// Records are resource records in zone-file syntax, one per string
	// ("nas.home. 300 IN A 192.168.1.50"); names are absolute whether or not
	// they end in a dot.
	Records []string `toml:"records"`
	// ForwardPrivate sends private reverse zones, single-label names and the
	// special-use names to the upstreams anyway (default false).
	ForwardPrivate bool `toml:"forward_private"`
	// BypassGuards answers use-application-dns.net and resolver.arpa
	// locally; nil means true.
	BypassGuards *bool `toml:"bypass_guards"`
}

// Guards reports whether the bypass guards are on.
func (l Local) Guards() bool { return l.BypassGuards == nil || *l.BypassGuards }

// DefaultRecordTTL is a local record's TTL when its text gives none: short,
// so an edited record shows on the LAN's devices within minutes.
const DefaultRecordTTL = 300

// maxRecordLen bounds one local record's text: a TXT record of 64 KiB is
// the wire limit; nothing a household writes comes near.
const maxRecordLen = 65535

func checkLocal(ps *Problems, l Local) {
	for i, s := range l.Records {
		path := fmt.Sprintf("local.records[%d]", i)
		if _, msg := ParseRecord(s); msg != "" {
			ps.add(path, CodeInvalidRecord, "%s", msg)
		}
	}
}

// ParseRecord parses one local record as [local] records takes it: zone-file
// syntax with the root as origin (a name without a trailing dot is absolute),
// class IN, one record per string. On failure it returns the message a
// problem carries.
func ParseRecord(s string) (dns.RR, string) {
	if len(s) > maxRecordLen {
		return nil, fmt.Sprintf("%d bytes: at most %d", len(s), maxRecordLen)
	}
	if strings.ContainsAny(s, "\n\r") {
		return nil, "one record per string: no line breaks"
	}
	if strings.HasPrefix(strings.TrimSpace(s), "$") {
		return nil, fmt.Sprintf("%q: zone-file directives ($ORIGIN, $INCLUDE, $TTL) are not taken", s)
	}
	zp := dns.NewZoneParser(strings.NewReader(s), ".", "")
	zp.SetIncludeAllowed(false)
	zp.SetDefaultTTL(DefaultRecordTTL)
	rr, ok := zp.Next()
	if err := zp.Err(); err != nil {
		return nil, fmt.Sprintf("%q: %v", s, err)
	}
	if !ok || rr == nil {
		return nil, fmt.Sprintf("%q: no record", s)
	}
	if _, more := zp.Next(); more {
		return nil, fmt.Sprintf("%q: one record per string", s)
	}
	h := rr.Header()
	if h.Class != dns.ClassINET {
		return nil, fmt.Sprintf("%q: class %s: local records are class IN", s, dns.ClassToString[h.Class])
	}
	switch h.Rrtype {
	case dns.TypeSOA, dns.TypeOPT, dns.TypeTSIG, dns.TypeRRSIG, dns.TypeNSEC, dns.TypeNSEC3, dns.TypeDNSKEY, dns.TypeDS:
		return nil, fmt.Sprintf("%q: type %s is not a local record nxdns can answer with", s, dns.TypeToString[h.Rrtype])
	}
	if h.Name == "." {
		return nil, fmt.Sprintf("%q: a record for the root", s)
	}
	if msg := checkWildcard(h.Name); msg != "" {
		return nil, fmt.Sprintf("%q: %s", s, msg)
	}
	return rr, ""
}

// checkWildcard accepts "*" only as a whole first label with a parent
// below the root (docs/local.md "Wildcards"): "*.lab.home.arpa." is a
// wildcard (RFC 4592); "a.*.lab." and "*x.lab." would be literal names
// that nobody means, and "*." would answer every name on the Internet.
func checkWildcard(name string) string {
	if !strings.Contains(name, "*") {
		return ""
	}
	first, rest, _ := strings.Cut(name, ".")
	switch {
	case first != "*" || strings.Contains(rest, "*"):
		return "'*' only as the whole first label of a wildcard (*.lab.home.arpa)"
	case rest == "":
		return "a wildcard for the root would answer every name: give it a parent (*.lab.home.arpa)"
	}
	return ""
}
