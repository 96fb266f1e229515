package config

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// minimal is the smallest valid file: one upstream.
const minimal = `
[[upstreams]]
url = "tls://9.9.9.9"
tls_name = "dns.quad9.net"
`

func mustLoad(t *testing.T, doc string) Config {
	t.Helper()
	c, err := Load(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func loadProblems(t *testing.T, doc string) Problems {
	t.Helper()
	_, err := Load(strings.NewReader(doc))
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Load error = %v (%T), want Problems", err, err)
	}
	return ps
}

func TestLoad_unknownKeyPathAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, doc, path string
		line            int
	}{
		{"in second array table", "[[upstreams]]\nurl = \"tls://9.9.9.9\"\n\n[[upstreams]]\nurl = \"tls://1.1.1.1\"\ntls_nmae = \"x\"\n",
			"upstreams[1].tls_nmae", 6},
		{"in inline array of tables", "upstreams = [\n  {url = \"tls://9.9.9.9\"},\n  {url = \"tls://1.1.1.1\", prio = 1},\n]\n",
			"upstreams[1].prio", 3},
		{"in a table", minimal + "\n[dns]\nlisten = [\"127.0.0.1:53\"]\nlisen = [\"[::1]:53\"]\n", "dns.lisen", 8},
		{"dotted key", minimal + "log.levle = \"debug\"\n", "upstreams[0].log.levle", 5},
		{"unknown table", minimal + "\n[cache]\nsize = 1\n", "cache", 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := loadProblems(t, tc.doc)
			i := slices.IndexFunc(ps, func(p Problem) bool { return p.Code == CodeUnknownKey })
			if i < 0 {
				t.Fatalf("no UnknownKey problem in %v", ps)
			}
			if p := ps[i]; p.Path != tc.path || p.Line != tc.line {
				t.Errorf("got %s at line %d, want %s at line %d", p.Path, p.Line, tc.path, tc.line)
			}
		})
	}
}

func TestLoad_wrongTypePathLineAndMessage(t *testing.T) {
	for _, tc := range []struct {
		name, doc, path string
		line            int
		msg             string
	}{
		{"string for int", "[upstream]\nattempt_timeout_ms = \"2500\"\n", "upstream.attempt_timeout_ms", 2, "want an integer, not a string"},
		{"float for int", "[upstream]\n\ntotal_timeout_ms = 2.5\n", "upstream.total_timeout_ms", 3, "want an integer, not a float"},
		{"string for int64", "[history]\nmax_bytes = \"1G\"\n", "history.max_bytes", 2, "want an integer, not a string"},
		{"string for list", "[dns]\nlisten = \"127.0.0.1:53\"\n", "dns.listen", 2, "want a list of strings, not a string"},
		{"int in list", "[dns]\nallow = [\n  \"10.0.0.0/8\",\n  8,\n]\n", "dns.allow[1]", 4, "want a string, not an integer"},
		{"string for bool", minimal + "enabled = \"yes\"\n", "upstreams[0].enabled", 5, "want true or false, not a string"},
		{"int for table", "dns = 5\n", "dns", 1, "want a table, not an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := loadProblems(t, tc.doc)
			if len(ps) != 1 {
				t.Fatalf("got %d problems, want 1 (decoding stops at a wrong type): %v", len(ps), ps)
			}
			p := ps[0]
			if p.Code != CodeDecode || p.Path != tc.path || p.Line != tc.line {
				t.Errorf("got %s %s line %d, want %s %s line %d", p.Path, p.Code, p.Line, tc.path, CodeDecode, tc.line)
			}
			if p.Message != tc.msg {
				t.Errorf("message %q, want %q", p.Message, tc.msg)
			}
		})
	}
}

// TestLoad_historyMaxBytesTo64GiB: history.max_bytes goes up to 64 GiB on
// every architecture, 32-bit ones included (where it is past an int), and
// stops there.
func TestLoad_historyMaxBytesTo64GiB(t *testing.T) {
	c := mustLoad(t, minimal+"[history]\nmax_bytes = 68719476736\n")
	if c.History.MaxBytes != 64<<30 {
		t.Errorf("max_bytes = %d, want %d", c.History.MaxBytes, int64(64<<30))
	}
	ps := loadProblems(t, minimal+"[history]\nmax_bytes = 68719476737\n")
	if len(ps) != 1 || ps[0].Path != "history.max_bytes" || ps[0].Code != CodeOutOfRange {
		t.Errorf("64 GiB + 1: got %v, want one history.max_bytes OutOfRange", ps)
	}
}

func TestLoad_syntaxErrorHasLine(t *testing.T) {
	ps := loadProblems(t, minimal+"\n[dns\n")
	if len(ps) != 1 || ps[0].Code != CodeSyntax || ps[0].Line != 6 {
		t.Errorf("got %v, want one Syntax problem at line 6", ps)
	}
}

// TestLoad_collectsEveryProblem: an unknown key does not stop validation, and
// validation does not stop at its first problem.
func TestLoad_collectsEveryProblem(t *testing.T) {
	ps := loadProblems(t, minimal+`
[[forward_zones]]
zone = "lan"
resolver = "udp://192.168.1.1:53"
colour = "blue"

[[forward_zones]]
zone = "Lan."
resolver = "udp://192.168.1.1:53"

[log]
level = "loud"
`)
	want := []Problem{
		{Path: "forward_zones[0].colour", Code: CodeUnknownKey, Line: 9},
		{Path: "forward_zones[1].zone", Code: CodeDuplicate, Line: 12},
		{Path: "log.level", Code: CodeInvalidLevel, Line: 16},
	}
	if len(ps) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(want), ps)
	}
	for i, w := range want {
		if got := ps[i]; got.Path != w.Path || got.Code != w.Code || got.Line != w.Line {
			t.Errorf("problem %d = %s %s line %d, want %s %s line %d", i, got.Path, got.Code, got.Line, w.Path, w.Code, w.Line)
		}
	}
}

