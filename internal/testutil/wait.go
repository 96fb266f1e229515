package testutil

import (
	"testing"
	"time"
)

// waitPoll is how often WaitFor looks: often enough that a wait costs the
// test little, rarely enough that the polling costs the machine little.
const waitPoll = 5 * time.Millisecond

// WaitFor polls cond until it holds, failing the test (naming what it waited
// for) once bound has passed. It is for state that another goroutine or
// process publishes (a counter, a log line, a file), never a stand-in for
// an ordering the test can observe directly. cond runs on the test's
// goroutine, so it may call t.Fatal.
func WaitFor(t testing.TB, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
		time.Sleep(waitPoll)
	}
}
