package local

import (
	"strings"

	"github.com/miekg/dns"
)

// Wildcard local records (docs/local.md "Wildcards"): "*.lab.home.arpa. A
// 192.168.1.20" answers every name below lab.home.arpa that no local
// record names, with the RFC 4592 rules that make sense for a forwarder:
//
//   - an exact record wins: a name that has local records (of any type)
//     is answered from them, never from the wildcard (NODATA when it has
//     none of the type asked);
//   - the wildcard answers a name only through its closest encloser: a
//     name below another existing local name (x.nas.lab.home.arpa. when
//     nas.lab.home.arpa. has records, or is an empty non-terminal above
//     one) is not matched by *.lab.home.arpa. — RFC 4592 §2.2.1 — and
//     passes on, where an authoritative server would answer NXDOMAIN;
//   - it matches any number of labels (a.b.lab.home.arpa.), and never the
//     parent itself (lab.home.arpa. passes on);
//   - the answer's records carry the name asked, and a wildcard CNAME is
//     followed inside the local data as an exact one is.

// isWildcard reports whether name's first label is "*".
func isWildcard(name string) bool { return strings.HasPrefix(name, "*.") }

// indexWildcards collects the wildcards by their parent and, when there is
// one, every existing name: the owners and each name above them.
func (s *Stage) indexWildcards() {
	for name, o := range s.names {
		if isWildcard(name) {
			if s.wild == nil {
				s.wild = map[string]*owner{}
			}
			w := *o
			w.wild = true
			s.wild[name[2:]] = &w
		}
	}
	if s.wild == nil {
		return
	}
	s.exists = map[string]bool{}
	for name := range s.names {
		for n := name; n != "" && n != "."; n = after(n) {
			s.exists[n] = true
		}
	}
}

// after is name without its first label ("" past the last one).
func after(name string) string {
	i := strings.IndexByte(name, '.')
	if i < 0 || i == len(name)-1 {
		return ""
	}
	return name[i+1:]
}

// lookup is the local data for name (lower case, fully qualified): its own
// records, else the wildcard of its closest encloser, if that has one.
func (s *Stage) lookup(name string) *owner {
	if o := s.names[name]; o != nil || s.wild == nil {
		return o
	}
	if s.exists[name] {
		return nil // an empty non-terminal exists: no wildcard stands for it
	}
	for n := after(name); n != ""; n = after(n) {
		if s.exists[n] {
			return s.wild[n] // the closest encloser: its wildcard, or none
		}
	}
	return nil
}

// at is rr as the answer carries it: a wildcard's records under the name
// asked (RFC 4592 §3.3.1), an exact record as given.
func (o *owner) at(rr dns.RR, name string) dns.RR {
	if !o.wild {
		return rr
	}
	c := dns.Copy(rr)
	c.Header().Name = name
	return c
}
