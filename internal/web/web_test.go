package web

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func okHealth() Health { return Health{Status: StatusOK} }

// TestServer_dropsSilentClient: a client that connects and sends nothing is
// disconnected after the read-header timeout, and meanwhile the server keeps
// answering others. The timeout is shortened for the test; the bound checked
// is one timeout plus a generous margin, never an exact time.
func TestServer_dropsSilentClient(t *testing.T) {
	const short = 200 * time.Millisecond
	s := startWeb(t, nil, okHealth, func(s *Server) { s.readHeaderTimeout = short })
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if code, _, _ := get(t, s, "/api/health"); code != http.StatusOK {
		t.Errorf("health while a silent client is connected: HTTP %d", code)
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // the test's own bound, far above short
	n, err := c.Read(make([]byte, 1))
	took := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("silent client still connected after %v: the read-header timeout (%v) did not fire", took, short)
	}
	if n != 0 || err == nil {
		t.Fatalf("read %d bytes, err %v: want the server to close the connection", n, err)
	}
	if took > short+5*time.Second {
		t.Errorf("disconnected after %v, want about %v", took, short)
	}
}

// TestServer_dropsTricklingClient: a client that sends part of a request
// line and then stalls is cut off the same way, so trickling bytes cannot
// keep a connection.
func TestServer_dropsTricklingClient(t *testing.T) {
	const short = 200 * time.Millisecond
	s := startWeb(t, nil, okHealth, func(s *Server) { s.readHeaderTimeout = short })
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil { // net/http may answer 408 before closing
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("HTTP %d to an unfinished request, want a close or 408", resp.StatusCode)
		}
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("trickling client still connected after 10 s")
	}
}

// TestServer_limitsHeaderSize: headers over maxHeaderBytes are refused
// (431) rather than buffered.
func TestServer_limitsHeaderSize(t *testing.T) {
	s := startWeb(t, nil, okHealth)
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := strings.Repeat("a", 2*maxHeaderBytes)
	go io.WriteString(c, "GET /api/health HTTP/1.1\r\nHost: x\r\nX-Big: "+big+"\r\n\r\n") // ends when c closes
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("HTTP %d, want 431", resp.StatusCode)
	}
}

// TestServer_routes: GET and HEAD on the two endpoints; other methods are
// refused; other paths are not found.
func TestServer_routes(t *testing.T) {
	s := startWeb(t, nil, okHealth)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	cases := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/metrics", 200},
		{http.MethodHead, "/metrics", 200},
		{http.MethodGet, "/api/health", 200},
		{http.MethodPost, "/api/health", 405},
		{http.MethodPost, "/metrics", 405},
		{http.MethodGet, "/", 404},
		{http.MethodGet, "/debug/pprof/", 404},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, "http://"+s.Addr().String()+tc.path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s: HTTP %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}
}

// TestStart_errorNamesAddress: a port already taken fails Start with an
// error naming the configured address.
func TestStart_errorNamesAddress(t *testing.T) {
	first := startWeb(t, nil, okHealth)
	addr := first.Addr().String()
	second := New(addr, nil, okHealth, nil)
	err := second.Start()
	if err == nil {
		second.Shutdown(context.Background())
		t.Fatalf("second Start on %s succeeded", addr)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error %q does not name %s", err, addr)
	}
}

// TestServer_lifecycle: Start twice fails, Shutdown is safe before Start and
// twice, and Start after Shutdown fails without binding.
func TestServer_lifecycle(t *testing.T) {
	s := New("127.0.0.1:0", nil, okHealth, nil)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown before Start: %v", err)
	}
	if err := s.Start(); err == nil {
		t.Error("Start after Shutdown succeeded")
	}
	if s.Addr() != nil {
		t.Error("Start after Shutdown bound an address")
	}

	s = startWeb(t, nil, okHealth)
	if err := s.Start(); err == nil {
		t.Error("second Start succeeded")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second); err == nil {
		t.Error("still accepting after Shutdown")
	}
	if New("", nil, okHealth, nil).Start() == nil {
		t.Error("Start with an empty address succeeded")
	}
}

// brokenCollector emits one good sample and one that fails to collect.
type brokenCollector struct{}

var (
	goodDesc = prometheus.NewDesc("nxdns_test_good", "A sample that collects.", nil, nil)
	badDesc  = prometheus.NewDesc("nxdns_test_bad", "A sample that fails.", nil, nil)
)

func (brokenCollector) Describe(ch chan<- *prometheus.Desc) { ch <- goodDesc; ch <- badDesc }
func (brokenCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(goodDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.NewInvalidMetric(badDesc, errors.New("cannot read"))
}

// TestMetrics_oneFailingSeriesKeepsTheRest: a series that fails to collect
// costs that series, not the scrape: the others are served with HTTP 200.
func TestMetrics_oneFailingSeriesKeepsTheRest(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(brokenCollector{})
	s := startWeb(t, reg, okHealth)
	code, _, body := get(t, s, "/metrics")
	if code != http.StatusOK || !strings.Contains(string(body), "nxdns_test_good 1") {
		t.Errorf("HTTP %d:\n%s\nwant 200 with the good series", code, body)
	}
}
