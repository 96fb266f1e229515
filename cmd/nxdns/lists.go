package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/nxdns/nxdns/internal/filter"
)

// cmdLists is `nxdns lists refresh [--config FILE] [--name N]`: it asks
// the running nxdns, through its web API on web.listen
// (POST /api/filter/lists/refresh), to download its lists now, and prints
// each list's outcome. With web.password_file it logs in first with the
// password read from the terminal (no echo) or the first line of stdin.
// Exit 1 when a list failed or nxdns could not be reached.
func cmdLists(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "refresh" {
		fmt.Fprintf(stderr, "usage: nxdns lists refresh [--config FILE] [--name LIST]\n")
		return exitUsage
	}
	fs := flag.NewFlagSet("lists refresh", flag.ContinueOnError)
	path := fs.String("config", "", "the running nxdns's configuration file (for web.listen and web.password_file)")
	name := fs.String("name", "", "refresh only this list (default: every list with a url)")
	if code, ok := parseFlags(fs, args[1:], stderr); !ok {
		return code
	}
	cfg, _, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintf(stderr, "nxdns lists refresh: %v\n", err)
		return exitProblems
	}
	base, err := webBase(cfg.Web.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "nxdns lists refresh: %v\n", err)
		return exitProblems
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 5 * time.Minute} // every list's download, each bounded by nxdns
	csrf := ""
	if cfg.Web.PasswordFile != "" {
		password, err := readPassword(stdin, stderr)
		if err == nil {
			csrf, err = webLogin(ctx, c, base, password)
		}
		if err != nil {
			fmt.Fprintf(stderr, "nxdns lists refresh: %v\n", err)
			return exitProblems
		}
	}
	u := base + "/api/filter/lists/refresh"
	if *name != "" {
		u += "?name=" + url.QueryEscape(*name)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if csrf != "" {
		req.Header.Set("X-CSRF-Token", csrf)
	}
	resp, err := c.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "nxdns lists refresh: is nxdns running with web.listen %s? %v\n", cfg.Web.Listen, err)
		return exitProblems
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "nxdns lists refresh: %s: %s\n", resp.Status, strings.TrimSpace(string(body)))
		return exitProblems
	}
	var a filter.RefreshAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		fmt.Fprintf(stderr, "nxdns lists refresh: %v\n", err)
		return exitProblems
	}
	code := exitOK
	if len(a.Lists) == 0 {
		fmt.Fprintln(stdout, "no list has a url: local files are read again at every reload")
	}
	for _, l := range a.Lists {
		if l.OK {
			fmt.Fprintf(stdout, "%s: ok, %d rules\n", l.Name, l.Rules)
			continue
		}
		fmt.Fprintf(stdout, "%s: failed, the last good copy (%d rules) is kept: %s\n", l.Name, l.Rules, l.Error)
		code = exitProblems
	}
	return code
}

// webBase is the URL this host reaches web.listen at: a wildcard address
// is asked on loopback.
func webBase(listen string) (string, error) {
	if listen == "" {
		return "", fmt.Errorf("web.listen is empty: the dashboard and its API are off")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("web.listen %q: %v", listen, err)
	}
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if err == nil && ip.Is6() {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// readPassword reads the dashboard's password: prompted without echo on a
// terminal, else the first line of stdin.
func readPassword(stdin io.Reader, prompt io.Writer) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		restore, err := echoOff(int(f.Fd())) // before the prompt (echo_linux.go)
		if err != nil {
			return "", err
		}
		defer restore()
		fmt.Fprint(prompt, "Dashboard password: ")
		p, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
		return string(p), err
	}
	b := make([]byte, 0, 64)
	buf := make([]byte, 1)
	for len(b) < 1024 {
		n, err := stdin.Read(buf)
		if n == 1 {
			if buf[0] == '\n' {
				break
			}
			b = append(b, buf[0])
		}
		if err != nil {
			break
		}
	}
	return strings.TrimRight(string(b), "\r"), nil
}

var csrfMeta = regexp.MustCompile(`name="csrf-token" content="([0-9a-f]+)"`)

// webLogin logs c in at base with password and returns the session's CSRF
// token (from the page the login leads to).
func webLogin(ctx context.Context, c *http.Client, base, password string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/login", strings.NewReader(url.Values{"password": {password}, "next": {"/lists"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("log in at %s: %v", base, err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	m := csrfMeta.FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		return "", fmt.Errorf("log in at %s: %s (wrong password?)", base, resp.Status)
	}
	return string(m[1]), nil
}
