package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nxdns/nxdns/internal/dashboard"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/safefile"
)

// cmdExport writes the query log as NDJSON or CSV to stdout
// (docs/history.md, "Export"): from the history file of a stopped nxdns
// (--config names it, or --history), or through a running one's API
// (--url and a read token), since a running nxdns holds the file's lock.
func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	format := fs.String("format", "ndjson", "ndjson or csv")
	path := fs.String("config", "", "configuration file: export its history.path")
	file := fs.String("history", "", "the history file itself (instead of --config)")
	base := fs.String("url", "", "a running nxdns's web endpoint (http://127.0.0.1:9153): export through its API")
	tokenFile := fs.String("token-file", "", "with --url: a file holding a read token (nxdns token add NAME --scope read)")
	timeout := fs.Duration("timeout", time.Second, "how long to wait for the history file's lock")
	filters := map[string]*string{}
	for _, p := range []struct{ name, usage string }{
		{"from", "start of the range, RFC 3339 or unix seconds"},
		{"to", "end of the range (exclusive)"},
		{"client", "a client's address or name, exact"},
		{"name", "a substring of the query name"},
		{"source", "exact source: pool, cache, blocked, zone:NAME …"},
		{"rcode", "exact answer code: NOERROR, NXDOMAIN, … or none"},
	} {
		filters[p.name] = fs.String(p.name, "", p.usage)
	}
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	v := url.Values{"format": {*format}}
	for k, p := range filters {
		if *p != "" {
			v.Set(k, *p)
		}
	}
	f, _, err := dashboard.ExportFilter(v, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "nxdns export: %v\n", err)
		return exitUsage
	}
	if *base != "" {
		return exportURL(ctx, *base, *tokenFile, v, stdout, stderr)
	}
	if *file == "" {
		if *path == "" {
			fmt.Fprintln(stderr, "nxdns export: give --config FILE (its history.path), --history FILE, or --url URL --token-file FILE")
			return exitUsage
		}
		cfg, _, err := loadConfig(*path)
		if err != nil {
			fmt.Fprintf(stderr, "nxdns export: %v\n", err)
			return exitProblems
		}
		if *file = cfg.History.Path; *file == "" {
			fmt.Fprintf(stderr, "nxdns export: %s sets no history.path: its history is in memory, export through the API with --url\n", *path)
			return exitProblems
		}
	}
	r, err := history.OpenReader(*file, *timeout)
	if errors.Is(err, history.ErrLocked) {
		fmt.Fprintf(stderr, "nxdns export: %v; export through its API: nxdns export --url http://WEB.LISTEN --token-file FILE (a read token from nxdns token add)\n", err)
		return exitProblems
	}
	if err != nil {
		fmt.Fprintf(stderr, "nxdns export: %v\n", err)
		return exitProblems
	}
	defer r.Close()
	rw, err := dashboard.NewRowWriter(stdout, *format)
	if err == nil {
		_, err = r.Export(ctx, f, rw.Write)
	}
	if err == nil {
		err = rw.Flush()
	}
	if err != nil {
		fmt.Fprintf(stderr, "nxdns export: %v\n", err)
		return exitProblems
	}
	return exitOK
}

// maxTokenFile bounds --token-file: a token is 70 bytes.
const maxTokenFile = 4 << 10

// exportURL streams GET /api/queries/export of a running nxdns to stdout.
func exportURL(ctx context.Context, base, tokenFile string, v url.Values, stdout, stderr io.Writer) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/api/queries/export?"+v.Encode(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "nxdns export: --url: %v\n", err)
		return exitUsage
	}
	if tokenFile != "" {
		b, err := safefile.ReadFile(tokenFile, maxTokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "nxdns export: --token-file: %v\n", err)
			return exitProblems
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "nxdns export: %v\n", err)
		return exitProblems
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		fmt.Fprintf(stderr, "nxdns export: %s: %s\n", resp.Status, strings.TrimSpace(string(b)))
		return exitProblems
	}
	if _, err := io.Copy(stdout, resp.Body); err != nil {
		fmt.Fprintf(stderr, "nxdns export: the transfer broke off: %v\n", err)
		return exitProblems
	}
	return exitOK
}
