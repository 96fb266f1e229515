package upstream

import (
	"context"
	"runtime"
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkPoolResolve is the pool's own cost per query: one exchange
// through admission, the attempt race and recording, against a client that
// answers at once with a prebuilt response (so the client allocates
// nothing).
func BenchmarkPoolResolve(b *testing.B) {
	q := poolTestQuery("bench.example.")
	resp := poolTestReply(q, dns.RcodeSuccess)
	instant := &fakeClient{onExchange: func(context.Context, *dns.Msg) (*dns.Msg, error) { return resp, nil }}
	p := poolTestNew(b, poolTestShipped, instant, &fakeClient{onExchange: poolTestAnswer})
	ctx := context.Background()

	b.Run("single", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := p.Resolve(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel8", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0))) // 8 goroutines in all
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, _, err := p.Resolve(ctx, q); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
