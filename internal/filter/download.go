package filter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/safefile"
	"github.com/nxdns/nxdns/internal/sleep"
)

// meta is what a downloaded list keeps beside its copy, across restarts:
// the validators for a conditional GET and when the copy was fetched.
type meta struct {
	// URL is the list's URL the copy came from: a list whose URL changed
	// in the configuration is downloaded again at once (metaFor), not
	// after the refresh interval of the old URL's copy. "" in a meta file
	// written before it was kept: taken as the current URL.
	URL          string    `json:"url,omitempty"`
	ETag         string    `json:"etag,omitempty"`
	LastModified string    `json:"last_modified,omitempty"`
	Fetched      time.Time `json:"fetched"`
}

// maxMetaBytes bounds a list's meta file: it holds two validators and a
// time, a few hundred bytes.
const maxMetaBytes = 64 << 10

// readMeta reads a list's meta file with safefile.ReadFile, so a FIFO, a
// device or a huge file there is refused before any byte is read (it never
// hangs or fills memory at start); a missing, refused or damaged file only
// costs one unconditional download.
func readMeta(path string) meta {
	var m meta
	if b, err := safefile.ReadFile(path, maxMetaBytes); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

func writeMeta(path string, m meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, bytes.NewReader(b), -1)
}

// writeFileAtomic writes r to path through a temporary file in the same
// directory and a rename, so a crash leaves the old file or the new one,
// never half of one. limit < 0 means no limit; a longer body is ErrTooBig.
func writeFileAtomic(path string, r io.Reader, limit int64) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if limit >= 0 {
		r = io.LimitReader(r, limit+1)
	}
	n, err := io.Copy(tmp, r)
	if err == nil && limit >= 0 && n > limit {
		err = ErrTooBig
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// httpClient downloads lists. Its dialer resolves names with the engine's
// LookupHost (nxdns's upstreams), never with the system resolver, which on
// an appliance is nxdns itself: a list download never loops through the
// filter it feeds. Redirects are held to the scopes of the list's own host
// (redirectGuard).
type httpClient struct{ *http.Client }

// downloadTimeout bounds one whole download, body included.
const downloadTimeout = 2 * time.Minute

func newHTTPClient(lookup func(ctx context.Context, host string) ([]netip.Addr, error)) *httpClient {
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		Proxy:                 nil,
		ResponseHeaderTimeout: 30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		// Every request dials, so every address a redirect leads to passes
		// the redirect guard; a download a day gains nothing from idle
		// connections.
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			ips, err := resolveListHost(ctx, host, lookup)
			if err != nil {
				return nil, err
			}
			if g, ok := ctx.Value(guardKey{}).(*redirectGuard); ok {
				if ips, err = g.admit(host, ips); err != nil {
					return nil, err
				}
			}
			var last error
			for _, ip := range ips {
				c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
				if err == nil {
					return c, nil
				}
				last = err
			}
			return nil, last
		},
	}
	c := &http.Client{Transport: tr, Timeout: downloadTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			if g, ok := req.Context().Value(guardKey{}).(*redirectGuard); ok {
				g.redirected()
			}
			return nil
		}}
	return &httpClient{c}
}

// resolveListHost is a list host's addresses: an IP literal as it is,
// localhost and its subdomains as the loopback addresses (RFC 6761 §6.3:
// never asked of anyone), anything else through lookup — except a host
// whose last label is a number, refused (numericTLD).
func resolveListHost(ctx context.Context, host string, lookup func(ctx context.Context, host string) ([]netip.Addr, error)) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}, nil
	}
	if numericTLD(h) {
		return nil, fmt.Errorf("list host %s: its last label is a number, so it is no name (RFC 3696 §2) and no IP address nxdns reads (a browser reads 127.1 or 2130706433 as 127.0.0.1): write the address in full", host)
	}
	if lookup == nil {
		return nil, fmt.Errorf("list host %s: a name, and no resolver was given", host)
	}
	ips, err := lookup(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolving list host %s through nxdns's local answers, forward zones and upstreams: %w", host, err)
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("list host %s has no address", host)
	}
	return ips, nil
}

