package nix

import (
	"fmt"
	"regexp"
	"strings"
)

// A reader for the one shape of module.nix the key test needs, not a Nix
// parser: settingsModule's options, each a `section VAR` or `list VAR` (a
// let-bound `VAR = { options = { … }; }`) or a leaf option. Strings and
// comments are blanked first, so braces and `=` inside them do not count.

// settingsKeys returns every typed option below services.nxdns.settings as a
// key path: "dns.listen", "upstreams[].url".
func settingsKeys(src string) ([]string, error) {
	s := blank(src)
	body, err := attrBody(s, "settingsModule")
	if err != nil {
		return nil, err
	}
	return sectionKeys(s, "", body, 0)
}

// sectionKeys reads the options of one section body ({ options = { … }; } or
// { options.x = …; }), descending into nested sections.
func sectionKeys(s, prefix, body string, depth int) ([]string, error) {
	if depth > 8 {
		return nil, fmt.Errorf("%s: sections nested too deep (a cycle?)", prefix)
	}
	var out []string
	for _, st := range statements(body) {
		name, rhs, ok := binding(st)
		if !ok {
			continue
		}
		var opts [][2]string // option name, its definition
		switch {
		case name == "options":
			inner, ok := braced(rhs)
			if !ok {
				return nil, fmt.Errorf("%s: options is not an attribute set", prefix)
			}
			for _, ost := range statements(inner) {
				if n, r, ok := binding(ost); ok {
					opts = append(opts, [2]string{n, r})
				}
			}
		case strings.HasPrefix(name, "options."):
			opts = append(opts, [2]string{strings.TrimPrefix(name, "options."), rhs})
		}
		for _, o := range opts {
			keys, err := optionKeys(s, prefix, o[0], o[1], depth)
			if err != nil {
				return nil, err
			}
			out = append(out, keys...)
		}
	}
	return out, nil
}

var sectionRef = regexp.MustCompile(`^(section|list)\s+([A-Za-z_][\w'-]*)`)

func optionKeys(s, prefix, name, rhs string, depth int) ([]string, error) {
	path := name
	if prefix != "" {
		path = prefix + "." + name
	}
	m := sectionRef.FindStringSubmatch(rhs)
	if m == nil {
		return []string{path}, nil
	}
	if m[1] == "list" {
		path += "[]"
	}
	body, err := attrBody(s, m[2])
	if err != nil {
		return nil, err
	}
	return sectionKeys(s, path, body, depth+1)
}

// attrBody is the inside of the braces of the binding `name = { … }`.
func attrBody(s, name string) (string, error) {
	re := regexp.MustCompile(`(?:^|[^\w'.-])` + regexp.QuoteMeta(name) + `\s*=\s*\{`)
	loc := re.FindStringIndex(s)
	if loc == nil {
		return "", fmt.Errorf("no binding %s = { … }", name)
	}
	body, ok := braced(s[loc[1]-1:])
	if !ok {
		return "", fmt.Errorf("%s: unbalanced braces", name)
	}
	return body, nil
}

// braced returns the inside of the brace-delimited text that s starts with.
func braced(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") {
		return "", false
	}
	depth := 0
	for i, c := range s {
		switch c {
		case '{', '(', '[':
			depth++
		case '}', ')', ']':
			depth--
			if depth == 0 {
				return s[1:i], true
			}
		}
	}
	return "", false
}

// statements splits an attribute-set body at the semicolons of its own level.
func statements(body string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range body {
		switch c {
		case '{', '(', '[':
			depth++
		case '}', ')', ']':
			depth--
		case ';':
			if depth == 0 {
				out = append(out, strings.TrimSpace(body[start:i]))
				start = i + 1
			}
		}
	}
	return out
}

var bindingRE = regexp.MustCompile(`(?s)^([A-Za-z_][\w'-]*(?:\.[A-Za-z_][\w'-]*)*)\s*=\s*(.*)$`)

// binding splits `a.b = rhs`; inherit and other statements are not bindings.
func binding(st string) (name, rhs string, ok bool) {
	m := bindingRE.FindStringSubmatch(st)
	if m == nil || strings.HasPrefix(m[2], "=") {
		return "", "", false
	}
	return m[1], strings.TrimSpace(m[2]), true
}

// blank returns src with comments removed and every string literal, its
// interpolations included, replaced by "".
func blank(src string) string {
	var b strings.Builder
	for i := 0; i < len(src); {
		switch {
		case src[i] == '#':
			i = skipLine(src, i)
		case strings.HasPrefix(src[i:], "/*"):
			i = skipBlockComment(src, i)
		case src[i] == '"':
			i = skipString(src, i+1)
			b.WriteString(`""`)
		case strings.HasPrefix(src[i:], "''"):
			i = skipIndented(src, i+2)
			b.WriteString(`""`)
		default:
			b.WriteByte(src[i])
			i++
		}
	}
	return b.String()
}

func skipLine(s string, i int) int {
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(s)
}

func skipBlockComment(s string, i int) int {
	if j := strings.Index(s[i+2:], "*/"); j >= 0 {
		return i + 2 + j + 2
	}
	return len(s)
}

// skipString skips a "…" string whose body starts at i; it returns the index
// after the closing quote.
func skipString(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == '\\':
			i += 2
		case s[i] == '"':
			return i + 1
		case strings.HasPrefix(s[i:], "${"):
			i = skipInterpolation(s, i+2)
		default:
			i++
		}
	}
	return len(s)
}

// skipIndented skips a ”…” string whose body starts at i.
func skipIndented(s string, i int) int {
	for i < len(s) {
		switch {
		case strings.HasPrefix(s[i:], "'''"), strings.HasPrefix(s[i:], "''$"):
			i += 3
		case strings.HasPrefix(s[i:], "''\\"):
			i += 4
		case strings.HasPrefix(s[i:], "''"):
			return i + 2
		case strings.HasPrefix(s[i:], "${"):
			i = skipInterpolation(s, i+2)
		default:
			i++
		}
	}
	return len(s)
}

// skipInterpolation skips Nix code after "${" up to its closing brace.
func skipInterpolation(s string, i int) int {
	depth := 1
	for i < len(s) {
		switch {
		case s[i] == '"':
			i = skipString(s, i+1)
		case strings.HasPrefix(s[i:], "''"):
			i = skipIndented(s, i+2)
		case s[i] == '#':
			i = skipLine(s, i)
		case s[i] == '{':
			depth++
			i++
		case s[i] == '}':
			depth--
			i++
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return len(s)
}