func TestLoad_fileWithoutUpstreamsHasNone(t *testing.T) {
	for name, doc := range map[string]string{
		"empty":        "",
		"other keys":   "[log]\nlevel = \"debug\"\n",
		"empty list":   "upstreams = []\n",
		"all disabled": "[[upstreams]]\nurl = \"tls://9.9.9.9\"\nenabled = false\n",
	} {
		t.Run(name, func(t *testing.T) {
			ps := loadProblems(t, doc)
			if len(ps) != 1 || !ps.Has("upstreams", CodeNoUpstreams) {
				t.Errorf("got %v, want only upstreams NoUpstreams", ps)
			}
		})
	}
}

// TestLoad_listsReplaceDefaults guards go-toml's behaviour of truncating a
// slice before decoding into it: a file's list is the whole list.
func TestLoad_listsReplaceDefaults(t *testing.T) {
	c := mustLoad(t, `
[dns]
listen = ["192.168.1.2:53"]
allow = ["192.168.1.0/24"]

[[upstreams]]
url = "https://1.1.1.1/dns-query"
`)
	if want := []string{"192.168.1.2:53"}; !slices.Equal(c.DNS.Listen, want) {
		t.Errorf("dns.listen = %q, want %q", c.DNS.Listen, want)
	}
	if want := []string{"192.168.1.0/24"}; !slices.Equal(c.DNS.Allow, want) {
		t.Errorf("dns.allow = %q, want %q", c.DNS.Allow, want)
	}
	want := []UpstreamURL{{URL: "https://1.1.1.1/dns-query"}}
	if !slices.EqualFunc(c.Upstreams, want, func(a, b UpstreamURL) bool { return a.URL == b.URL && a.TLSName == b.TLSName && a.Address == b.Address }) {
		t.Errorf("upstreams = %+v, want %+v: no default upstream or field may leak in", c.Upstreams, want)
	}
}

func TestLoad_absentKeysKeepDefaults(t *testing.T) {
	c := mustLoad(t, minimal)
	d := Default()
	if !slices.Equal(c.DNS.Listen, d.DNS.Listen) || !slices.Equal(c.DNS.Allow, d.DNS.Allow) {
		t.Errorf("dns = %+v, want the defaults %+v", c.DNS, d.DNS)
	}
	if c.Upstream != d.Upstream || !reflect.DeepEqual(c.Web, d.Web) || c.Log.Level != d.Log.Level || !c.Log.QueryLog() {
		t.Errorf("got %+v %+v %+v, want the defaults", c.Upstream, c.Web, c.Log)
	}
	if c.DNS.CacheSize != d.DNS.CacheSize || c.DNS.StaleMaxAge != d.DNS.StaleMaxAge {
		t.Errorf("cache = %+v, want the defaults", c.DNS)
	}
}

// TestLoad_validationProblemsCarryLines: a declared key gets its own line, a
// key left out of an element gets the element's line, a default gets none.
func TestLoad_validationProblemsCarryLines(t *testing.T) {
	ps := loadProblems(t, `[upstream]
total_timeout_ms = 1500

[[upstreams]]
url = "tls://dns.quad9.net"

[web]
listen = "localhost:9153"
`)
	want := map[string]int{
		"upstream.attempt_timeout_ms": 0, // the default 2000 is above the file's total
		"upstreams[0].address":        4,
		"web.listen":                  8,
	}
	if len(ps) != len(want) {
		t.Fatalf("got %v, want problems at %v", ps, want)
	}
	for _, p := range ps {
		if line, ok := want[p.Path]; !ok || p.Line != line {
			t.Errorf("%s at line %d, want line %d", p.Path, p.Line, line)
		}
	}
}

func TestLoad_problemsReturnZeroConfig(t *testing.T) {
	c, err := Load(strings.NewReader(minimal + "[log]\nlevel = \"loud\"\n"))
	if err == nil {
		t.Fatal("Load accepted an invalid level")
	}
	if c.Upstreams != nil || c.DNS.Listen != nil {
		t.Errorf("Load returned %+v with an error; want the zero Config so it cannot be served", c)
	}
}

func TestLoadFile_missingIsNotProblems(t *testing.T) {
	_, err := LoadFile(filepath.Join(t.TempDir(), "nxdns.toml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want fs.ErrNotExist", err)
	}
	var ps Problems
	if errors.As(err, &ps) {
		t.Errorf("a missing file is an I/O error, not Problems: %v", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestLoad_readErrorIsReturned(t *testing.T) {
	if _, err := Load(failingReader{}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want the reader's error", err)
	}
}

// LoadFile refuses a FIFO, a device and an oversized file at once, with the
// path in the error (issue 13 finding 3).
func TestLoadFile_refusesNonRegularAndHugeFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "nxdns.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.toml")
	if err := os.WriteFile(huge, bytes.Repeat([]byte("#\n"), MaxConfigFileSize), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero", huge, dir} {
		done := make(chan error, 1)
		go func() { _, err := LoadFile(path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("LoadFile(%s) = %v, want an error naming the path", path, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("LoadFile(%s) did not return within 5 s", path)
		}
	}
}