// numericTLD reports whether h's last label is a number, decimal or 0x
// hex: a browser and inet_aton read such a host as an IPv4 address
// (127.1, 2130706433, 0177.0.0.1), Go's parser does not, and no top-level
// domain is one (RFC 3696 §2). Asked as a name, it would go to the
// upstream pool, where it can only leak or mislead.
func numericTLD(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// scope is where an address leads: the host itself, the LAN, the link, or
// the Internet.
type scope uint8

const (
	scopePublic scope = 1 << iota
	scopeLoopback
	scopePrivate
	scopeLinkLocal
	scopeOther // multicast and the like: never reached by a redirect
)

var scopeNames = map[scope]string{scopePublic: "public", scopeLoopback: "loopback", scopePrivate: "private",
	scopeLinkLocal: "link-local", scopeOther: "multicast or reserved"}

// cgnat is the shared address space of RFC 6598, a provider's LAN;
// thisNetwork is 0.0.0.0/8 (RFC 791, RFC 6890), which Linux answers as the
// host itself; nat64 is the NAT64 well-known prefix (RFC 6052 §2.1), whose
// last 32 bits are the IPv4 address a translator reaches.
var (
	cgnat       = netip.MustParsePrefix("100.64.0.0/10")
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
)

// scopeOf is ip's scope; a variable so a test can give loopback addresses
// a public scope (only loopback is reachable from a test). An address
// behind the NAT64 prefix has the scope of the IPv4 address it stands for:
// a household's IPv6-only router translates 64:ff9b::192.168.1.1 into its
// own LAN.
var scopeOf = func(ip netip.Addr) scope {
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		a := ip.As16()
		ip = netip.AddrFrom4([4]byte(a[12:]))
	}
	switch {
	case ip.IsLoopback() || ip.IsUnspecified() || thisNetwork.Contains(ip): // 0.0.0.0 and :: reach the host itself
		return scopeLoopback
	case ip.IsPrivate() || cgnat.Contains(ip):
		return scopePrivate
	case ip.IsLinkLocalUnicast():
		return scopeLinkLocal
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast() || !ip.IsGlobalUnicast():
		return scopeOther
	}
	return scopePublic
}

// guardKey is the context key of a download's redirectGuard.
type guardKey struct{}

// redirectGuard holds one download's redirects to the scopes of the list's
// own host (docs/filter.md "Downloads"): a list URL on a public host that
// redirects to a loopback, private or link-local address would make nxdns
// fetch from inside the household for whoever controls the list host (an
// SSRF path). Public addresses are always allowed; any other scope only
// when the list's own host had an address in it. The check is made on the
// addresses dialled, after resolution, so a name that resolves inward is
// caught as well as an address literal.
type redirectGuard struct {
	mu     sync.Mutex
	origin scope // the scopes of the list host's addresses
	after  bool  // a redirect was followed: dials now go to its target
}

func (g *redirectGuard) redirected() {
	g.mu.Lock()
	g.after = true
	g.mu.Unlock()
}

// admit returns the addresses of host a dial may use: all of them for the
// list's own host (their scopes are noted), those in an allowed scope after
// a redirect, or an error naming the refused address and scope.
func (g *redirectGuard) admit(host string, ips []netip.Addr) ([]netip.Addr, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.after {
		for _, ip := range ips {
			g.origin |= scopeOf(ip)
		}
		return ips, nil
	}
	var ok []netip.Addr
	var refused netip.Addr
	for _, ip := range ips {
		if sc := scopeOf(ip); sc == scopePublic || g.origin&sc != 0 {
			ok = append(ok, ip)
		} else if !refused.IsValid() {
			refused = ip
		}
	}
	if len(ok) == 0 {
		return nil, fmt.Errorf("%w: %s (%s, %s) is not where the list's own host is", ErrRedirectRefused, host, refused, scopeNames[scopeOf(refused)])
	}
	return ok, nil
}

// ErrRedirectRefused is the download error of a redirect out of the list
// host's scopes (redirectGuard).
var ErrRedirectRefused = errors.New("redirect refused")

// downloadLoop refreshes one URL list until ctx ends: at once when its copy
// is missing or due, then every refresh interval with jitter; after a
// failure sooner (10 minutes, doubling up to the interval).
func (e *Engine) downloadLoop(ctx context.Context, st *listState) {
	e.mu.Lock()
	last, interval := st.meta.Fetched, e.interval()
	e.mu.Unlock()
	wait := time.Duration(0)
	if !last.IsZero() {
		wait = max(0, last.Add(interval).Sub(e.now()))
	}
	retry := 10 * time.Minute
	for {
		if !sleep.For(ctx, wait) {
			return
		}
		if err := e.Refresh(ctx, st.cfg.Name); err != nil && ctx.Err() == nil {
			wait = min(retry, interval)
			retry *= 2
			continue
		}
		retry = 10 * time.Minute
		e.mu.Lock()
		wait = e.interval()
		e.mu.Unlock()
	}
}

