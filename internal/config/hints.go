package config

import (
	"fmt"
	"reflect"
	"strings"
)

// Hints that turn a decoder's complaint into what the operator should do.

// isTableList reports whether t is a list of tables ([[upstreams]]).
func isTableList(t reflect.Type) bool {
	return t != nil && t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct
}

// listTableProblems reports each [name] header where the model wants
// [[name]]. The decoder accepts a lone [upstreams] as a one-element list,
// but the next [[upstreams]] then fails with "key upstreams already exists as
// a table", which names neither the mistake nor the fix; reporting the
// header itself does both, and makes the lone case fail too, so that adding a
// second upstream is not the moment it surfaces.
func listTableProblems(m *siteMap) Problems {
	var ps Problems
	for _, s := range m.singleTables {
		ps = append(ps, Problem{
			Path: s.path,
			Code: CodeDecode,
			Message: fmt.Sprintf("[%s] is one table; write [[%s]] (double brackets), once per entry",
				s.path, s.path),
			Line: m.lineAt(s.start),
		})
	}
	return ps
}

// suggestKey is the model key closest to the unknown key at path, for a
// "did you mean" hint, or "" when none is close: siblings only
// (upstreams[0].tls_nmae is compared with the keys of an upstream), within
// an edit distance that catches a typo but not a different word.
func suggestKey(path string) string {
	parent, name := "", path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		parent, name = path[:i], path[i+1:]
	}
	t := reflect.TypeFor[Config]()
	if parent != "" {
		t = modelType(parent)
		for t != nil && t.Kind() == reflect.Slice {
			t = t.Elem()
		}
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	var cands []string
	for i := range t.NumField() {
		if cand := tomlName(t.Field(i)); cand != "" && cand != "-" {
			cands = append(cands, cand)
		}
	}
	return closest(name, cands)
}

// closest is the candidate nearest to name, for a "did you mean" hint, or
// "" when none is within an edit distance that catches a typo but not a
// different word (a config key, a catalogue service id).
func closest(name string, cands []string) string {
	limit := min(2, max(1, len(name)/3))
	best, bestD := "", limit+1
	for _, cand := range cands {
		if d := editDistance(strings.ToLower(name), cand); d < bestD {
			best, bestD = cand, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of neighbours each cost one, so
// "tls_nmae" is one edit from "tls_name". Keys are short ASCII; bytes do.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
