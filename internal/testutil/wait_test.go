package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fatalTB records Fatalf and ends its goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestWaitFor_returnsOnceTheConditionHolds(t *testing.T) {
	var set atomic.Bool
	time.AfterFunc(20*time.Millisecond, func() { set.Store(true) })
	WaitFor(t, "the flag", 5*time.Second, set.Load)
	if !set.Load() {
		t.Fatal("WaitFor returned before the condition held")
	}
}

func TestWaitFor_failsAfterTheBoundNamingWhat(t *testing.T) {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		WaitFor(f, "a flag nobody sets", 30*time.Millisecond, func() bool { return false })
	}()
	<-done
	took := time.Since(start)
	if !strings.Contains(f.msg, "a flag nobody sets") || !strings.Contains(f.msg, "30ms") {
		t.Errorf("failure message %q: want what it waited for and the bound", f.msg)
	}
	if took < 30*time.Millisecond || took > 2*time.Second {
		t.Errorf("failed after %v, want just past the 30 ms bound", took)
	}
}
