package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nxdns/nxdns/internal/web"
)

const tokenUsage = `usage:
  nxdns token add NAME --scope read|control [--expires DURATION] (--config FILE | --state-dir DIR)
  nxdns token list     (--config FILE | --state-dir DIR)
  nxdns token revoke NAME (--config FILE | --state-dir DIR)
`

// cmdToken manages the API tokens in filter.state_dir (docs/dashboard.md,
// "API tokens"). It edits the file a running nxdns reads on the next token
// request, so nothing needs a reload; add prints the token once.
func cmdToken(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return exitUsage
	}
	sub, args := args[0], args[1:]
	var name string
	if sub != "list" {
		// NAME before or after the flags.
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			name, args = args[0], args[1:]
		}
	}
	fs := flag.NewFlagSet("token "+sub, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(stderr, tokenUsage) }
	path := fs.String("config", "", "configuration file: the tokens live in its filter.state_dir")
	stateDir := fs.String("state-dir", "", "the state directory itself (instead of --config)")
	var scope *string
	var expires *time.Duration
	if sub == "add" {
		scope = fs.String("scope", "", "read (stats, health, queries, export) or control (also pause, resume, allow, flush)")
		expires = fs.Duration("expires", 0, "the token stops working after this long (e.g. 720h); 0: until revoked")
	}
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	rest := fs.Args()
	if name == "" && sub != "list" && len(rest) > 0 {
		name, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "nxdns token %s: unexpected argument %q\n%s", sub, rest[0], tokenUsage)
		return exitUsage
	}
	dir := *stateDir
	if dir == "" {
		if *path == "" {
			fmt.Fprintf(stderr, "nxdns token %s: give --config FILE (its filter.state_dir) or --state-dir DIR\n", sub)
			return exitUsage
		}
		cfg, _, err := loadConfig(*path)
		if err != nil {
			fmt.Fprintf(stderr, "nxdns token %s: %v\n", sub, err)
			return exitProblems
		}
		if dir = cfg.Filter.StateDir; dir == "" {
			fmt.Fprintf(stderr, "nxdns token %s: %s sets no filter.state_dir, where API tokens are kept\n", sub, *path)
			return exitProblems
		}
	}
	now := time.Now()
	switch sub {
	case "add":
		if name == "" || *scope == "" {
			fmt.Fprintf(stderr, "nxdns token add: NAME and --scope are required\n%s", tokenUsage)
			return exitUsage
		}
		token, err := web.AddToken(dir, name, *scope, *expires, now)
		if err != nil {
			fmt.Fprintf(stderr, "nxdns token add: %v\n", err)
			return exitProblems
		}
		fmt.Fprintln(stdout, token)
		fmt.Fprintf(stderr, "token %s (%s) added: it is shown only now; send it as \"Authorization: Bearer TOKEN\"\n", name, *scope)
		return exitOK
	case "revoke":
		if name == "" {
			fmt.Fprintf(stderr, "nxdns token revoke: NAME is required\n%s", tokenUsage)
			return exitUsage
		}
		if err := web.RevokeToken(dir, name, now); err != nil {
			fmt.Fprintf(stderr, "nxdns token revoke: %v\n", err)
			return exitProblems
		}
		fmt.Fprintf(stderr, "token %s revoked\n", name)
		return exitOK
	case "list":
		entries, err := web.ReadTokens(dir)
		if err != nil {
			fmt.Fprintf(stderr, "nxdns token list: %v\n", err)
			return exitProblems
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSCOPE\tCREATED\tSTATE")
		for _, e := range entries {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, e.Scope, e.Created.Format(time.RFC3339), tokenState(e, now))
		}
		tw.Flush()
		return exitOK
	}
	fmt.Fprintf(stderr, "nxdns token: unknown subcommand %q\n%s", sub, tokenUsage)
	return exitUsage
}

// tokenState is a token's state as the list and the dashboard say it.
func tokenState(e web.TokenEntry, now time.Time) string {
	switch {
	case !e.Revoked.IsZero():
		return "revoked " + e.Revoked.Format(time.RFC3339)
	case !e.Expires.IsZero() && !now.Before(e.Expires):
		return "expired " + e.Expires.Format(time.RFC3339)
	case !e.Expires.IsZero():
		return "live until " + e.Expires.Format(time.RFC3339)
	}
	return "live"
}
