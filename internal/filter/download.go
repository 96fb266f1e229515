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
	"time"

	"go.uber.org/zap"
)

// meta is what a downloaded list keeps beside its copy, across restarts:
// the validators for a conditional GET and when the copy was fetched.
type meta struct {
	ETag         string    `json:"etag,omitempty"`
	LastModified string    `json:"last_modified,omitempty"`
	Fetched      time.Time `json:"fetched"`
}

func readMeta(path string) meta {
	var m meta
	b, err := os.ReadFile(path)
	if err == nil && len(b) < 64<<10 {
		_ = json.Unmarshal(b, &m) // a damaged file only costs one unconditional download
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
// filter it feeds.
type httpClient struct{ *http.Client }

// downloadTimeout bounds one whole download, body included.
const downloadTimeout = 2 * time.Minute

func newHTTPClient(lookup func(ctx context.Context, host string) ([]netip.Addr, error)) *httpClient {
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		Proxy:                 nil,
		ResponseHeaderTimeout: 30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		IdleConnTimeout:       30 * time.Second,
		MaxIdleConns:          4,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if ip, err := netip.ParseAddr(host); err == nil {
				return d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
			}
			if lookup == nil {
				return nil, fmt.Errorf("list host %s: a name, and no resolver was given", host)
			}
			ips, err := lookup(ctx, host)
			if err != nil {
				return nil, fmt.Errorf("resolving list host %s through the upstreams: %w", host, err)
			}
			if len(ips) == 0 {
				return nil, fmt.Errorf("list host %s has no address", host)
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
	return &httpClient{&http.Client{Transport: tr, Timeout: downloadTimeout}}
}

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
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
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
		return fmt.Errorf("no downloaded list %q", name)
	}
	m, prev, path, metaPath := st.meta, st.report.Rules, e.listPath(name), e.metaPath(name)
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
	e.succeed(st)
	if rep != nil {
		e.signalChanged()
	}
	return nil
}

// download fetches u into path when it passes the gates; rep is nil for a
// 304.
func (e *Engine) download(ctx context.Context, u string, m meta, path string, prev int) (meta, *Report, error) {
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
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
		m.Fetched = now
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
	rep, err := parseFile(tmp, func(Rule) {})
	if err != nil {
		return m, nil, err
	}
	if prev > 0 && rep.Rules < prev/2 {
		return m, nil, fmt.Errorf("shrank from %d to %d rules (more than half): kept the last good copy", prev, rep.Rules)
	}
	if err := os.Rename(tmp, path); err != nil {
		return m, nil, err
	}
	return meta{ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified"), Fetched: now}, &rep, nil
}

// redactURL keeps a list URL's scheme, host and path: its query may carry
// a token (SPEC §9: no secrets in logs or metrics).
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
