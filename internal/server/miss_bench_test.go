package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/upstream"
)

// BenchmarkMiss is one cache miss end to end, as nxdns serves it: a UDP
// query from a loopback client, the handler, the cache stage, the pool and
// its DoT client, over one pipelined TLS connection to an upstream that
// echoes each query as an empty NOERROR answer, and back (docs/performance.md
// "Where a miss goes"). Each op asks a name never asked before. Besides
// allocs/op it reports the goroutines created per miss (goroutines/op); the
// hand-offs (goroutines woken) and system calls per miss come from its
// execution trace (-trace, then go tool trace -d=parsed: the
// Waiting->Runnable and Running->Syscall transitions over the ops). The
// upstream is in the process, so its share (one TLS read and write a
// query, allocating nothing) is counted too, as is the client's.
func BenchmarkMiss(b *testing.B) {
	ca := testutil.NewCA(b)
	up := startEchoDoT(b, ca)
	ep, err := upstream.ParseEndpoint(fmt.Sprintf("tls://up.test:%d", up.Port), up.IP.String(), "")
	if err != nil {
		b.Fatal(err)
	}
	p, err := upstream.New(upstream.Options{Attempt: 2 * time.Second, Total: 4 * time.Second},
		[]upstream.Member{{Endpoint: ep, Client: upstream.NewDoT(ep, ca.Pool(), nil)}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	c := cache.New(cache.Options{Size: 1 << 20, MaxTTL: time.Hour})
	stage := c.Stage()
	defer func() { stage.Close(); c.Close() }()
	s := New(Options{}, &State{Router: pool(p), Allow: loopback, Stages: []query.Stage{stage}})
	if err := s.Listen([]string{"127.0.0.1:0"}); err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	conn, err := net.Dial("udp", udpAddr(s))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 1232)
	n := 0
	ask := func() {
		n++
		q := newQuery(fmt.Sprintf("m%d.miss.example.", n), dns.TypeA)
		q.SetEdns0(1232, false)
		wire, _ := q.Pack()
		if _, err := conn.Write(wire); err != nil {
			b.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, err := conn.Read(buf)
		if err != nil {
			b.Fatal(err)
		}
		if k < headerSize || buf[3]&0xF != dns.RcodeSuccess {
			b.Fatalf("answer %x", buf[:k])
		}
	}
	for range 20 { // the connection dialed, the workers and stacks grown
		ask()
	}
	samples := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(samples)
	created0 := samples[0].Value.Uint64()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ask()
	}
	b.StopTimer()
	metrics.Read(samples)
	b.ReportMetric(float64(samples[0].Value.Uint64()-created0)/float64(b.N), "goroutines/op")
}

// startEchoDoT is a DoT upstream on 127.0.0.1 that answers every framed
// query with the query itself, QR set: a valid empty answer to the same
// question, made without allocating, so a benchmark counts the client's work.
func startEchoDoT(b *testing.B, ca interface {
	Issue(...string) (tls.Certificate, error)
}) *net.TCPAddr {
	cert, err := ca.Issue("up.test")
	if err != nil {
		b.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { echoFrames(c) })
		}
	})
	b.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().(*net.TCPAddr)
}

func echoFrames(c net.Conn) {
	buf := make([]byte, 2+dns.MaxMsgSize)
	for {
		if _, err := io.ReadFull(c, buf[:2]); err != nil {
			return
		}
		size := int(binary.BigEndian.Uint16(buf))
		if _, err := io.ReadFull(c, buf[2:2+size]); err != nil {
			return
		}
		if size >= headerSize {
			buf[4] |= 0x80 // QR (RFC 1035 §4.1.1)
		}
		if _, err := c.Write(buf[:2+size]); err != nil {
			return
		}
	}
}
