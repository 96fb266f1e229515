package server

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/tlscert"
)

// Hostile packets at the QUIC listeners (issue 37's bad input). DoQ's and
// DoH3's listeners are built by the same bindQUIC, so DoQ's stand for both.

// A client whose source address is spoofed never hears the server, so it
// cannot validate its address: before validation the server sends that
// address at most three times the bytes it received from it (RFC 9000
// §8.1). The relay here is the victim whose address the Initials carry: it
// passes the client's datagrams on and swallows the server's. The
// certificate is large enough that the server's first flight alone would
// pass the limit, so the limit is what holds it back. quic-go checks the
// limit before each datagram rather than sizing the datagram to it, so the
// last one may cross it by at most one datagram (docs/server.md "Retry
// under load"); that is the bound asserted.
func TestDoQ_spoofedInitialsGetAtMostThreeTimesTheirBytes(t *testing.T) {
	p := newTestPKI(t)
	leaf := bigLeaf(t, p)
	_, addr := startDoQServer(t, state(answerA("192.0.2.9")), p)

	victim, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	srvAddr := net.UDPAddrFromAddrPort(addr)
	// Counted by the relay alone: the server can only answer bytes the
	// relay has already passed on, so out ≤ 3 × in must hold at every
	// server datagram, not just at the end, when the client's
	// retransmissions have raised the allowance.
	var in, out, budgetAtFirst, worst int64 // worst: the largest out - 3×in seen
	worst = -1 << 62
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := victim.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if from.AddrPort() == addr {
				if out == 0 {
					budgetAtFirst = 3 * in
				}
				out += int64(n) // the reflection: swallowed
				worst = max(worst, out-3*in)
				continue
			}
			in += int64(n)
			victim.WriteToUDP(buf[:n], srvAddr)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	conf := p.clientConf.Clone()
	conf.NextProtos = []string{"doq"}
	if c, err := quic.DialAddr(ctx, victim.LocalAddr().String(), conf, &quic.Config{}); err == nil {
		c.CloseWithError(0, "")
		t.Error("a client that never hears the server completed a handshake")
	}
	cancel()
	victim.Close()
	wg.Wait() // in, out and the rest are the relay's until here

	if out == 0 {
		t.Fatal("the server sent nothing: the test did not reach it")
	}
	if budgetAtFirst >= int64(len(leaf.Raw)) {
		t.Fatalf("certificate %d bytes, allowance at the first answer %d: the flight would fit the limit, so the test shows nothing", len(leaf.Raw), budgetAtFirst)
	}
	t.Logf("to the server %d bytes, from it %d; certificate %d bytes, allowance at the first answer %d", in, out, len(leaf.Raw), budgetAtFirst)
	if worst > quicMaxDatagram {
		t.Errorf("the server sent the unvalidated address %d bytes more than 3x what it had received, over one datagram (RFC 9000 §8.1)", worst)
	}
	// And it still serves.
	doqMustAnswer(t, p, addr)
}

// A datagram of an unknown version gets a Version Negotiation packet no
// larger than itself, and only when it is at least 1200 bytes (RFC 9000
// §5.2.2, §6.1): a spoofed one reflects nothing larger than it sent. The
// small one is sent first; the first reply must answer the large one.
func TestDoQ_versionNegotiationIsNoLargerThanItsTrigger(t *testing.T) {
	p := newTestPKI(t)
	_, addr := startDoQServer(t, state(answerA("192.0.2.9")), p)
	sock := rawQUICSocket(t, addr)

	small := unknownVersionPacket([]byte("smalldcid"), 200)
	large := unknownVersionPacket([]byte("largedcid"), 1200)
	for _, pkt := range [][]byte{small, large} {
		if _, err := sock.Write(pkt); err != nil {
			t.Fatal(err)
		}
	}
	vn := readDatagram(t, sock)
	if len(vn) > len(large) {
		t.Errorf("version negotiation %d bytes for a %d-byte trigger", len(vn), len(large))
	}
	if len(vn) < 6 || binary.BigEndian.Uint32(vn[1:5]) != 0 {
		t.Fatalf("reply %x is no Version Negotiation packet", vn)
	}
	scid := vn[6+int(vn[5])+1:][:vn[6+int(vn[5])]]
	if string(scid) != "largedcid" {
		t.Errorf("the first reply answers %q, want the 1200-byte packet's (the 200-byte one gets nothing)", scid)
	}
	versions := vn[6+int(vn[5])+1+len(scid):]
	var v1 bool
	for i := 0; i+4 <= len(versions); i += 4 {
		v1 = v1 || binary.BigEndian.Uint32(versions[i:]) == 1
	}
	if !v1 {
		t.Errorf("versions %x offered, want QUIC v1 among them", versions)
	}
	doqMustAnswer(t, p, addr)
}

