package config

import (
	"bytes"
	"fmt"
	"path/filepath"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/safefile"
)

// DNSSEC is the [dnssec] section: validation of the upstreams' answers
// (docs/dnssec.md).
type DNSSEC struct {
	// Mode is off, shadow (validate, count and log, answer as before) or
	// enforce (bogus answers become SERVFAIL once the clock is set).
	Mode string `toml:"mode"`
	// TrustAnchorsFile holds DS or DNSKEY records in zone-file syntax that
	// replace the built-in root anchors; "" keeps them.
	TrustAnchorsFile string `toml:"trust_anchors_file"`
	// NegativeTrustAnchors are names not validated, with everything below
	// them (RFC 7646).
	NegativeTrustAnchors []string `toml:"negative_trust_anchors"`
	// ClockSkew is the error of the system clock, in seconds, allowed
	// either side of a signature's validity period.
	ClockSkew int `toml:"clock_skew"`
	// Anchors are TrustAnchorsFile's records as ReadFiles read and checked
	// them.
	Anchors []dns.RR `toml:"-"`
}

// The [dnssec] modes.
const (
	DNSSECOff     = "off"
	DNSSECShadow  = "shadow"
	DNSSECEnforce = "enforce"
)

const (
	maxClockSkew       = 86400   // seconds: a day; Unbound's val-sig-skew-max
	maxTrustAnchorFile = 1 << 16 // a handful of DS records; 64 KiB is plenty
)

func defaultDNSSEC() DNSSEC { return DNSSEC{Mode: DNSSECShadow, ClockSkew: 3600} }

// Validates reports whether a forward zone's answers are validated
// (forward_zones.validate, default false: a router's local zone is
// unsigned).
func (z ForwardZone) Validates() bool { return z.Validate != nil && *z.Validate }

func checkDNSSEC(ps *Problems, d DNSSEC) {
	switch d.Mode {
	case DNSSECOff, DNSSECShadow, DNSSECEnforce:
	default:
		ps.add("dnssec.mode", CodeInvalidChoice, "%q: one of off, shadow, enforce", d.Mode)
	}
	if d.ClockSkew < 0 || d.ClockSkew > maxClockSkew {
		ps.add("dnssec.clock_skew", CodeOutOfRange, "%d: 0 to %d seconds", d.ClockSkew, maxClockSkew)
	}
	for i, n := range d.NegativeTrustAnchors {
		if n != "." && !validZone(n) {
			ps.add(fmt.Sprintf("dnssec.negative_trust_anchors[%d]", i), CodeInvalidZone, "%q is not a domain name", n)
		}
	}
}

// readAnchors reads and parses trust_anchors_file (ReadFiles).
func (d *DNSSEC) readAnchors() error {
	if d.TrustAnchorsFile == "" {
		return nil
	}
	if !filepath.IsAbs(d.TrustAnchorsFile) {
		return fmt.Errorf("%q %w", d.TrustAnchorsFile, errNotAbsolute)
	}
	b, err := safefile.ReadFile(d.TrustAnchorsFile, maxTrustAnchorFile)
	if err != nil {
		return err
	}
	rrs, err := ParseAnchors(b, d.TrustAnchorsFile)
	if err != nil {
		return err
	}
	d.Anchors = rrs
	return nil
}

// ParseAnchors reads DS and DNSKEY records in zone-file syntax; any other
// record, none at all, or a line that does not parse is an error naming
// the file.
func ParseAnchors(b []byte, file string) ([]dns.RR, error) {
	zp := dns.NewZoneParser(bytes.NewReader(b), ".", file)
	zp.SetIncludeAllowed(false)
	zp.SetDefaultTTL(3600) // anchors as IANA and keymgr print them carry no TTL
	var out []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		switch rr.(type) {
		case *dns.DS, *dns.DNSKEY:
			out = append(out, rr)
		default:
			return nil, fmt.Errorf("%s: %s %s is not a DS or DNSKEY record", file, rr.Header().Name, dns.TypeToString[rr.Header().Rrtype])
		}
	}
	if err := zp.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no DS or DNSKEY record", file)
	}
	return out, nil
}
