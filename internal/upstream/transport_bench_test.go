package upstream

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/nxdns/nxdns/internal/testutil"
)

// The benchmarks measure one exchange against a loopback server, whose own
// work (TLS, HTTP/2, packing the answer) is included in ns/op: compare the
// transports with each other and across changes, not with a remote upstream.

func BenchmarkDoT(b *testing.B) {
	ca := testutil.NewCA(b)
	srv := testutil.StartDoT(b, ca, "dot.test", testutil.AnswerA("192.0.2.1"))
	c := NewDoT(transportEndpoint(b, fmt.Sprintf("tls://dot.test:%d", srv.Addr.Port()), srv.Addr), ca.Pool(), nil)
	defer c.Close()
	transportBench(b, c)
}

func BenchmarkDoH(b *testing.B) {
	ca := testutil.NewCA(b)
	srv := testutil.StartDoH(b, ca, "doh.test", testutil.AnswerA("192.0.2.2"))
	c := NewDoH(transportEndpoint(b, srv.URL("/dns-query"), srv.Addr), ca.Pool(), nil)
	defer c.Close()
	transportBench(b, c)
}

// transportBench runs sequential exchanges, then 30 concurrent callers (the
// burst of docs/design.md#burst-staircase) sharing the client's connections.
func transportBench(b *testing.B, c Client) {
	ctx := context.Background()
	b.Run("sequential", func(b *testing.B) {
		b.ReportAllocs()
		q := transportQuery("bench.example.")
		for b.Loop() {
			if _, err := c.Exchange(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("concurrent30", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism((30 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			q := transportQuery("bench.example.")
			for pb.Next() {
				if _, err := c.Exchange(ctx, q); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkPackPadded is a query packed and padded for an encrypted
// upstream, as nxdns's own queries are: with an OPT record.
func BenchmarkPackPadded(b *testing.B) {
	q := transportQuery("www.example.com.")
	q.SetEdns0(1232, true)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := packPadded(q); err != nil {
			b.Fatal(err)
		}
	}
}
