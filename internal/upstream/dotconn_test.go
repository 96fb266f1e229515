package upstream

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/nxdns/nxdns/internal/testutil"
)

// Callers may all use the same message ID (the handler copies client IDs):
// on the wire each pending query gets its own ID, every caller gets the
// answer to its own question, with its own ID back.
func TestDoTConn_wireIDsAreUniqueWhilePending(t *testing.T) {
	const n = dotDialAhead - 1 // all on one connection (no dial ahead): IDs are unique per connection
	var mu sync.Mutex
	seen := make(map[uint16]string)
	arrived := make(chan struct{}, n)
	release := make(chan struct{})
	answer := testutil.AnswerA("192.0.2.1")
	srv, c, _ := dotTestSetup(t, "dot.test", func(ctx context.Context, q *dns.Msg) *dns.Msg {
		mu.Lock()
		if prev, dup := seen[q.Id]; dup {
			t.Errorf("wire id %d used by %s and %s at once", q.Id, prev, q.Question[0].Name)
		}
		seen[q.Id] = q.Question[0].Name
		mu.Unlock()
		arrived <- struct{}{}
		select { // hold every answer until all queries are pending together
		case <-release:
		case <-ctx.Done():
			return nil
		}
		return answer(ctx, q)
	})
	ctx := transportCtx(t)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			q := transportQuery(fmt.Sprintf("id%d.example.", i))
			q.Id = 7
			r, err := c.Exchange(ctx, q)
			switch {
			case err != nil:
			case r.Id != 7:
				err = fmt.Errorf("%s: id %d, want the caller's 7", q.Question[0].Name, r.Id)
			case r.Answer[0].Header().Name != q.Question[0].Name:
				err = fmt.Errorf("%s: answer for %s", q.Question[0].Name, r.Answer[0].Header().Name)
			}
			errs <- err
		})
	}
	for range n {
		<-arrived
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if len(seen) != n || srv.Accepts() != 1 {
		t.Errorf("%d distinct wire ids over %d connections; want %d over 1", len(seen), srv.Accepts(), n)
	}
}
