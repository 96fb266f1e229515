package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/testutil"
)

// TestDoH_resetStreamsCountInTheClientsShareUntilTheirWorkEnds: one client
// opens connection after connection, each with 16 DoH queries for unique
// names, and resets every stream (and closes the connection) as soon as the
// query has reached the upstream or been turned away. The exchanges the
// cache started go on for the upstream's 4 s; under the request's context
// each reset freed the stream's place, so 1 280 resets kept 1 280 exchanges
// in flight. Counted in the client's share until their work ends, the
// client never has more than dohClientShare exchanges in flight, the rest
// are turned away with 429, and another client's misses are answered
// meanwhile.
func TestDoH_resetStreamsCountInTheClientsShareUntilTheirWorkEnds(t *testing.T) {
	const latency = 4 * time.Second
	var inFlight, peak atomicMax
	var seen sync.Map // names the upstream was asked
	up := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		inFlight.add(1)
		peak.observe(inFlight.load())
		defer inFlight.add(-1)
		seen.Store(q.Question[0].Name, true)
		select {
		case <-time.After(latency): // the upstream's answer time
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
		return reply(q, aRecord(q.Question[0].Name, "192.0.2.1")), testUpstream, nil
	})
	c := cache.New(cache.Options{Size: 10000, MaxTTL: time.Hour})
	defer c.Close()
	stage := c.Stage()
	defer stage.Close()
	st := &State{Router: pool(up), Allow: loopback, Stages: []query.Stage{stage}, Budget: 3 * latency}
	p := newTestPKI(t)
	s := startTLSServer(t, st, p)
	_, doh := s.TLSAddrs()

	const batches, perConn = 80, maxConnQueries
	goroutines := 0
	for b := range batches {
		resetBatch(t, doh[0].String(), p.clientConf, b, perConn, &seen)
		goroutines = max(goroutines, runtime.NumGoroutine())
	}

	// Another client, 127.0.0.2, asks eight names of its own meanwhile.
	tr := &http.Transport{TLSClientConfig: p.clientConf.Clone(), ForceAttemptHTTP2: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}
	defer tr.CloseIdleConnections()
	other := &http.Client{Transport: tr, Timeout: 3 * latency}
	var wg sync.WaitGroup
	var answered atomic.Int32
	for i := range 8 {
		wg.Go(func() {
			m := tlsQuery(fmt.Sprintf("other%d.example.", i))
			resp := dohGetErr(other, dohURL(s), m)
			if resp != nil && len(resp.Answer) == 1 {
				answered.Add(1)
			}
		})
	}
	wg.Wait()

	t.Logf("%d reset streams: peak %d exchanges in flight (share %d), peak %d goroutines; 429s %d",
		batches*perConn, peak.load(), dohClientShare, goroutines, status(s, http.StatusTooManyRequests))
	// The flood's exchanges, and the other client's eight.
	if got := peak.load(); got > dohClientShare+8 {
		t.Errorf("%d exchanges in flight at once from reset streams, over the client's share of %d", got, dohClientShare)
	}
	if status(s, http.StatusTooManyRequests) == 0 {
		t.Error("no stream over the share was turned away")
	}
	if n := answered.Load(); n != 8 {
		t.Errorf("the other client got %d of its 8 misses answered", n)
	}
}

// resetBatch opens one HTTP/2 connection, sends n GET queries for unique
// names on it, waits until each has reached the upstream or been answered
// (turned away), then resets every stream and closes the connection.
func resetBatch(t *testing.T, addr string, conf *tls.Config, batch, n int, seen *sync.Map) {
	t.Helper()
	conf = conf.Clone()
	conf.NextProtos = []string{"h2"}
	c, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		t.Fatalf("batch %d: %v", batch, err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	answered := map[uint32]bool{}
	go func() { // the server's frames: which streams got a response
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if h, ok := f.(*http2.HeadersFrame); ok {
				mu.Lock()
				answered[h.StreamID] = true
				mu.Unlock()
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	names := map[uint32]string{}
	for i := range n {
		id := uint32(2*i + 1)
		name := fmt.Sprintf("r%d-%d.flood.example.", batch, i)
		names[id] = name
		wire, err := tlsQuery(name).Pack()
		if err != nil {
			t.Fatal(err)
		}
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", addr},
			{":path", dohPath + "?dns=" + base64.RawURLEncoding.EncodeToString(wire)}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, fmt.Sprintf("batch %d's queries to reach the upstream or be turned away", batch), func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id, name := range names {
			if _, ok := seen.Load(name); !ok && !answered[id] {
				return false
			}
		}
		return true
	})
	for id := range names {
		fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
}

// dohGetErr is dohGet for a goroutine: the answer, or nil on any failure.
func dohGetErr(c *http.Client, url string, m *dns.Msg) *dns.Msg {
	out, err := testutil.DoHGet(c, url, m)
	if err != nil {
		return nil
	}
	return out
}

// status is the DoH error count for one HTTP status.
func status(s *Server, code int) uint64 {
	for _, sc := range s.TLSSnapshot().DoHErrors {
		if sc.Status == code {
			return sc.Count
		}
	}
	return 0
}
