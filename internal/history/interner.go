package history

import "net/netip"

// maxInterned bounds each of an interner's tables. Past it, strings are
// copied as if there were no interner, so a flood of unique names costs
// what it did without one and never more.
const maxInterned = 4096

// interner hands out one copy of each distinct string, client address and
// bucket name it is shown (up to maxInterned of each). One flush's rows
// repeat a few names, clients and upstreams thousands of times: copying
// and lower-casing each one was most of a busy flush's work and garbage.
// Not safe for concurrent use: one per flush or search. A nil interner
// copies every string.
type interner struct {
	strs    map[string]string
	names   map[string]string // name as asked → normName of it
	clients map[netip.Addr]string
}

func newInterner() *interner {
	return &interner{strs: map[string]string{}, names: map[string]string{}, clients: map[netip.Addr]string{}}
}

// string is b as a string.
func (in *interner) string(b []byte) string {
	if in == nil {
		return string(b)
	}
	if s, ok := in.strs[string(b)]; ok { // the conversion in a lookup does not allocate
		return s
	}
	s := string(b)
	if len(in.strs) < maxInterned {
		in.strs[s] = s
	}
	return s
}

// name is normName(name).
func (in *interner) name(name string) string {
	if in == nil {
		return normName(name)
	}
	if s, ok := in.names[name]; ok {
		return s
	}
	s := normName(name)
	if len(in.names) < maxInterned {
		in.names[name] = s
	}
	return s
}

// client is a.String().
func (in *interner) client(a netip.Addr) string {
	if in == nil {
		return a.String()
	}
	if s, ok := in.clients[a]; ok {
		return s
	}
	s := a.String()
	if len(in.clients) < maxInterned {
		in.clients[a] = s
	}
	return s
}
