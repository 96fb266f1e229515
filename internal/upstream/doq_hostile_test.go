package upstream

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/testutil"
)

// Hostile packets at a quic:// upstream's connection (issue 37's bad input):
// forged stateless resets, and version negotiation from a server that
// speaks no version of ours.

// A flood of datagrams shaped like stateless resets (RFC 9000 §10.3: a
// short header and 16 random trailing bytes as the token), sent to the
// client's socket from another address, cannot end the connection: a reset
// counts only with the token the server gave for that connection. The next
// query goes out on the same connection.
func TestDoQ_forgedStatelessResetsLeaveTheConnectionUp(t *testing.T) {
	srv, c := doqTestSetup(t)
	transportMustExchange(t, c, "a.example.")
	srv.mu.Lock()
	client := srv.conns[0].RemoteAddr().(*net.UDPAddr)
	srv.mu.Unlock()

	attacker, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	const forged = 2000
	pkt := make([]byte, 43) // RFC 9000 §10.3: at least 21 bytes; quic-go's own are 43 or so
	for range forged {
		rand.Read(pkt)
		pkt[0] = 0x40 | pkt[0]&0x3f // short header, fixed bit set
		if _, err := attacker.WriteToUDP(pkt, client); err != nil {
			t.Fatal(err)
		}
	}
	// The flood is ahead of the next answer on loopback, so a reset that
	// counted would have ended the connection before this query's answer
	// is read.
	transportMustExchange(t, c, "b.example.")
	if !doqTestUp(c) {
		t.Error("the connection ended after the forged resets")
	}
	if srv.accepts.Load() != 1 {
		t.Errorf("accepts %d, want 1: no redial", srv.accepts.Load())
	}
	if d := c.Dials(); d.New != 1 || d.Failed != 0 {
		t.Errorf("dials %+v, want the one new", d)
	}
}

// A server that answers every Initial with a Version Negotiation packet
// listing only versions nxdns does not speak (RFC 9000 §6) fails the dial at
// once — no handshake is possible — as the upstream's network fault, long
// before the attempt's deadline, so the pool moves on.
func TestDoQ_versionNegotiationWithoutACommonVersionIsANetworkFault(t *testing.T) {
	addr, answered := doqTestVersionNegotiator(t, 0x1a2a3a4a, 0x0a0a0a0a)
	ep := transportEndpoint(t, fmt.Sprintf("quic://doq.test:%d", addr.Port()), addr)
	c := NewDoQ(ep, testutil.NewCA(t).Pool(), nil)
	t.Cleanup(func() { c.Close() })

	start := time.Now()
	_, err := c.Exchange(transportCtx(t), transportQuery("a.example."))
	el := time.Since(start)
	transportWantKind(t, err, KindNetwork, ep.Redacted())
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "version") {
		t.Errorf("error %v, want it to say no version was in common", err)
	}
	if answered() == 0 {
		t.Fatal("the negotiator answered nothing: the test did not run")
	}
	if el > 5*time.Second {
		t.Errorf("exchange took %v, want it to fail at the negotiation, not at a timeout", el)
	}
	if d := c.Dials(); d.Failed != 1 {
		t.Errorf("dials %+v, want one failed", d)
	}
}

// doqTestVersionNegotiator answers every long-header packet with a Version
// Negotiation packet (RFC 9000 §17.2.1) listing versions, and reports how
// many it sent.
func doqTestVersionNegotiator(t *testing.T, versions ...uint32) (netip.AddrPort, func() int) {
	t.Helper()
	sock, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		sent int
	)
	wg.Go(func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := sock.ReadFromUDP(buf)
			if err != nil {
				return
			}
			vn, ok := versionNegotiation(buf[:n], versions)
			if !ok {
				continue
			}
			if _, err := sock.WriteToUDP(vn, from); err == nil {
				mu.Lock()
				sent++
				mu.Unlock()
			}
		}
	})
	t.Cleanup(func() { sock.Close(); wg.Wait() })
	return sock.LocalAddr().(*net.UDPAddr).AddrPort(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return sent
	}
}

// versionNegotiation builds the Version Negotiation packet answering a
// long-header packet (RFC 9000 §17.2.1): version 0, the connection IDs
// swapped, then the versions offered.
func versionNegotiation(pkt []byte, versions []uint32) ([]byte, bool) {
	if len(pkt) < 7 || pkt[0]&0x80 == 0 {
		return nil, false
	}
	dcidLen := int(pkt[5])
	if len(pkt) < 6+dcidLen+1 {
		return nil, false
	}
	dcid := pkt[6 : 6+dcidLen]
	scidLen := int(pkt[6+dcidLen])
	if len(pkt) < 7+dcidLen+scidLen {
		return nil, false
	}
	scid := pkt[7+dcidLen : 7+dcidLen+scidLen]
	out := []byte{0x80 | 0x40, 0, 0, 0, 0, byte(len(scid))}
	out = append(out, scid...)
	out = append(out, byte(len(dcid)))
	out = append(out, dcid...)
	for _, v := range versions {
		out = binary.BigEndian.AppendUint32(out, v)
	}
	return out, true
}
