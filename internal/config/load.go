package config

import (
	"bytes"
	"fmt"
	"io"

	"github.com/pelletier/go-toml/v2"

	"github.com/nxdns/nxdns/internal/safefile"
)

// Load reads a configuration file from r: it starts from Default, decodes the
// file strictly over it and validates the result (docs/design.md#configuration). Any problem with
// the content, from an unknown key to a duplicate zone, is returned as
// Problems holding every problem found, each with its path and, where the
// file declares the key, its line; the Config is then the zero value and must
// not be served. An error reading r is returned as it is, not as Problems.
//
// Two decisions where docs/design.md#configuration is silent:
//   - A file's upstreams never come from Default. A file without [[upstreams]]
//     gets NoUpstreams: the built-in public resolvers serve only when no file
//     is given, so a file never sends queries to a resolver its author did not
//     name.
//   - A list in the file replaces the default list (dns.listen = [...] is the
//     whole listen set); lists are never merged.
func Load(r io.Reader) (Config, error) {
	doc, err := io.ReadAll(io.LimitReader(r, MaxConfigFileSize+1))
	if err == nil && len(doc) > MaxConfigFileSize {
		err = fmt.Errorf("over the %d-byte limit", MaxConfigFileSize)
	}
	if err != nil {
		return Config{}, fmt.Errorf("config: read: %w", err)
	}
	return parse(doc)
}

// LoadFile is Load on the named file, read once by safefile.ReadFile: a FIFO, a
// device or a file over MaxConfigFileSize fails at once. An error opening or
// reading it (it names the path and wraps fs.ErrNotExist and the like) is
// returned as is.
func LoadFile(path string) (Config, error) {
	doc, err := safefile.ReadFile(path, MaxConfigFileSize)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return parse(doc)
}

func parse(doc []byte) (Config, error) {
	sites := locate(doc)
	if ps := listTableProblems(sites); len(ps) > 0 {
		// The decoder would either accept the table as a list or fail on it
		// with a message that hides the fix; nothing after it is trustworthy.
		return Config{}, ps
	}
	c := Default()
	c.Upstreams = nil // see Load: a file names its own upstreams
	// go-toml v2 truncates a slice before decoding an array into it, so every
	// list in the file replaces its default (TestLoad_listsReplaceDefaults).
	err := toml.NewDecoder(bytes.NewReader(doc)).DisallowUnknownFields().Decode(&c)
	ps, complete := decodeProblems(err, sites)
	if !complete {
		// The decoder stopped part-way: validating a half-decoded file would
		// report keys it never reached as missing.
		return Config{}, ps
	}
	for _, p := range append(c.ReadFiles(), Validate(c)...) {
		if p.Line == 0 {
			p.Line = sites.line(p.Path)
		}
		ps = append(ps, p)
	}
	if len(ps) > 0 {
		return Config{}, ps
	}
	return c, nil
}
