package workers

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/testutil"
)

// TestWorkers_neverQueue: jobs that all block at once each get a goroutine
// of their own (none waits behind another), and an idle worker takes the
// next job instead of a new goroutine.
func TestWorkers_neverQueue(t *testing.T) {
	w := New()
	defer func() { w.Stop(); w.Wait() }()
	const n = 50
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		w.Run(func() { started.Done(); <-release })
	}
	started.Wait() // every job runs while all the others block: none queued
	close(release)

	// Once a worker is idle, the next job runs on it: no new goroutine.
	var ran atomic.Int32
	testutil.WaitFor(t, "an idle worker", 10*time.Second, func() bool {
		select {
		case w.jobs <- func() { ran.Add(1) }:
			return true
		default:
			return false
		}
	})
	testutil.WaitFor(t, "the job on the idle worker", 10*time.Second, func() bool { return ran.Load() == 1 })
}

// TestWorkers_idleExitAndStop: workers exit after the idle bound, and stop
// ends the idle ones at once; a job run after stop still runs.
func TestWorkers_idleExitAndStop(t *testing.T) {
	w := New()
	w.idle = 20 * time.Millisecond
	done := make(chan struct{})
	w.Run(func() { close(done) })
	<-done
	idleDone := make(chan struct{})
	go func() { w.Wait(); close(idleDone) }()
	select {
	case <-idleDone: // the worker left on its own
	case <-time.After(10 * time.Second):
		t.Fatal("an idle worker did not exit after the idle bound")
	}

	w = New() // the default, long idle bound: only stop ends it
	w.Run(func() {})
	w.Stop()
	late := make(chan struct{})
	w.Run(func() { close(late) })
	<-late
	stopped := make(chan struct{})
	go func() { w.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not end the idle workers")
	}
}
