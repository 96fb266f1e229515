package config

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// The decoder reports a key without array indices (["upstreams", "url"]) and
// Validate knows no lines. A siteMap bridges both: one pass over the
// document's syntax records every key and array element with its indexed
// path ("upstreams[1].url", "dns.allow[0]") and its byte range, so a decode
// error's position becomes a path and a validation problem's path a line.
//
// It uses go-toml's unstable parser (the same parser the decoder runs), pinned
// by go.mod; if a go-toml upgrade changes it, TestLoad_unknownKeyPathAndLine
// and TestLoad_validationProblemsCarryLines fail.

// site is one key, table header or array element of the document.
type site struct {
	path       string
	start, end int           // byte offsets, end exclusive
	header     bool          // a [table] or [[array]] header: a place for decode errors, not a key's line
	kind       unstable.Kind // the value's TOML type; Invalid for a header
}

type siteMap struct {
	doc   []byte
	sites []site
	elems map[string]int // "upstreams[1]" → offset of its [[upstreams]] header or inline {
	ok    bool           // the whole document parsed; false means a syntax error

	// singleTables are [name] headers of keys the model holds as a list of
	// tables ([upstreams] where [[upstreams]] is meant): go-toml takes one as
	// a one-element list and fails confusingly on the next, so Load reports
	// them itself (listTableProblems).
	singleTables []site
}

// locate records the sites of doc. A syntax error stops it; the sites found
// before it are kept.
func locate(doc []byte) *siteMap {
	m := &siteMap{doc: doc, elems: map[string]int{}}
	counts := map[string]int{} // [[name]] headers seen so far, by name
	prefix := ""
	var p unstable.Parser
	p.Reset(doc)
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			prefix = keyPath(e)
			m.addRange(prefix, e)
			if isTableList(modelType(prefix)) {
				m.singleTables = append(m.singleTables, m.sites[len(m.sites)-1])
			}
		case unstable.ArrayTable:
			name := keyPath(e)
			prefix = name + "[" + strconv.Itoa(counts[name]) + "]"
			counts[name]++
			m.addRange(name, e)
			m.elems[prefix] = m.sites[len(m.sites)-1].start
		case unstable.KeyValue:
			m.keyValue(prefix, e)
		}
	}
	m.ok = p.Error() == nil
	return m
}

// keyValue records a key = value line, descending into inline tables and
// arrays so that their keys and elements get sites of their own.
func (m *siteMap) keyValue(prefix string, kv *unstable.Node) {
	path := join(prefix, keyPath(kv))
	v := kv.Value()
	m.sites = append(m.sites, site{path: path, start: int(kv.Raw.Offset), end: int(kv.Raw.Offset + kv.Raw.Length), kind: v.Kind})
	m.value(path, v)
}

func (m *siteMap) value(path string, v *unstable.Node) {
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			m.keyValue(path, it.Node())
		}
	case unstable.Array:
		it := v.Children()
		for i := 0; it.Next(); i++ {
			elem := path + "[" + strconv.Itoa(i) + "]"
			n := it.Node()
			switch n.Kind {
			case unstable.InlineTable:
				m.elems[elem] = int(n.Raw.Offset)
			case unstable.Array:
				// no range of its own; its elements get sites
			default:
				m.sites = append(m.sites, site{path: elem, start: int(n.Raw.Offset), end: int(n.Raw.Offset + n.Raw.Length), kind: n.Kind})
			}
			m.value(elem, n)
		}
	}
}

// addRange records a table header, spanning its key parts.
func (m *siteMap) addRange(path string, header *unstable.Node) {
	it := header.Key()
	start, end := -1, -1
	for it.Next() {
		r := it.Node().Raw
		if start < 0 {
			start = int(r.Offset)
		}
		end = int(r.Offset + r.Length)
	}
	m.sites = append(m.sites, site{path: path, start: start, end: end, header: true})
}

// site is the innermost site containing the 1-based line and byte column.
func (m *siteMap) site(line, col int) (site, bool) {
	off := m.offset(line, col)
	best := -1
	for i, s := range m.sites {
		if off < s.start || off >= s.end {
			continue
		}
		if best < 0 || s.end-s.start < m.sites[best].end-m.sites[best].start {
			best = i
		}
	}
	if best < 0 {
		return site{}, false
	}
	return m.sites[best], true
}

// line is the 1-based line where path is declared. A key the file leaves out
// of an element (upstreams[1].address) gets the element's line; a key the
// file does not declare at all (a default, or a whole list) gets 0.
func (m *siteMap) line(path string) int {
	for _, s := range m.sites {
		if s.path == path && !s.header {
			return m.lineAt(s.start)
		}
	}
	if i := strings.LastIndexByte(path, '.'); i > 0 {
		if off, ok := m.elems[path[:i]]; ok {
			return m.lineAt(off)
		}
	}
	return 0
}

func (m *siteMap) lineAt(off int) int {
	if off < 0 || off > len(m.doc) {
		return 0 // not a place in the document; never expected
	}
	return 1 + bytes.Count(m.doc[:off], []byte{'\n'})
}

// offset turns the decoder's 1-based line and byte column into an offset.
func (m *siteMap) offset(line, col int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(m.doc[off:], '\n')
		if i < 0 {
			return len(m.doc)
		}
		off += i + 1
	}
	return off + col - 1
}

// keyPath joins a dotted key's parts: [a.b] and a.b = 1 both give "a.b".
func keyPath(n *unstable.Node) string {
	var parts []string
	it := n.Key()
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return strings.Join(parts, ".")
}

func join(prefix, key string) string {
	switch {
	case prefix == "":
		return key
	case key == "":
		return prefix
	}
	return prefix + "." + key
}
