package fakeup

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkUDP is the fake upstream's own ceiling over UDP: answers per second
// with no shaping, each parallel client on its own socket, one query in
// flight per client. A scenario that needs more than this measures the fake.
func BenchmarkUDP(b *testing.B) {
	s := start(b, Config{}, "udp://127.0.0.1:0")
	addr := s.addr(0)
	wire, _ := query("bench.example.", dns.TypeA).Pack()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("udp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 512)
		for pb.Next() {
			if _, err := c.Write(wire); err != nil {
				b.Error(err)
				return
			}
			c.SetReadDeadline(time.Now().Add(ioBound))
			if _, err := c.Read(buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "answers/s")
}

// BenchmarkDoTPipelined is the ceiling over one DoT connection, every
// parallel client pipelining its exchanges on it.
func BenchmarkDoTPipelined(b *testing.B) {
	s := start(b, Config{}, "dot://127.0.0.1:0")
	p := newPipeClient(s.dialTLS(b, 0))
	defer p.close()
	b.ReportAllocs()
	b.SetParallelism(8) // 8 × GOMAXPROCS exchanges in flight on the one connection
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.exchange(query("bench.example.", dns.TypeA)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "answers/s")
}
