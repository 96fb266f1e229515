package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/logging"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/wireform"
)

// instant answers at once with a prebuilt record, like a cache hit: the
// benchmarks measure the server, not the resolver.
func instant() resolverFunc {
	rr := aRecord("bench.example.", "192.0.2.1")
	return func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		return reply(q, rr), testUpstream, nil
	}
}

// BenchmarkHandle is the handler alone: parse, access list, route, resolve,
// relay, size, pack, count. No sockets.
func BenchmarkHandle(b *testing.B) {
	s := New(Options{}, state(instant()))
	q := newQuery("bench.example.", dns.TypeA)
	q.SetEdns0(1232, false)
	wire, _ := q.Pack()
	client := netip.MustParseAddr("127.0.0.1")
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if s.handle(ctx, wire, client, query.UDP) == nil {
				b.Fatal("no answer")
			}
		}
	})
}

// BenchmarkHandleLogged is BenchmarkHandle with the query log on (the
// default), through nxdns's own line encoder into a discarding sink: what a
// query's log line costs on top of its answer.
func BenchmarkHandleLogged(b *testing.B) {
	st := state(instant())
	st.QueryLog = true
	log := logging.New(logging.Options{Level: zap.NewAtomicLevelAt(zapcore.InfoLevel), Journal: true, Out: io.Discard})
	s := New(Options{Logger: log}, st)
	q := newQuery("bench.example.", dns.TypeA)
	q.SetEdns0(1232, false)
	wire, _ := q.Pack()
	client := netip.MustParseAddr("127.0.0.1")
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if s.handle(ctx, wire, client, query.UDP) == nil {
				b.Fatal("no answer")
			}
		}
	})
}

// BenchmarkUDP is one query and its answer over loopback UDP per op: the
// handler plus the listener (read, admission, goroutine, write) and the
// client's own send and receive. Allocations count both sides.
func BenchmarkUDP(b *testing.B) {
	s := New(Options{}, state(instant()))
	if err := s.Listen([]string{"127.0.0.1:0"}); err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	addr := udpAddr(s)
	q := newQuery("bench.example.", dns.TypeA)
	q.SetEdns0(1232, false)
	wire, _ := q.Pack()
	b.ReportAllocs()
	// A handful of clients at once, each waiting for its answer: a burst,
	// kept under the in-flight cap so nothing is dropped.
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("udp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 1232)
		for pb.Next() {
			if _, err := c.Write(wire); err != nil {
				b.Error(err)
				return
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCacheHit compares a cache hit's cost through the handler (the
// general path: parse, chain, relay, pack) with the fast path a UDP reader
// takes (fastpath.go: read the wire, ask the stages, write the template),
// event recorded in both. No sockets.
func BenchmarkCacheHit(b *testing.B) { benchCacheHit(b, nil) }

// BenchmarkCacheHitDevices is BenchmarkCacheHit with devices named
// (docs/devices.md): the client among 1 000 devices of the neighbour table,
// each with a [[clients]] name by MAC.
func BenchmarkCacheHitDevices(b *testing.B) {
	table, byMAC := map[netip.Addr]devices.MAC{}, map[devices.MAC]string{}
	for i := range 1000 {
		a := netip.AddrFrom4([4]byte{127, 0, byte(i >> 8), byte(1 + i%250)})
		m := devices.MAC{2, 0, 0x5e, 0, byte(i >> 8), byte(i)}
		table[a], byMAC[m] = m, fmt.Sprintf("device-%d", i)
	}
	reg := devices.NewRegistry(nil)
	reg.SetNeighbours(devices.FixedNeighbours(table))
	benchCacheHit(b, devices.NewView(reg, devices.ViewOptions{Static: devices.Static{ByMAC: byMAC}}))
}

func benchCacheHit(b *testing.B, id Identifier) {
	c := cache.New(cache.Options{Size: 100, MaxTTL: time.Hour})
	st := c.Stage()
	defer func() { st.Close(); c.Close() }()
	s := New(Options{}, &State{Router: pool(instant()), Allow: loopback, Stages: []query.Stage{st}, Devices: id})
	q := newQuery("bench.example.", dns.TypeA)
	q.SetEdns0(1232, false)
	wire, _ := q.Pack()
	client := netip.MustParseAddr("127.0.0.1")
	ctx := context.Background()
	for range 2 { // a miss, then a hit that leaves the template
		s.handle(ctx, wire, client, query.UDP)
	}
	b.Run("general", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s.handle(ctx, wire, client, query.UDP) == nil {
				b.Fatal("no answer")
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		var name [wireform.MaxName]byte
		dst := make([]byte, 0, maxUDPAnswer)
		var scratch query.Event
		b.ReportAllocs()
		for b.Loop() {
			out, g, ev, ok := s.answerFast(wire, &name, client, dst, &scratch)
			if !ok || len(out) == 0 {
				b.Fatal("not answered by the fast path")
			}
			s.finishFast(g, ev, true)
		}
	})
}
