package testutil

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/nxdns/nxdns/internal/certs"
)

// DoH3Server is a loopback DNS-over-HTTPS server over HTTP/3 (quic-go's
// http3.Server): POST of application/dns-message on any path, answered by h.
// The hostile variants live beside the h3:// client's own tests
// (internal/upstream/doh3_test.go).
type DoH3Server struct {
	Addr     netip.AddrPort // 127.0.0.1:port, UDP
	Name     string         // the name on its certificate
	requests atomic.Int64
}

// Requests is the number of DoH requests received.
func (s *DoH3Server) Requests() int { return int(s.requests.Load()) }

// StartDoH3 starts a DoH3 server on 127.0.0.1 whose certificate, issued by
// ca, carries name; h answers. t.Cleanup stops it.
func StartDoH3(t testing.TB, ca *certs.CA, name string, h Handler) *DoH3Server {
	t.Helper()
	cert, err := ca.Issue(name)
	if err != nil {
		t.Fatal(err)
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s := &DoH3Server{Addr: udp.LocalAddr().(*net.UDPAddr).AddrPort(), Name: name}
	srv := &http3.Server{
		TLSConfig:  http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
		QUICConfig: &quic.Config{MaxIdleTimeout: 10 * time.Second},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.requests.Add(1)
			body, _ := io.ReadAll(io.LimitReader(r.Body, dns.MaxMsgSize))
			q := new(dns.Msg)
			if r.Method != http.MethodPost || q.Unpack(body) != nil {
				http.Error(w, "want a POST of application/dns-message", http.StatusBadRequest)
				return
			}
			resp := h(r.Context(), q)
			if resp == nil {
				<-r.Context().Done()
				return
			}
			wire, err := resp.Pack()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/dns-message")
			w.Write(wire)
		}),
	}
	var wg sync.WaitGroup
	wg.Go(func() { srv.Serve(udp) })
	t.Cleanup(func() {
		srv.Close()
		udp.Close()
		wg.Wait()
	})
	return s
}
