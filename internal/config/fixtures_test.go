package config

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoad_badFixtures loads every testdata/bad file. Each starts with one or
// more "# want: <path> <Code>" lines ("-" for an empty path) naming exactly
// the problems it must produce: one fixture per rule, and no rule may
// cascade into another's problem.
func TestLoad_badFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 40 {
		t.Fatalf("found %d fixtures; is testdata/bad missing?", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".toml"), func(t *testing.T) {
			doc, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			wants := fixtureWants(t, doc)
			_, err = Load(bytes.NewReader(doc))
			ps, ok := err.(Problems)
			if !ok {
				t.Fatalf("Load error = %v (%T), want Problems", err, err)
			}
			for _, w := range wants {
				if !ps.Has(w.Path, w.Code) {
					t.Errorf("missing problem %s %s", w.Path, w.Code)
				}
			}
			if len(ps) != len(wants) {
				t.Errorf("got %d problems, want %d:\n%v", len(ps), len(wants), ps)
			}
		})
	}
}

// fixtureWants reads the leading "# want:" lines; the first line must be one.
func fixtureWants(t *testing.T, doc []byte) []Problem {
	t.Helper()
	var wants []Problem
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "# want: ")
		if !ok {
			break
		}
		path, code, ok := strings.Cut(rest, " ")
		if !ok {
			t.Fatalf("malformed want line %q", sc.Text())
		}
		if path == "-" {
			path = ""
		}
		wants = append(wants, Problem{Path: path, Code: Code(code)})
	}
	if len(wants) == 0 {
		t.Fatal(`first line is not "# want: <path> <Code>"`)
	}
	return wants
}
