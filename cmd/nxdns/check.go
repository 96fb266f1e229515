package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/nxdns/nxdns/internal/app"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/upstream"
)

// cmdCheck validates a configuration file: every problem on its own line and
// exit 1, or a short summary and exit 0. --probe then sends one query to each
// enabled upstream through a pool of its own (never a serving one).
func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (default: the built-in configuration)")
	probe := fs.Bool("probe", false, "also send one query to each enabled upstream and forward-zone resolver and report the result")
	tlsCheck := fs.Bool("tls", false, "also check that Android's Private DNS will accept the [tls] certificate (tlscheck.go)")
	tlsName := fs.String("tls-name", "", "with --tls: the host name the phones are set to")
	files := fs.Bool("files", false, "also read the files the configuration names (web.password_file, the [tls] pair) as a reload does: on the machine that runs nxdns, not at a system build")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	cfg, name, err := loadConfig(*path)
	if err == nil {
		// What the daemon would reject or ignore: a rule that does
		// nothing, and with --files a file a reload would fail on
		// (app.Preflight).
		err = app.Preflight(cfg, *files).Err()
	}
	if err != nil {
		fmt.Fprint(stdout, problemLines(name, err))
		return exitProblems
	}
	fmt.Fprint(stdout, summary(name, cfg))
	fmt.Fprint(stdout, layerSummary(cfg.Filter.StateDir))
	fmt.Fprint(stdout, configLayerSummary(cfg))
	for _, w := range config.Warnings(cfg) { // legal, but a promise of the defaults is broken
		fmt.Fprintf(stdout, "%s: warning: %s\n", name, w)
	}
	code := exitOK
	if *tlsCheck {
		code = max(code, checkTLS(cfg, *tlsName, stdout))
	}
	if *probe {
		code = max(code, probeUpstreams(ctx, cfg, stdout))
	}
	return code
}

// loadConfig reads path, or returns the built-in configuration for "".
func loadConfig(path string) (config.Config, string, error) {
	if path == "" {
		cfg := config.Default()
		return cfg, "built-in configuration", config.Validate(cfg).Err()
	}
	cfg, err := config.LoadFile(path)
	return cfg, path, err
}

// problemLines renders a load error one problem per line, each prefixed with
// the file so the lines read well in a build log.
func problemLines(name string, err error) string {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSpace(err.Error()), "\n") {
		fmt.Fprintf(&b, "%s: %s\n", name, line)
	}
	return b.String()
}

// summary is what check prints for a valid file: what nxdns would do with it.
func summary(name string, cfg config.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ok\n", name)
	fmt.Fprintf(&b, "listen:    %s (UDP and TCP each)\n", strings.Join(cfg.DNS.Listen, ", "))
	fmt.Fprintf(&b, "allow:     %s\n", strings.Join(cfg.DNS.Allow, ", "))
	fmt.Fprintf(&b, "upstreams, in priority order:\n")
	for i, u := range cfg.EnabledUpstreams() {
		fmt.Fprintf(&b, "  %d. %s  priority %d\n", i+1, upstream.RedactString(u.URL), u.Priority)
	}
	for _, g := range cfg.PooledGroups() { // docs/filter.md "Per-group upstreams"
		fmt.Fprintf(&b, "group %s's own upstreams, in priority order:\n", g.Name)
		ups := cfg.GroupUpstreams(g)
		slices.SortStableFunc(ups, func(a, b config.UpstreamURL) int { return cmp.Compare(a.Priority, b.Priority) })
		for i, u := range ups {
			fmt.Fprintf(&b, "  %d. %s  priority %d\n", i+1, upstream.RedactString(u.URL), u.Priority)
		}
	}
	if len(cfg.ForwardZones) > 0 {
		fmt.Fprintf(&b, "forward zones:\n")
		for _, z := range cfg.ForwardZones {
			fmt.Fprintf(&b, "  %s → %s\n", z.Zone, upstream.RedactString(z.Resolver))
		}
	}
	if f := cfg.Filter; len(f.Lists) > 0 || len(f.Block) > 0 || len(f.Allow) > 0 {
		fmt.Fprintf(&b, "filter lists:\n")
		for _, l := range f.Lists {
			src := l.Path
			if l.URL != "" {
				src = listURL(l.URL)
			}
			fmt.Fprintf(&b, "  %s (%s)  %s\n", l.Name, cmp.Or(l.Kind, config.ListBlock), src)
		}
		if len(f.Block) > 0 || len(f.Allow) > 0 {
			fmt.Fprintf(&b, "  inline: %d block, %d allow rules\n", len(f.Block), len(f.Allow))
		}
		for _, g := range f.Groups {
			when := "always"
			if len(g.Schedule) > 0 {
				when = fmt.Sprintf("%d schedule windows", len(g.Schedule))
			}
			fmt.Fprintf(&b, "  group %s: %s → %s, %s\n", g.Name, strings.Join(g.Clients, ", "), strings.Join(g.Lists, ", "), when)
		}
	} else {
		fmt.Fprintf(&b, "filter:    no lists (nothing is blocked)\n")
	}
	web := cfg.Web.Listen
	switch {
	case web == "":
		web = "disabled"
	case cfg.Web.TLSListen != "":
		web += ", HTTPS on " + cfg.Web.TLSListen
	}
	fmt.Fprintf(&b, "web:       %s\n", web)
	return b.String()
}

