package upstream

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every transport
// connection, reader, writer and dial ends with Close.
//
// Integrator: the pool branch has the same TestMain in pool_main_test.go.
// One TestMain per package: when merging, delete this file.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
