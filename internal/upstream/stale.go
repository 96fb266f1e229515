package upstream

import (
	"errors"
	"io"
	"syscall"
)

// staleRetry is the stale-connection rule of docs/design.md#stale-connection: an upstream may close
// an idle connection at any moment, and the query that happens to be sent on
// it then sees the close. Such a failure says nothing about the upstream's
// health, so the exchange is retried once on a fresh connection — if and only
// if all of these hold:
//
//   - reused: the connection existed before this exchange picked it. A fresh
//     connection that fails is a real failure: retrying would only double
//     the cost of a dead upstream.
//   - !responseStarted: no byte of this exchange's response had arrived. Once
//     the upstream began answering it was alive and serving; a truncated
//     answer is its fault.
//   - the cause is a connection-lifecycle error (isLifecycleError). A
//     timeout, a certificate failure or a bad response is evidence.
//
// It is a pure function so that the rule has one home and a table test.
func staleRetry(reused, responseStarted bool, cause error) bool {
	return reused && !responseStarted && isLifecycleError(cause)
}

// isLifecycleError reports whether err is how a peer's close of a connection
// shows up: EOF (a close, with or without TLS close_notify), an unexpected EOF
// (TLS truncated mid-record), a reset or a broken pipe. It matches errno
// values through the error chain (net.OpError → os.SyscallError → Errno), never
// error text.
func isLifecycleError(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ECONNABORTED):
		return true
	}
	return false
}
