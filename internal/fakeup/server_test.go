package fakeup

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestCountersOverHTTP(t *testing.T) {
	s := start(t, Config{HTTP: "127.0.0.1:0"}, "udp://127.0.0.1:0", "tcp://127.0.0.1:0?latency=1ms")
	if _, err := exchangeUDP(t, s.addr(0), query("count.example.", dns.TypeA), ioBound); err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.HTTPAddr().String()
	client := &http.Client{Timeout: ioBound}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get(base + "/counters")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range got {
			if !yield(k) {
				return
			}
		}
	})
	if want := []string{"answered", "connections", "h2_requests", "handshakes", "per_listener", "queries", "requests", "resumed", "stalled"}; !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	var per map[string]Counts
	if err := json.Unmarshal(got["per_listener"], &per); err != nil {
		t.Fatal(err)
	}
	udpKey := "udp://127.0.0.1:" + portOf(s.addr(0))
	// queries is counted before the reply leaves; answered, after: only the
	// first is certain by now.
	if c := per[udpKey]; c.Queries != 1 || len(per) != 2 {
		t.Errorf("per_listener = %v, want %s with 1 query, and 2 listeners", per, udpKey)
	}
	resp, err = client.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok", resp.StatusCode, body)
	}
}

func TestStart_logsOneLinePerListener(t *testing.T) {
	var log bytes.Buffer
	s := start(t, Config{Log: &log}, "dot://127.0.0.1:0?latency=30ms", "doh://127.0.0.1:0?stall=1", "tcp://127.0.0.1:0?close_on_query=2")
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	want := []string{
		"listening dot " + s.addr(0) + " latency=30ms",
		"listening doh " + s.addr(1) + "/dns-query stall=1",
		"listening tcp " + s.addr(2) + " close_on_query=2",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("log lines %q, want %q", lines, want)
	}
}

func TestStart_bindFailureLeavesNothingBound(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	first, err := net.Listen("tcp", "127.0.0.1:0") // a free port, released for the server
	if err != nil {
		t.Fatal(err)
	}
	free := first.Addr().String()
	first.Close()
	var cfg Config
	for _, u := range []string{"tcp://" + free, "tcp://" + busy.Addr().String()} {
		l, err := ParseListen(u)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listen = append(cfg.Listen, l)
	}
	if s, err := Start(cfg); err == nil {
		s.Close()
		t.Fatal("Start succeeded on a port in use")
	}
	again, err := net.Listen("tcp", free)
	if err != nil {
		t.Fatalf("the first listener was left bound: %v", err)
	}
	again.Close()
}

func TestStart_tlsListenerWithoutCAFails(t *testing.T) {
	l, err := ParseListen("dot://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := Start(Config{Listen: []Listen{l}}); err == nil {
		s.Close()
		t.Fatal("Start made a DoT listener with no CA")
	}
}

// Close ends answers still waiting out their latency, on every transport, and
// returns; goleak in TestMain proves nothing is left running.
func TestClose_endsPendingAnswers(t *testing.T) {
	scheduled := make(chan string, 2)
	cfg := Config{delay: func(name string) (time.Duration, bool) {
		scheduled <- name // the query is counted and about to wait
		return 5 * time.Minute, true
	}}
	s := start(t, cfg, "tcp://127.0.0.1:0", "udp://127.0.0.1:0")
	c := dialTCP(t, s.addr(0))
	writeMsg(t, c, query("later.example.", dns.TypeA))
	u, err := net.Dial("udp", s.addr(1))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	wire, _ := query("later.example.", dns.TypeA).Pack()
	if _, err := u.Write(wire); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-scheduled:
		case <-time.After(ioBound):
			t.Fatal("queries never reached the server")
		}
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(ioBound):
		t.Fatal("Close did not return with answers pending")
	}
	if got := s.Counters(); got.Queries != 2 || got.Answered != 0 {
		t.Errorf("counts = %+v, want 2 queries seen and none answered", got.Counts)
	}
}
