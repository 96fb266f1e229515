package dnssec

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/workers"
)

// Shadow mode validates after the answer (docs/dnssec.md "Shadow: the
// verdict after the answer"): its verdict changes no answer, so the client
// does not wait for the DS and DNSKEY fetches and signature checks it
// needs. The work is bounded: at most shadowWorkers validations run at
// once, at most shadowQueueMax wait, and an answer that finds the queue
// full is not validated, only counted (Snapshot.Skipped). A queue's
// workers run while it has jobs; they run on kept goroutines
// (internal/workers), which keep the stacks they grew for the next miss
// rather than grow a new one each time, and exit after workers.Idle
// without work, so an idle nxdns holds no goroutine for this.
const (
	shadowWorkers  = 4
	shadowQueueMax = 256
)

var shadowRunners = workers.New()

// shadowJob is one answer to validate: resp, the upstream's message, which
// nobody modifies (the server and the cache copy what they change), for
// the question's name. ctx carries the query's values (its client's share
// of the pool) without its deadline, which the answer has already met.
type shadowJob struct {
	g    *Guard
	ctx  context.Context
	name string
	resp *dns.Msg
}

// shadowQueue is the bounded queue and its workers. The zero value is
// ready.
type shadowQueue struct {
	mu      sync.Mutex
	jobs    []shadowJob // FIFO; jobs[head:] wait
	head    int
	running int // workers
	busy    int // jobs taken and not yet done
	skipped atomic.Uint64
}

// submit queues j, starting a worker when fewer than shadowWorkers run;
// false, counted, when shadowQueueMax jobs already wait.
func (s *shadowQueue) submit(j shadowJob) bool {
	s.mu.Lock()
	if len(s.jobs)-s.head >= shadowQueueMax {
		s.mu.Unlock()
		s.skipped.Add(1)
		return false
	}
	if s.head >= shadowQueueMax {
		// Move the waiting jobs to the front: the slice stays within twice
		// the queue's bound however long the queue never empties.
		n := copy(s.jobs, s.jobs[s.head:])
		clear(s.jobs[n:])
		s.jobs, s.head = s.jobs[:n], 0
	}
	s.jobs = append(s.jobs, j)
	start := s.running < shadowWorkers
	if start {
		s.running++
	}
	s.mu.Unlock()
	if start {
		shadowRunners.Run(s.work)
	}
	return true
}

// pending is the number of jobs waiting or running.
func (s *shadowQueue) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs) - s.head + s.busy
}

// work runs queued jobs until none is left.
func (s *shadowQueue) work() {
	s.mu.Lock()
	for s.head < len(s.jobs) {
		j := s.jobs[s.head]
		s.jobs[s.head] = shadowJob{} // the message is not kept past its job
		s.head++
		s.busy++
		s.mu.Unlock()
		j.run(&s.skipped)
		s.mu.Lock()
		s.busy--
	}
	s.running--
	s.mu.Unlock()
}

// run validates the answer within the Guard's budget, as a query would,
// and records the verdict where enforce's goes: the counters, the latency
// histogram, the bogus list and its log line. A retired Guard's job is
// skipped: its lookups would go to upstreams being closed, and a failed
// lookup would read as a bogus zone.
func (j shadowJob) run(skipped *atomic.Uint64) {
	if !j.g.beginJob() {
		skipped.Add(1)
		return
	}
	defer j.g.endJob()
	ctx := j.ctx
	if j.g.budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, j.g.budget)
		defer cancel()
	}
	start := time.Now()
	j.g.record(start, j.name, j.g.v.Validate(ctx, j.resp))
}

func (g *Guard) beginJob() bool {
	g.jobsMu.Lock()
	defer g.jobsMu.Unlock()
	if g.retired {
		return false
	}
	g.jobs++
	return true
}

func (g *Guard) endJob() {
	g.jobsMu.Lock()
	defer g.jobsMu.Unlock()
	g.jobs--
	if g.jobs == 0 && g.jobsIdle != nil {
		close(g.jobsIdle)
		g.jobsIdle = nil
	}
}

// Retire is called when g's configuration is replaced, after its queries
// have ended and before its upstreams close: shadow validations of its
// answers that have not started are skipped (counted in Snapshot.Skipped),
// and Retire waits for the running ones until ctx ends.
func (g *Guard) Retire(ctx context.Context) {
	g.jobsMu.Lock()
	g.retired = true
	if g.jobs == 0 {
		g.jobsMu.Unlock()
		return
	}
	if g.jobsIdle == nil {
		g.jobsIdle = make(chan struct{})
	}
	idle := g.jobsIdle
	g.jobsMu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}