// listURL is a list's URL for the summary: its path kept (which list it
// is), its user and query dropped (they may hold a token).
func listURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(an invalid URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// layerSummary is what the dashboard changed over the file, kept in
// filter.state_dir (docs/dashboard.md "Changes made here"): the file is
// not the whole truth while these apply. Read on the machine check runs
// on; a layer that cannot be read is said, not a problem of the file.
func layerSummary(stateDir string) string {
	if stateDir == "" {
		return ""
	}
	l, err := filter.ReadLayer(stateDir)
	switch {
	case err != nil:
		return fmt.Sprintf("dashboard changes: not read: %v\n", err)
	case len(l.Allowed) == 0 && len(l.Blocked) == 0 && l.Skipped == 0:
		return "dashboard changes: none (the file says everything)\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "dashboard changes over this file (in %s; the dashboard's Changes made here page shows each as TOML):\n", stateDir)
	for _, n := range l.Allowed {
		fmt.Fprintf(&b, "  allow %s\n", n)
	}
	for _, n := range l.Blocked {
		fmt.Fprintf(&b, "  block %s\n", n)
	}
	if l.Skipped > 0 {
		fmt.Fprintf(&b, "  %d lines that are no name are skipped (edited by hand?)\n", l.Skipped)
	}
	return b.String()
}

// configLayerSummary is the lists and groups the dashboard added over the
// file (config.Layer, in filter.state_dir): each entry that applies, each
// that is skipped and why, and a layer file that cannot be used. None of
// them is a problem of the file: the daemon runs without what is skipped.
func configLayerSummary(cfg config.Config) string {
	_, st := config.LoadLayer(cfg)
	if st.Path == "" {
		return ""
	}
	var b strings.Builder
	if st.Err != "" {
		fmt.Fprintf(&b, "dashboard lists and groups: ignored, the file alone applies: %s\n", st.Err)
		return b.String()
	}
	l := st.Layer
	if len(l.Lists) == 0 && len(l.ListsOff) == 0 && len(l.Groups) == 0 {
		return ""
	}
	fmt.Fprintf(&b, "dashboard lists and groups over this file (in %s):\n", st.Path)
	for _, x := range l.Lists {
		state := ""
		if x.Disabled {
			state = " (switched off)"
		}
		fmt.Fprintf(&b, "  list %s (%s)  %s%s\n", x.Name, cmp.Or(x.Kind, config.ListBlock), listURL(x.URL), state)
	}
	for _, n := range l.ListsOff {
		fmt.Fprintf(&b, "  list %s of the file switched off\n", n)
	}
	for _, g := range l.Groups {
		fmt.Fprintf(&b, "  group %s: %s → %s\n", g.Name, strings.Join(g.Devices, ", "), strings.Join(g.Lists, ", "))
	}
	for _, s := range st.Skips {
		fmt.Fprintf(&b, "  skipped: %s\n", s)
	}
	return b.String()
}
