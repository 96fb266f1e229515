package forward

import (
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
)

// benchZone is zone "lan." in front of an instant loopback resolver.
func benchZone(b *testing.B) *Zone {
	addr := startUDPServer(b, func(w dns.ResponseWriter, q *dns.Msg) {
		w.WriteMsg(answerA(q, "192.0.2.1"))
	})
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
	q := query("host.lan.")
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
		q := query("host.lan.")
		for pb.Next() {
			if _, _, err := z.Resolve(b.Context(), q); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
