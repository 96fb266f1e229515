package upstream

import (
	"testing"

	"go.uber.org/goleak"
)

// The pool starts prober goroutines and the transports start readers: every
// test must leave none behind. (One TestMain per package: whoever merges the
// transport tests keeps this one.)
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