// A flood of short-header packets for connections the server never had
// (random connection IDs, as a stateless-reset flood or plain garbage
// looks) gets no answer at all — without a state directory, as here,
// nxdns's QUIC listeners send no stateless resets (with one they answer
// with resets smaller than the packets:
// TestQUIC_statelessResetsAreSmallerThanTheirTrigger) — and costs the clients
// nothing: a DoQ query right after it is answered. The sentinel is a
// 1200-byte packet of an unknown version: the first reply must be its
// Version Negotiation, so nothing answered the flood before it.
func TestDoQ_floodOfUnknownShortHeaderPacketsGetsNoAnswer(t *testing.T) {
	p := newTestPKI(t)
	_, addr := startDoQServer(t, state(answerA("192.0.2.9")), p)
	sock := rawQUICSocket(t, addr)
	pkt := make([]byte, 60)
	const flood = 5000
	for range flood {
		rand.Read(pkt)
		pkt[0] = 0x40 | pkt[0]&0x3f // short header, fixed bit
		if _, err := sock.Write(pkt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sock.Write(unknownVersionPacket([]byte("sentinel"), 1200)); err != nil {
		t.Fatal(err)
	}
	if reply := readDatagram(t, sock); len(reply) < 5 || binary.BigEndian.Uint32(reply[1:5]) != 0 {
		t.Errorf("first reply after the flood is %d bytes, %x…, want the sentinel's Version Negotiation", len(reply), reply[:min(len(reply), 8)])
	}
	doqMustAnswer(t, p, addr)
}

// quicMaxDatagram is the largest datagram a QUIC endpoint sends before path
// MTU discovery: quic-go's initial packet size, 1280 bytes, with room for
// an IPv6-sized one.
const quicMaxDatagram = 1452

// bigLeaf gives p's files a certificate with many names, about 15 KB of
// DER (under the 16 KB a quic-go client takes in one handshake's CRYPTO
// data), refreshes the store, and returns the leaf.
func bigLeaf(t *testing.T, p *testPKI) *x509.Certificate {
	t.Helper()
	names := []string{testServerName}
	for i := range 600 {
		names = append(names, fmt.Sprintf("name-%03d.spoof.example", i))
	}
	c, err := p.ca.Issue(names...)
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteLeafFiles(c, p.cert, p.key); err != nil {
		t.Fatal(err)
	}
	if p.store, err = tlscert.Open(p.cert, p.key, tlscert.Options{}); err != nil {
		t.Fatal(err)
	}
	return c.Leaf
}

// rawQUICSocket is a UDP socket connected to addr, closed at cleanup.
func rawQUICSocket(t *testing.T, addr netip.AddrPort) *net.UDPConn {
	t.Helper()
	sock, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	return sock
}

// readDatagram reads one datagram, failing the test after 5 s.
func readDatagram(t *testing.T, sock *net.UDPConn) []byte {
	t.Helper()
	sock.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	n, err := sock.Read(buf)
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	return buf[:n]
}

// unknownVersionPacket is a long-header packet of a reserved version
// (RFC 9000 §15: 0x?a?a?a?a is never a real one), padded to size.
func unknownVersionPacket(dcid []byte, size int) []byte {
	pkt := []byte{0xc0, 0x1a, 0x2a, 0x3a, 0x4a, byte(len(dcid))}
	pkt = append(pkt, dcid...)
	pkt = append(pkt, 4, 's', 'c', 'i', 'd')
	return append(pkt, make([]byte, size-len(pkt))...)
}

// doqMustAnswer asks addr one DoQ query with nxdns's own client.
func doqMustAnswer(t *testing.T, p *testPKI, addr netip.AddrPort) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := doqClient(t, p, addr).Exchange(ctx, newQuery("after.example.", dns.TypeA))
	if err != nil {
		t.Fatalf("a DoQ query after the hostile packets: %v", err)
	}
	if len(resp.Answer) != 1 {
		t.Fatalf("answer %v", resp.Answer)
	}
}
