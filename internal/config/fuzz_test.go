package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad: whatever the bytes, Load returns a valid Config or Problems (never
// panics, never another error type), and every line it reports is a line of
// the document. The seeds are the fixtures and the example.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/bad/*.toml")
	files = append(files, exampleFile)
	for _, file := range files {
		doc, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(doc)
	}
	for _, seed := range []string{"[[dns]]\n", "[upstreams]\nurl = 1\n", "upstreams = [[1]]\n", "dns.listen = [[\"a\"]]\n", "[[upstreams.x]]\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := Load(bytes.NewReader(doc))
		if err == nil {
			if ps := Validate(c); len(ps) != 0 {
				t.Fatalf("Load accepted a config Validate rejects: %v", ps)
			}
			return
		}
		var ps Problems
		if !errors.As(err, &ps) || len(ps) == 0 {
			t.Fatalf("err = %v (%T), want non-empty Problems", err, err)
		}
		lines := bytes.Count(doc, []byte{'\n'}) + 1
		for _, p := range ps {
			if p.Line < 0 || p.Line > lines {
				t.Fatalf("%v: line outside the document's %d lines", p, lines)
			}
		}
	})
}
