package server

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkers_neverQueue: jobs that all block at once each get a goroutine
// of their own (none waits behind another), and an idle worker takes the
// next job instead of a new goroutine.
func TestWorkers_neverQueue(t *testing.T) {
	w := newWorkers()
	defer func() { w.stop(); w.wait() }()
	const n = 50
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		w.run(func() { started.Done(); <-release })
	}
	started.Wait() // every job runs while all the others block: none queued
	close(release)

	// Once a worker is idle, the next job runs on it: no new goroutine.
	var ran atomic.Int32
	waitFor(t, "an idle worker", func() bool {
		select {
		case w.jobs <- func() { ran.Add(1) }:
			return true
		default:
			return false
		}
	})
	waitFor(t, "the job on the idle worker", func() bool { return ran.Load() == 1 })
}

// TestWorkers_idleExitAndStop: workers exit after the idle bound, and stop
// ends the idle ones at once; a job run after stop still runs.
func TestWorkers_idleExitAndStop(t *testing.T) {
	w := newWorkers()
	w.idle = 20 * time.Millisecond
	done := make(chan struct{})
	w.run(func() { close(done) })
	<-done
	idleDone := make(chan struct{})
	go func() { w.wait(); close(idleDone) }()
	select {
	case <-idleDone: // the worker left on its own
	case <-time.After(10 * time.Second):
		t.Fatal("an idle worker did not exit after the idle bound")
	}

	w = newWorkers() // the default, long idle bound: only stop ends it
	w.run(func() {})
	w.stop()
	late := make(chan struct{})
	w.run(func() { close(late) })
	<-late
	stopped := make(chan struct{})
	go func() { w.wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not end the idle workers")
	}
}
