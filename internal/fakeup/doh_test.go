package fakeup

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestDoH_servesHTTP2PostAndGet(t *testing.T) {
	s := start(t, Config{}, "doh://127.0.0.1:0/q")
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.ca.Pool()}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: ioBound}
	url := "https://localhost:" + portOf(s.addr(0)) + "/q"

	wire, _ := query("post.example.", dns.TypeA).Pack()
	post, err := client.Post(url, dnsMessage, bytes.NewReader(wire))
	if err != nil {
		t.Fatal(err)
	}
	wantA(t, dohReply(t, post), "post.example.")

	wire, _ = query("get.example.", dns.TypeA).Pack()
	get, err := client.Get(url + "?dns=" + base64.RawURLEncoding.EncodeToString(wire))
	if err != nil {
		t.Fatal(err)
	}
	wantA(t, dohReply(t, get), "get.example.")

	tr.CloseIdleConnections()
	s.Close()
	if got := s.counts(0); got.Connections != 1 || got.Handshakes != 1 || got.Answered != 2 {
		t.Errorf("counts = %+v, want both requests on 1 connection, 1 handshake, 2 answered", got)
	}
}

func dohReply(t *testing.T, resp *http.Response) *dns.Msg {
	t.Helper()
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Errorf("protocol %s, want HTTP/2", resp.Proto)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != dnsMessage {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	if err := m.Unpack(body); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDoH_rejectsWhatIsNotAQuery(t *testing.T) {
	s := start(t, Config{}, "doh://127.0.0.1:0")
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.ca.Pool()}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: ioBound}
	url := "https://127.0.0.1:" + portOf(s.addr(0)) + defaultDoHPath
	tests := []struct {
		name   string
		method string
		ctype  string
		body   string
		want   int
	}{
		{"wrong content type", http.MethodPost, "text/plain", "x", http.StatusUnsupportedMediaType},
		{"wrong method", http.MethodPut, dnsMessage, "x", http.StatusMethodNotAllowed},
		{"not DNS", http.MethodPost, dnsMessage, "x", http.StatusBadRequest},
		{"GET without dns", http.MethodGet, "", "", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, url, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", tt.ctype)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

func TestStall_udpAndDoHCountAndNeverAnswer(t *testing.T) {
	const quiet = 300 * time.Millisecond
	s := start(t, Config{}, "udp://127.0.0.1:0?stall=1", "doh://127.0.0.1:0?stall=1")
	if _, err := exchangeUDP(t, s.addr(0), query("stall.example.", dns.TypeA), quiet); !isTimeout(err) {
		t.Errorf("udp read = %v, want a timeout", err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.ca.Pool()}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	wire, _ := query("stall.example.", dns.TypeA).Pack()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://localhost:"+portOf(s.addr(1))+defaultDoHPath, bytes.NewReader(wire))
	req.Header.Set("Content-Type", dnsMessage)
	if resp, err := (&http.Client{Transport: tr}).Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("DoH status %d, want no answer", resp.StatusCode)
	}
	s.Close()
	for i := range 2 {
		if got := s.counts(i); got.Queries != 1 || got.Stalled != 1 || got.Answered != 0 {
			t.Errorf("%s counts = %+v, want 1 query, 1 stalled, 0 answered", s.Listeners()[i].Key, got)
		}
	}
}

// DoH's idle_close is net/http's IdleTimeout: an idle HTTP/2 connection gets
// a GOAWAY and is closed. The client speaks just enough HTTP/2 by hand
// (RFC 9113 §3.4 preface, §4.1 frame headers) to stay idle.
func TestIdleClose_closesAnIdleDoHConnection(t *testing.T) {
	const (
		idle       = 200 * time.Millisecond
		preface    = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
		typeGoAway = 0x7
	)
	s := start(t, Config{}, "doh://127.0.0.1:0?idle_close="+idle.String())
	c, err := tls.Dial("tcp", s.addr(0), &tls.Config{RootCAs: s.ca.Pool(), ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	emptySettings := []byte{0, 0, 0, 0x4, 0, 0, 0, 0, 0}
	if _, err := c.Write(append([]byte(preface), emptySettings...)); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	c.SetReadDeadline(begin.Add(ioBound))
	var sawGoAway bool
	for {
		var hdr [9]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("read = %v, want EOF once idle", err)
			}
			break
		}
		sawGoAway = sawGoAway || hdr[3] == typeGoAway
		length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		if _, err := io.CopyN(io.Discard, c, int64(length)); err != nil {
			t.Fatal(err)
		}
	}
	if waited := time.Since(begin); !sawGoAway || waited < idle/2 {
		t.Errorf("closed after %v, GOAWAY %v; want a GOAWAY after about %v", waited, sawGoAway, idle)
	}
}
