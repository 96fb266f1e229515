package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// decodeProblems turns the decoder's error into problems. complete reports
// whether the decoder went through the whole file, which it does when the
// only errors are unknown keys.
func decodeProblems(err error, sites *siteMap) (ps Problems, complete bool) {
	var strict *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case err == nil:
		return nil, true
	case errors.As(err, &strict):
		for i := range strict.Errors {
			p, s := sites.problem(&strict.Errors[i], CodeUnknownKey)
			p.Message = "unknown key"
			if s.header {
				p.Message = "unknown table"
			}
			if hint := suggestKey(p.Path); hint != "" {
				p.Message += fmt.Sprintf("; did you mean %q?", hint)
			}
			ps = append(ps, p)
		}
		return ps, true
	case errors.As(err, &de):
		code := CodeDecode
		if !sites.ok {
			code = CodeSyntax
		}
		p, s := sites.problem(de, code)
		p.Message = strings.TrimPrefix(de.Error(), "toml: ")
		if msg := typeMismatch(s); msg != "" {
			p.Message = msg
		}
		return Problems{p}, false
	default:
		return Problems{{Code: CodeDecode, Message: err.Error()}}, false
	}
}

// problem places a decoder error: the innermost site at its position gives
// the indexed path; the decoder's own unindexed key is the fallback.
func (m *siteMap) problem(e *toml.DecodeError, code Code) (Problem, site) {
	line, col := e.Position()
	s, ok := m.site(line, col)
	if !ok {
		s.path = strings.Join(e.Key(), ".")
	}
	return Problem{Path: s.path, Code: code, Line: line}, s
}

// typeMismatch says "want an integer, not a string" when the value at s has
// another TOML type than the model's field at s.path, and "" otherwise: the
// decoder's own message names Go types, which mean nothing to an operator.
// Comparing the two types, rather than reading the decoder's text, keeps its
// other errors (a key defined twice, an integer overflow) as it words them.
func typeMismatch(s site) string {
	t := modelType(s.path)
	if t == nil || s.kind == unstable.Invalid || fits(t, s.kind) {
		return ""
	}
	return fmt.Sprintf("want %s, not %s", describeType(t), describeKind(s.kind))
}

// modelType is the Go type of the field at a key path ("upstreams[1].url"),
// found through the toml tags; nil when the path is not in the model.
func modelType(path string) reflect.Type {
	t := reflect.TypeFor[Config]()
	for part := range strings.SplitSeq(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		f, ok := fieldByTag(t, name)
		if !ok {
			return nil
		}
		t = f.Type
		for ; rest != ""; _, rest, _ = strings.Cut(rest, "[") {
			if t.Kind() != reflect.Slice {
				return nil
			}
			t = t.Elem()
		}
	}
	return t
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		if f := t.Field(i); tomlName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tomlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	return name
}

// fits reports whether a TOML value of kind k can decode into t.
func fits(t reflect.Type, k unstable.Kind) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return k == unstable.String
	case reflect.Int, reflect.Int64:
		return k == unstable.Integer
	case reflect.Bool:
		return k == unstable.Bool
	case reflect.Slice:
		return k == unstable.Array
	case reflect.Struct:
		return k == unstable.InlineTable
	}
	return true // a type the model does not use: leave it to the decoder
}

func describeType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "a list of tables"
		}
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(describeType(t.Elem()), "a "), "an ") + "s"
	case reflect.Struct:
		return "a table"
	}
	return t.String()
}

func describeKind(k unstable.Kind) string {
	switch k {
	case unstable.String:
		return "a string"
	case unstable.Integer:
		return "an integer"
	case unstable.Float:
		return "a float"
	case unstable.Bool:
		return "a boolean"
	case unstable.Array:
		return "a list"
	case unstable.InlineTable:
		return "a table"
	}
	return "a date or time"
}
