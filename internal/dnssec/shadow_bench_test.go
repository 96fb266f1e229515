package dnssec

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
)

// BenchmarkShadowMiss is what shadow mode adds to a miss against an
// upstream that ignores DNSSEC (workperquery.sh's fake upstream: NODATA
// without a proof for every DS and DNSKEY lookup, the root's included, so
// every answer is bogus under the built-in root anchors): a Guard in shadow
// mode over an exchange that answers at once, one new name per op, until
// every verdict is counted. It reports the process's CPU time per op
// (cpu-µs/op: the validation's, on whichever goroutine it ran) and the DS
// and DNSKEY lookups per op (docs/performance.md "DNSSEC validation").
func BenchmarkShadowMiss(b *testing.B) {
	var fetches atomic.Int64
	v, err := New(Config{Fetch: func(_ context.Context, name string, qtype uint16) (*dns.Msg, error) {
		fetches.Add(1)
		return msg(name, qtype, dns.RcodeSuccess, nil, nil), nil
	}})
	if err != nil {
		b.Fatal(err)
	}
	st := &Stats{}
	g := NewGuard(v, Shadow, func() bool { return true }, zap.NewNop(), st, 5*time.Second)
	r := g.Wrap(exchangerFunc(func(q *dns.Msg) *dns.Msg {
		name := q.Question[0].Name
		return msg(name, dns.TypeA, 0, []dns.RR{rr(name + " 300 IN A 192.0.2.1")}, nil)
	}))
	counted := func() uint64 { s := st.Snapshot(); return s.Secure + s.Insecure + s.Bogus + s.Indeterminate }
	n := 0
	asked := uint64(0)
	// settle waits for every verdict (in shadow they follow the answers);
	// called every 100 ops, below the shadow queue's bound, so that
	// nothing is skipped and the polling costs little.
	settle := func() {
		for counted() < asked {
			time.Sleep(time.Millisecond)
		}
	}
	ask := func() {
		n++
		asked++
		if _, err := r.Exchange(context.Background(), query(fmt.Sprintf("m%d.miss.example.", n), false, false)); err != nil {
			b.Fatal(err)
		}
		if n%100 == 0 {
			settle()
		}
	}
	ask() // the root's keys looked up once
	settle()
	fetches.Store(0)
	var r0, r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	b.ReportAllocs()
	for b.Loop() {
		ask()
	}
	settle()
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(fetches.Load())/float64(b.N), "lookups/op")
}
