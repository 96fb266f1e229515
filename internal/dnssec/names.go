package dnssec

import (
	"bytes"
	"strings"

	"github.com/miekg/dns"
)

// canonical is a name in lower case, fully qualified (RFC 4034 §6.2).
func canonical(n string) string { return strings.ToLower(dns.Fqdn(n)) }

// parent is the name one label up; the root's parent is the root.
func parent(n string) string {
	if n == "." || n == "" {
		return "."
	}
	i, end := dns.NextLabel(n, 0)
	if end || i >= len(n) {
		return "."
	}
	return n[i:]
}

// under reports whether name is anc or below it.
func under(anc, name string) bool { return dns.IsSubDomain(anc, name) }

// strictlyUnder reports whether name is below anc and not anc itself.
func strictlyUnder(anc, name string) bool {
	return !strings.EqualFold(anc, name) && dns.IsSubDomain(anc, name)
}

// labels counts name's labels as an RRSIG's Labels field does: the root
// none, a leading wildcard label not at all (RFC 4034 §3.1.3).
func labels(name string) int {
	n := dns.CountLabel(name)
	if strings.HasPrefix(name, "*.") {
		n--
	}
	return n
}

// suffix is name's last n labels.
func suffix(name string, n int) string {
	idx := dns.Split(name)
	if n <= 0 || len(idx) == 0 {
		return "."
	}
	if n >= len(idx) {
		return name
	}
	return name[idx[len(idx)-n]:]
}

// compareNames orders names canonically (RFC 4034 §6.1): label by label
// from the root, each label's octets compared in lower case.
func compareNames(a, b string) int {
	la, lb := dns.SplitDomainName(a), dns.SplitDomainName(b)
	for i, j := len(la)-1, len(lb)-1; i >= 0 || j >= 0; i, j = i-1, j-1 {
		if i < 0 {
			return -1
		}
		if j < 0 {
			return 1
		}
		if c := bytes.Compare(labelOctets(la[i]), labelOctets(lb[j])); c != 0 {
			return c
		}
	}
	return 0
}

// labelOctets is a presentation-format label's octets in lower case:
// \DDD and \X escapes resolved.
func labelOctets(l string) []byte {
	b := make([]byte, 0, len(l))
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c == '\\' && i+1 < len(l) {
			if i+3 < len(l) && isDigit(l[i+1]) && isDigit(l[i+2]) && isDigit(l[i+3]) {
				c = (l[i+1]-'0')*100 + (l[i+2]-'0')*10 + (l[i+3] - '0')
				i += 3
			} else {
				i++
				c = l[i]
			}
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// rrset is one owner's records of one type with the RRSIGs covering them.
type rrset struct {
	name  string // canonical
	rtype uint16
	rrs   []dns.RR
	sigs  []*dns.RRSIG
}

// group splits a section into RRsets, in the order their first record
// appears.
func group(section []dns.RR) []*rrset {
	var sets []*rrset
	find := func(name string, t uint16) *rrset {
		for _, s := range sets {
			if s.rtype == t && s.name == name {
				return s
			}
		}
		s := &rrset{name: name, rtype: t}
		sets = append(sets, s)
		return s
	}
	for _, rr := range section {
		h := rr.Header()
		if h.Rrtype == dns.TypeOPT {
			continue
		}
		name := canonical(h.Name)
		if sig, ok := rr.(*dns.RRSIG); ok {
			s := find(name, sig.TypeCovered)
			s.sigs = append(s.sigs, sig)
			continue
		}
		s := find(name, h.Rrtype)
		s.rrs = append(s.rrs, rr)
	}
	// A signature over a type with no records is no RRset.
	out := sets[:0]
	for _, s := range sets {
		if len(s.rrs) > 0 {
			out = append(out, s)
		}
	}
	return out
}

func findSet(sets []*rrset, name string, t uint16) *rrset {
	for _, s := range sets {
		if s.rtype == t && s.name == name {
			return s
		}
	}
	return nil
}

func hasType(bitmap []uint16, t uint16) bool {
	for _, b := range bitmap {
		if b == t {
			return true
		}
	}
	return false
}
