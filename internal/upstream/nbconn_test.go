package upstream

import (
	"bytes"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/testutil"
)

// nbPair is an nbConn dialed to a loopback listener and the accepted end.
func nbPair(t *testing.T, fail func(error)) (*nbConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	raw, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	// A small send buffer, so a megabyte is far more than the socket holds
	// (the receiver's buffer grows only as its reader reads).
	raw.SetWriteBuffer(4096)
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	c, err := newNBConn(raw, fail)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c.(*nbConn), peer
}

// TestNBConn_writeNeverBlocksOnAStalledPeer: with the peer not reading,
// writes far beyond what the socket buffers hold all return at once (the
// rest queued), and once the peer reads, every byte arrives in order.
func TestNBConn_writeNeverBlocksOnAStalledPeer(t *testing.T) {
	c, peer := nbPair(t, func(err error) { t.Errorf("fail called: %v", err) })
	const chunks, size = 64, 16 << 10 // 1 MiB: far more than the buffers hold
	var want bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range chunks {
			p := bytes.Repeat([]byte{byte(i)}, size)
			want.Write(p)
			if n, err := c.Write(p); n != len(p) || err != nil {
				t.Errorf("write %d: %d, %v", i, n, err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a write blocked on a peer that does not read")
	}
	got := make([]byte, chunks*size)
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("bytes arrived out of order or changed")
	}
	testutil.WaitFor(t, "the flusher to finish", 10*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.flushing
	})
	if _, err := c.Write([]byte("direct")); err != nil { // the direct path again
		t.Fatal(err)
	}
}

// TestNBConn_queuedWriteFailureEndsTheConnection: when the queued bytes
// cannot be written (the peer reset the connection), fail hears the error
// once, and every later write returns it.
func TestNBConn_queuedWriteFailureEndsTheConnection(t *testing.T) {
	var failed atomic.Int32
	c, peer := nbPair(t, func(error) { failed.Add(1) })
	p := make([]byte, 16<<10)
	for { // fill the socket buffers until a write is queued
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		queued := c.flushing
		c.mu.Unlock()
		if queued {
			break
		}
	}
	peer.SetLinger(0)
	peer.Close() // a reset: the queued bytes have nowhere to go
	testutil.WaitFor(t, "fail to be called", 10*time.Second, func() bool { return failed.Load() == 1 })
	if _, err := c.Write(p); err == nil {
		t.Fatal("a write after the failure succeeded")
	}
	if n := failed.Load(); n != 1 {
		t.Fatalf("fail called %d times", n)
	}
}
