package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestStaleRetry(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	pipe := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	cases := []struct {
		name            string
		reused, started bool
		cause           error
		want            bool
	}{
		{"EOF on a reused connection before any byte", true, false, io.EOF, true},
		{"close_notify or clean close wrapped", true, false, fmt.Errorf("read: %w", io.EOF), true},
		{"TLS truncation on a reused connection", true, false, io.ErrUnexpectedEOF, true},
		{"reset on a reused connection", true, false, reset, true},
		{"broken pipe on a reused connection", true, false, pipe, true},
		{"fresh connection is never retried", false, false, io.EOF, false},
		{"a byte of the response had arrived", true, true, io.ErrUnexpectedEOF, false},
		{"reset after the response started", true, true, reset, false},
		{"the transport's own timeout is evidence", true, false, timeout, false},
		{"a certificate failure is evidence", true, false, &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false},
		{"a bad response is evidence", true, false, &AttemptError{Kind: KindBadResponse, Err: errors.New("x")}, false},
		{"a mismatched response is evidence", true, false, &AttemptError{Kind: KindResponseMismatch, Err: errors.New("x")}, false},
		{"our own close is not the peer's", true, false, net.ErrClosed, false},
		{"client closed is not stale", true, false, errClientClosed, false},
		{"no error", true, false, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := staleRetry(tc.reused, tc.started, tc.cause); got != tc.want {
				t.Errorf("staleRetry(reused=%v, started=%v, %v) = %v, want %v", tc.reused, tc.started, tc.cause, got, tc.want)
			}
		})
	}
}
