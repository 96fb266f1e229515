package server

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func dohGet(t *testing.T, c *http.Client, url string, m *dns.Msg) *http.Response {
	t.Helper()
	resp, err := c.Get(url + "?dns=" + base64.RawURLEncoding.EncodeToString(mustPack(t, m)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func dohAnswer(t *testing.T, resp *http.Response) *dns.Msg {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != dohContentType {
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	m := new(dns.Msg)
	if err := m.Unpack(body); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDoH_getAndPostOverHTTP2AndHTTP1: both methods over both HTTP versions
// are answered, with the freshness of the answer's TTL.
func TestDoH_getAndPostOverHTTP2AndHTTP1(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, state(answerA("192.0.2.10")), p)
	for _, v := range []struct {
		name  string
		h1    bool
		proto string
	}{{"HTTP/2", false, "HTTP/2.0"}, {"HTTP/1.1", true, "HTTP/1.1"}} {
		t.Run(v.name, func(t *testing.T) {
			c := dohClient(t, p.clientConf, v.h1)
			get := dohGet(t, c, dohURL(s), tlsQuery("get.example."))
			if get.Proto != v.proto {
				t.Fatalf("served over %s, want %s", get.Proto, v.proto)
			}
			if m := dohAnswer(t, get); len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.10" {
				t.Fatalf("GET answer %v", m)
			}
			if cc := get.Header.Get("Cache-Control"); cc != "max-age=60" {
				t.Errorf("Cache-Control %q, want max-age=60 (the record's TTL)", cc)
			}
			post, err := c.Post(dohURL(s), dohContentType, bytes.NewReader(mustPack(t, tlsQuery("post.example."))))
			if err != nil {
				t.Fatal(err)
			}
			defer post.Body.Close()
			if m := dohAnswer(t, post); len(m.Answer) != 1 || m.Question[0].Name != "post.example." {
				t.Fatalf("POST answer %v", m)
			}
		})
	}
	// A query is counted after its answer was written: wait for the count.
	waitFor(t, "four DoH queries counted", func() bool {
		for _, pc := range s.Snapshot().Protos {
			if pc.Proto == "doh" && pc.Count >= 4 {
				return true
			}
		}
		return false
	})
	for _, pc := range s.Snapshot().Protos {
		if pc.Proto == "doh" && pc.Count != 4 {
			t.Errorf("doh queries counted %d, want 4", pc.Count)
		}
	}
}

// TestDoH_badRequests: each gets its HTTP error, counted, and a good request
// on the same connection still works.
func TestDoH_badRequests(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, state(answerA("192.0.2.11")), p)
	c := dohClient(t, p.clientConf, false)
	url := dohURL(s)
	query := mustPack(t, tlsQuery("bad.example."))
	huge := bytes.Repeat([]byte{0}, 1<<20)
	cases := []struct {
		name   string
		req    func() (*http.Request, error)
		status int
	}{
		{"wrong path", func() (*http.Request, error) {
			return http.NewRequest("GET", strings.TrimSuffix(url, "dns-query")+"resolve", nil)
		}, 404},
		{"PUT", func() (*http.Request, error) { return http.NewRequest("PUT", url, bytes.NewReader(query)) }, 405},
		{"POST text/plain", func() (*http.Request, error) {
			r, err := http.NewRequest("POST", url, bytes.NewReader(query))
			if r != nil {
				r.Header.Set("Content-Type", "text/plain")
			}
			return r, err
		}, 415},
		{"POST huge body", func() (*http.Request, error) {
			r, err := http.NewRequest("POST", url, bytes.NewReader(huge))
			if r != nil {
				r.Header.Set("Content-Type", dohContentType)
			}
			return r, err
		}, 413},
		{"POST huge body, no length", func() (*http.Request, error) {
			r, err := http.NewRequest("POST", url, io.MultiReader(bytes.NewReader(huge)))
			if r != nil {
				r.Header.Set("Content-Type", dohContentType)
				r.ContentLength = -1
			}
			return r, err
		}, 413},
		{"GET no dns", func() (*http.Request, error) { return http.NewRequest("GET", url, nil) }, 400},
		{"GET malformed dns", func() (*http.Request, error) { return http.NewRequest("GET", url+"?dns=%21%21not*base64", nil) }, 400},
		{"GET not a query", func() (*http.Request, error) { return http.NewRequest("GET", url+"?dns=AAAA", nil) }, 400},
		{"GET huge dns", func() (*http.Request, error) {
			return http.NewRequest("GET", url+"?dns="+strings.Repeat("A", 8000), nil)
		}, 414},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := tc.req()
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == 405 && resp.Header.Get("Allow") != "GET, POST" {
				t.Errorf("Allow %q", resp.Header.Get("Allow"))
			}
		})
	}
	want := map[int]uint64{400: 3, 404: 1, 405: 1, 413: 2, 414: 1, 415: 1}
	for _, sc := range s.TLSSnapshot().DoHErrors {
		if sc.Count != want[sc.Status] {
			t.Errorf("status %d counted %d, want %d", sc.Status, sc.Count, want[sc.Status])
		}
	}
	if m := dohAnswer(t, dohGet(t, c, url, tlsQuery("good.example."))); len(m.Answer) != 1 {
		t.Fatalf("good query after the bad ones: %v", m)
	}
}

func TestCacheControl(t *testing.T) {
	q := newQuery("x.example.", dns.TypeA)
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 900}, Minttl: 300,
		Ns: "ns.example.", Mbox: "h.example."}
	nx := reply(q)
	nx.Rcode = dns.RcodeNameError
	nx.Ns = []dns.RR{soa}
	sf := reply(q)
	sf.Rcode = dns.RcodeServerFailure
	two := reply(q, aRecord("x.example.", "192.0.2.1"), &dns.A{Hdr: dns.RR_Header{Name: "x.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 7}, A: []byte{192, 0, 2, 2}})
	for name, c := range map[string]struct {
		m    *dns.Msg
		want string
	}{
		"smallest TTL":    {two, "max-age=7"},
		"negative by SOA": {nx, "max-age=300"},
		"no records":      {reply(q), "max-age=0"},
		"SERVFAIL":        {sf, "no-store"},
	} {
		if got := cacheControl(mustPack(t, c.m)); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}

// TestDoH_badClients: the DoH listener bounds handshakes like DoT: a silent
// client is cut off, a TLS 1.1 one refused, both counted, and a good client
// served meanwhile.
func TestDoH_badClients(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, state(answerA("192.0.2.12")), p, func(s *Server) { s.tls.handshake = 300 * time.Millisecond })
	_, doh := s.TLSAddrs()
	silent, err := net.Dial("tcp", doh[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	conf := p.clientConf.Clone()
	conf.MaxVersion = tls.VersionTLS11
	if c, err := tls.Dial("tcp", doh[0].String(), conf); err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
	if m := dohAnswer(t, dohGet(t, dohClient(t, p.clientConf, false), dohURL(s), tlsQuery("good.example."))); len(m.Answer) != 1 {
		t.Fatalf("good client: %v", m)
	}
	assertClosed(t, silent, 5*time.Second)
	waitFor(t, "both counted", func() bool {
		d := s.TLSSnapshot().DoH
		return d.HandshakeTimeouts == 1 && d.HandshakeFailures == 1
	})
}
