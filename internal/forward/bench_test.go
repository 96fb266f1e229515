package forward

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
)

// benchZone is zone "lan." in front of an instant loopback resolver that
// allocates nothing, so the numbers are the client's own: it echoes each
// query with QR set, a valid empty NOERROR answer to the same question.
func benchZone(b *testing.B) *Zone {
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, dns.MaxMsgSize)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return // closed by cleanup
			}
			if n >= headerLen {
				buf[2] |= 0x80 // QR (RFC 1035 §4.1.1)
				conn.WriteToUDPAddrPort(buf[:n], from)
			}
		}
	})
	b.Cleanup(func() {
		conn.Close()
		wg.Wait()
	})
	addr := netip.MustParseAddrPort(conn.LocalAddr().String())
	z, err := newZone(config.ForwardZone{Zone: "lan", Resolver: "udp://" + addr.String()}, 2*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	return z
}

// BenchmarkResolveUDP is one UDP forward exchange against an instant
// loopback resolver: socket, send, receive, decode, validate.
func BenchmarkResolveUDP(b *testing.B) {
	z := benchZone(b)
	q := queryA("host.lan.")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := z.Resolve(b.Context(), q); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolveUDPParallel is the same exchange from many goroutines, as
// a burst of LAN names arrives.
func BenchmarkResolveUDPParallel(b *testing.B) {
	z := benchZone(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		q := queryA("host.lan.")
		for pb.Next() {
			if _, _, err := z.Resolve(b.Context(), q); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
