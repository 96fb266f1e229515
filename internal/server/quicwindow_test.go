package server

import (
	"context"
	"crypto/tls"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// A client that tries to send a 1 GB stream to a QUIC front gets no
// further than the receive window the front grants while nothing reads it:
// dohStreamBuffer on one stream, dohConnBuffer across the connection's
// streams (doqQUICConfig, which doh3QUICConfig copies). quic-go's defaults
// would take 512 KiB per stream at once. The server here accepts and never
// reads, the worst case of a serve goroutine that is slow to run.
func TestQUICFront_aGigabyteStreamIsBoundedByTheReceiveWindow(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf *quic.Config
		alpn string
	}{{"DoQ", doqQUICConfig, "doq"}, {"DoH3", doh3QUICConfig, "h3"}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPKI(t)
			srvConf := &tls.Config{
				GetCertificate: p.store.GetCertificate,
				NextProtos:     []string{tc.alpn},
			}
			ln, err := quic.ListenAddr("127.0.0.1:0", srvConf, tc.conf.Clone())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			go func() { // accept and hold every stream, reading nothing
				c, err := ln.Accept(ctx)
				if err != nil {
					return
				}
				for {
					if _, err := c.AcceptStream(ctx); err != nil {
						return
					}
				}
			}()
			c, err := quic.DialAddr(ctx, ln.Addr().String(), &tls.Config{
				RootCAs: p.ca.Pool(), ServerName: testServerName, NextProtos: []string{tc.alpn},
			}, &quic.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.CloseWithError(0, "") })

			// One stream: 1 GB offered in 64 KiB writes, until the
			// window stops it (the write deadline).
			one := quicPush(t, c, 1)
			rest := quicPush(t, c, maxConnQueries-1)
			t.Logf("unread: %d bytes on one stream, %d on %d more", one, rest, maxConnQueries-1)
			if got := one; got > dohStreamBuffer {
				t.Errorf("one stream took %d bytes unread, want ≤ %d (dohStreamBuffer)", got, dohStreamBuffer)
			}
			// The rest of the streams: the connection's window is the cap.
			if got := one + rest; got > dohConnBuffer {
				t.Errorf("%d streams took %d bytes unread, want ≤ %d (dohConnBuffer)", maxConnQueries, got, dohConnBuffer)
			}
		})
	}
}

// quicPush opens n streams on c and writes up to 1 GB to each, all at once,
// until a write stalls for 300 ms; it returns the bytes the peer's flow
// control let through, summed.
func quicPush(t *testing.T, c *quic.Conn, n int) int {
	t.Helper()
	var total atomic.Int64
	var wg sync.WaitGroup
	for range n {
		st, err := c.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			chunk := make([]byte, 64<<10)
			for sent := 0; sent < 1<<30; {
				st.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
				k, err := st.Write(chunk)
				sent += k
				total.Add(int64(k))
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return int(total.Load())
}
