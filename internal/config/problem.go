package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Code names a kind of problem. Codes are stable: tests, `nxdns check` output
// and docs/reference/configuration.md match on them, never on the message.
// Each constant's value is its name without the "Code" prefix
// (TestCodes_valueIsName), so a code reads the same in Go and in the docs.
type Code string

// Decoding: the file is not the shape of the model.
const (
	CodeSyntax     Code = "Syntax"     // not valid TOML
	CodeUnknownKey Code = "UnknownKey" // a key or table the model does not have
	CodeDecode     Code = "Decode"     // a value of the wrong type, or a key defined twice
)

// Values: one key is wrong on its own.
const (
	CodeRequired          Code = "Required"          // a required key is missing or empty
	CodeOutOfRange        Code = "OutOfRange"        // a number outside its documented range
	CodeInvalidURL        Code = "InvalidURL"        // an upstream URL that does not parse or has the wrong shape
	CodeUnsupportedScheme Code = "UnsupportedScheme" // not tls/https (upstreams) or udp/tcp (zones)
	CodeUserinfo          Code = "Userinfo"          // user:password@ in an upstream URL
	CodeFragment          Code = "Fragment"          // #fragment in an upstream URL
	CodePathRequired      Code = "PathRequired"      // an https URL without a path
	CodeAddressRequired   Code = "AddressRequired"   // a host name in the URL and no address
	CodeInvalidAddress    Code = "InvalidAddress"    // not a usable IP address
	CodeInvalidName       Code = "InvalidName"       // not a valid host name (tls_name, URL host, client name)
	CodeCAFile            Code = "CAFile"            // ca_file not absolute, unreadable or without a PEM certificate
	CodeInvalidZone       Code = "InvalidZone"       // not a valid zone name
	CodeInvalidResolver   Code = "InvalidResolver"   // a zone resolver that is not IP:port
	CodeInvalidCIDR       Code = "InvalidCIDR"       // not a CIDR prefix
	CodeInvalidListen     Code = "InvalidListen"     // not an IP:port to listen on
	CodeInvalidLevel      Code = "InvalidLevel"      // not one of debug, info, warn, error
	CodeTLSFile           Code = "TLSFile"           // tls.cert_file or tls.key_file not an absolute path
	CodeNotAbsolute       Code = "NotAbsolute"       // a file path (history.path, web.password_file) that is not absolute
	CodeInvalidRecord     Code = "InvalidRecord"     // a local record that does not parse as one IN record
	CodeInvalidChoice     Code = "InvalidChoice"     // not one of a key's documented values (filter kind, block_response)
	CodeInvalidPath       Code = "InvalidPath"       // a file or directory path that is not absolute
	CodeInvalidSchedule   Code = "InvalidSchedule"   // a schedule window with a bad day or time, or an empty one
)

// Cross-checks: keys that are fine alone but not together.
const (
	CodeAttemptAboveTotal Code = "AttemptAboveTotal" // attempt_timeout_ms > total_timeout_ms
	CodeMinAboveMax       Code = "MinAboveMax"       // cache_min_ttl > cache_max_ttl
	CodeNoUpstreams       Code = "NoUpstreams"       // no enabled upstream
	CodeTooManyUpstreams  Code = "TooManyUpstreams"  // more than MaxUpstreams enabled
	CodeDuplicate         Code = "Duplicate"         // a second URL, zone, client IP or listen address
	CodeListenConflict    Code = "ListenConflict"    // a TLS listen address that a wildcard on the same port overlaps
	CodeCacheFile         Code = "CacheFile"         // dns.cache_file not absolute, or not a regular file
	CodeLoop              Code = "Loop"              // a forward zone's resolver is one of nxdns's own listen addresses
	CodePasswordRequired  Code = "PasswordRequired"  // a non-loopback web.listen without web.password_file
	CodeURLAndPath        Code = "URLAndPath"        // a filter list with both url and path
	CodeUnknownList       Code = "UnknownList"       // a group naming a list that does not exist
	CodeUnknownClient     Code = "UnknownClient"     // a group client that is no IP, CIDR or [[clients]] name
	CodeTooManyLists      Code = "TooManyLists"      // more than MaxFilterLists lists
	CodeStateDirRequired  Code = "StateDirRequired"  // a downloaded list without filter.state_dir
	CodeUnknownService    Code = "UnknownService"    // a group naming a service the catalogue does not have

	// Problems found by reading what the configuration names, beyond the
	// file itself: nxdns check and a reload report them (app.Preflight).
	CodeInvalidRule  Code = "InvalidRule"  // a filter.block or filter.allow entry the list parser does not take
	CodePasswordFile Code = "PasswordFile" // web.password_file unreadable or without a bcrypt hash
	CodeCertificate  Code = "Certificate"  // tls.cert_file and tls.key_file do not load as a pair
	CodeTrustAnchors Code = "TrustAnchors" // dnssec.trust_anchors_file not absolute, unreadable or without DS/DNSKEY records
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	Path    string // the key, e.g. "upstreams[2].url" or "dns.allow[1]"; "" for the whole file
	Code    Code
	Message string
	Line    int // 1-based line in the file; 0 when unknown (Validate alone, or a defaulted key)
}

// String is "path: message", with " (line N)" when the line is known.
func (p Problem) String() string {
	var b strings.Builder
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	if p.Line > 0 {
		b.WriteString(" (line ")
		b.WriteString(strconv.Itoa(p.Line))
		b.WriteString(")")
	}
	return b.String()
}

// Problems is every problem found: decoding's first, then Validate's in the
// order of the model's sections. It is the error Load and LoadFile return,
// one problem per line.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Err is ps as an error, or nil when there is none. Use it rather than
// returning ps directly: an empty Problems in an error interface is not nil.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// Has reports whether a problem with this path and code is present.
func (ps Problems) Has(path string, code Code) bool {
	for _, p := range ps {
		if p.Path == path && p.Code == code {
			return true
		}
	}
	return false
}

// add appends a problem; a small helper so validators read as a list of rules.
func (ps *Problems) add(path string, code Code, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Code: code, Message: fmt.Sprintf(format, args...)})
}
