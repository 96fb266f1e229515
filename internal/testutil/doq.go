package testutil

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/nxdns/nxdns/internal/certs"
)

// DoQServer is a loopback DNS-over-QUIC server (RFC 9250): ALPN "doq", one
// query per stream with a 2-octet length prefix. It answers through h and
// counts the queries it read; the hostile variants live beside the DoQ
// client's own tests (internal/upstream/doq_test.go).
type DoQServer struct {
	Addr    netip.AddrPort // 127.0.0.1:port, UDP
	Name    string         // the name on its certificate
	queries atomic.Int64
}

// Queries is the number of queries read.
func (s *DoQServer) Queries() int { return int(s.queries.Load()) }

// StartDoQ starts a DoQ server on 127.0.0.1 whose certificate, issued by ca,
// carries name; h answers. t.Cleanup stops it and waits for its goroutines.
func StartDoQ(t testing.TB, ca *certs.CA, name string, h Handler) *DoQServer {
	t.Helper()
	cert, err := ca.Issue(name)
	if err != nil {
		t.Fatal(err)
	}
	// A Transport of its own, closed at cleanup: the one quic.ListenAddr
	// makes outlives a failed handshake by a second or so, and goleak
	// would see it.
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: udp}
	ln, err := tr.Listen(&tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"doq"}, // RFC 9250 §4.1.1
	}, &quic.Config{MaxIdleTimeout: 10 * time.Second})
	if err != nil {
		tr.Close()
		udp.Close()
		t.Fatal(err)
	}
	s := &DoQServer{Addr: ln.Addr().(*net.UDPAddr).AddrPort(), Name: name}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.CloseWithError(0, "") // DOQ_NO_ERROR
				for {
					st, err := c.AcceptStream(ctx)
					if err != nil {
						return
					}
					wg.Go(func() { s.answer(ctx, st, h) })
				}
			})
		}
	})
	t.Cleanup(func() {
		cancel()
		ln.Close()
		wg.Wait()
		tr.Close()
		udp.Close()
	})
	return s
}

// answer reads one length-prefixed query from st and writes h's answer with
// message ID 0, as RFC 9250 §4.2.1 asks.
func (s *DoQServer) answer(ctx context.Context, st *quic.Stream, h Handler) {
	defer st.Close()
	st.SetDeadline(time.Now().Add(5 * time.Second))
	var n [2]byte
	if _, err := io.ReadFull(st, n[:]); err != nil {
		return
	}
	wire := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(st, wire); err != nil {
		return
	}
	q := new(dns.Msg)
	if q.Unpack(wire) != nil {
		return
	}
	s.queries.Add(1)
	r := h(ctx, q)
	if r == nil {
		return
	}
	r.Id = 0
	out, err := r.Pack()
	if err != nil {
		return
	}
	st.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(out))), out...))
}