// Refresh downloads one URL list now. A copy that passes the quality gates
// (a 2xx answer that is no HTML page and no binary, within MaxListBytes,
// not shrunk by more than half) replaces the last good copy on disk and the
// set is rebuilt; anything else keeps the last good copy, counts a failure
// and is logged once per episode. A 304 Not Modified renews the copy's age.
func (e *Engine) Refresh(ctx context.Context, name string) error {
	e.mu.Lock()
	st, ok := e.lists[name]
	if !ok || st.cfg.URL == "" {
		e.mu.Unlock()
		return fmt.Errorf("%w %q", ErrNoSuchList, name)
	}
	e.mu.Unlock()
	st.fetching.Lock()
	defer st.fetching.Unlock()
	e.mu.Lock()
	// The shrink gate compares with the names the copy had, not those the
	// names caps let in: the download's own parse is not capped.
	m, prev, path, metaPath := st.meta, st.report.Rules+st.report.NamesOverCap, e.listPath(name), e.metaPath(name)
	if st.moved {
		prev = 0
	}
	if _, err := os.Stat(path); err != nil {
		m.ETag, m.LastModified = "", "" // no copy to revalidate
	}
	e.mu.Unlock()

	newMeta, rep, err := e.download(ctx, st.cfg.URL, m, path, prev)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lists[name] != st { // the configuration changed meanwhile
		return context.Canceled
	}
	if err != nil {
		e.fail(st, err)
		return err
	}
	if werr := writeMeta(metaPath, newMeta); werr != nil {
		e.log.Warn("list metadata not saved: the next start downloads it unconditionally", zap.String("list", name), zap.Error(werr))
	}
	st.meta = newMeta
	st.loaded = newMeta.Fetched
	st.moved = false
	e.succeed(st)
	if rep != nil {
		e.signalChanged()
	}
	return nil
}

// metaFor is m for a list now at url: m itself when it came from url (or
// does not say), else no validators and no fetch time, so the list is
// downloaded at once and unconditionally.
func metaFor(m meta, url string) meta {
	if m.URL != "" && m.URL != url {
		return meta{}
	}
	return m
}

// download fetches u into path when it passes the gates; rep is nil for a
// 304.
func (e *Engine) download(ctx context.Context, u string, m meta, path string, prev int) (meta, *Report, error) {
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	ctx = context.WithValue(ctx, guardKey{}, &redirectGuard{})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return m, nil, err
	}
	req.Header.Set("User-Agent", "nxdns")
	if m.ETag != "" {
		req.Header.Set("If-None-Match", m.ETag)
	}
	if m.LastModified != "" {
		req.Header.Set("If-Modified-Since", m.LastModified)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return m, nil, fmt.Errorf("GET %s: %w", redactURL(u), scrubURLError(err))
	}
	defer resp.Body.Close()
	now := e.now()
	switch {
	case resp.StatusCode == http.StatusNotModified:
		m.URL, m.Fetched = u, now
		return m, nil, nil
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return m, nil, fmt.Errorf("GET %s: %s", redactURL(u), resp.Status)
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "text/html" || ct == "application/xhtml+xml" {
		return m, nil, ErrHTML
	}
	// Download beside the last good copy, check it, then rename it over.
	tmp := path + ".new"
	defer os.Remove(tmp)
	if err := writeFileAtomic(tmp, resp.Body, listCap); err != nil {
		return m, nil, err
	}
	rep, err := parseFile(tmp, func(Rule) {}, nil)
	if err != nil {
		return m, nil, err
	}
	if prev > 0 && rep.Rules < prev/2 {
		return m, nil, fmt.Errorf("shrank from %d to %d rules (more than half): kept the last good copy", prev, rep.Rules)
	}
	if err := os.Rename(tmp, path); err != nil {
		return m, nil, err
	}
	return meta{URL: u, ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified"), Fetched: now}, &rep, nil
}

// redactURL keeps a list URL's scheme, host and path: its query may carry
// a token (docs/design.md#redaction: no secrets in logs or metrics).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return s
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// scrubURLError drops the URL (with its query) from a client error.
func scrubURLError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}
