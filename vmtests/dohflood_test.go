package vmtests

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/nxdns/nxdns/internal/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestDoH_resetStreamFloodThroughTheBinary: one host sends 12 000 DoH queries
// for unique names to the real binary, resetting each stream right after
// sending it, while the pool's upstream takes 1 s to answer; another host's
// DoH misses are answered meanwhile, and nxdns's goroutines stay bounded by
// the flooding host's DoH share (512 queries in flight, each a handler and
// an exchange), where counting a query only until its stream ended let
// every reset start another exchange (issue 30: 7 600–7 900 goroutines at
// 2 000 resets a second).
func TestDoH_resetStreamFloodThroughTheBinary(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	n := startTLSNxdnsWith(t, ca, nil, startUpstream(t, ca, "dot://127.0.0.1:0?latency=1s"))
	conf := &tls.Config{RootCAs: n.ca.Pool(), ServerName: "dns.home.test", NextProtos: []string{"h2"}}
	base := metric(n.metrics(t), "go_goroutines")

	const streams = 12000
	var sent atomic.Int64
	done := make(chan error, 1)
	go func() { done <- resetFlood(n.doh, conf, streams, &sent) }()

	// Another host's misses, while the flood runs.
	tr := &http.Transport{TLSClientConfig: conf.Clone(), ForceAttemptHTTP2: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}
	defer tr.CloseIdleConnections()
	other := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	var answered atomic.Int32
	start := func() {
		for i := range 8 {
			wg.Go(func() {
				if dohMiss(other, "https://"+n.doh+"/dns-query", fmt.Sprintf("other%d.example.", i)) {
					answered.Add(1)
				}
			})
		}
	}

	// Sample nxdns's goroutines until the flood has been sent and has had
	// two seconds more.
	peak := base
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var floodErr error
	var sentAt time.Time
	started := false
	for sentAt.IsZero() || time.Since(sentAt) < 2*time.Second {
		<-tick.C
		peak = max(peak, metric(n.metrics(t), "go_goroutines"))
		if !started && sent.Load() > streams/4 {
			start()
			started = true
		}
		select {
		case floodErr = <-done:
			sentAt = time.Now()
		default:
		}
	}
	if !started {
		start()
	}
	wg.Wait()
	tooMany := metric(n.metrics(t), "nxdns_doh_errors_total", "status", "429")
	t.Logf("%d reset streams: nxdns goroutines %v before, peak %v; 429s %v; other host answered %d of 8",
		sent.Load(), base, peak, tooMany, answered.Load())
	if floodErr != nil {
		t.Fatalf("flood: %v", floodErr)
	}
	if bound := base + 3*512; peak > bound {
		t.Errorf("nxdns ran %v goroutines under the reset flood, over %v (a handler and an exchange for each of the flooding host's 512 queries, and their connections)", peak, bound)
	}
	if answered.Load() != 8 {
		t.Errorf("the other host got %d of its 8 DoH misses answered", answered.Load())
	}
}

// resetFlood sends n DoH GET queries for unique names over HTTP/2, each
// stream reset right after its HEADERS, 80 streams to a connection; sent
// counts the streams sent.
func resetFlood(addr string, conf *tls.Config, n int, sent *atomic.Int64) error {
	for conn := 0; sent.Load() < int64(n); conn++ {
		c, err := tls.Dial("tcp", addr, conf)
		if err != nil {
			return err
		}
		c.Write([]byte(http2.ClientPreface))
		fr := http2.NewFramer(c, c)
		fr.WriteSettings()
		// Drain the server's frames so its writes never block; closing is
		// set once it sends GOAWAY or closes.
		var closing atomic.Bool
		go func() {
			defer closing.Store(true)
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					return
				}
				if _, ok := f.(*http2.GoAwayFrame); ok {
					return
				}
			}
		}()
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		// At most 80 streams a connection: the 16 it runs at once and the
		// 64 net/http queues behind them before it gives up on the
		// connection (ENHANCE_YOUR_CALM), so every stream sent is read.
		for id := uint32(1); sent.Load() < int64(n) && id < 2*80 && !closing.Load(); id += 2 {
			wire, _ := new(dns.Msg).SetQuestion(fmt.Sprintf("r%d-%d.flood.example.", conn, id), dns.TypeA).Pack()
			hb.Reset()
			for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", addr},
				{":path", "/dns-query?dns=" + base64.RawURLEncoding.EncodeToString(wire)}} {
				enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}) != nil ||
				fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				break // the server closed the connection: open another
			}
			sent.Add(1)
		}
		c.Close()
	}
	return nil
}

// dohMiss asks name over DoH GET and reports whether an answer came.
func dohMiss(c *http.Client, url, name string) bool {
	m, err := testutil.DoHGet(c, url, new(dns.Msg).SetQuestion(name, dns.TypeA))
	return err == nil && len(m.Answer) > 0
}
