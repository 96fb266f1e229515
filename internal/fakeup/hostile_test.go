package fakeup

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Each hostile behaviour sends what it is named after (issue 13), over a
// stream here and over UDP where it applies.
func TestHostile_oversizedEDETSIGAndTXT(t *testing.T) {
	s := start(t, Config{}, "tcp://127.0.0.1:0?ede_text=65000", "tcp://127.0.0.1:0?txt=60000&tsig=1")
	c := dialTCP(t, s.addr(0))
	writeMsg(t, c, query("a.example.", dns.TypeA)) // no EDNS in the query: an OPT is added anyway
	r := mustRead(t, c)
	opt := r.IsEdns0()
	if opt == nil || len(opt.Option) != 1 || len(opt.Option[0].(*dns.EDNS0_EDE).ExtraText) != 65000 {
		t.Fatalf("ede_text=65000: OPT %v", opt)
	}

	c = dialTCP(t, s.addr(1))
	writeMsg(t, c, query("a.example.", dns.TypeTXT))
	r = mustRead(t, c)
	if n := r.Len(); n < 59000 || n > dns.MaxMsgSize {
		t.Errorf("txt=60000: answer of %d bytes, want about 60000", n)
	}
	if r.IsTsig() == nil {
		t.Error("tsig=1: the answer does not end with a TSIG")
	}
}

func TestHostile_tcOverAStream(t *testing.T) {
	s := start(t, Config{}, "dot://127.0.0.1:0?tc=1")
	c := s.dialTLS(t, 0)
	writeMsg(t, c, query("a.example.", dns.TypeA))
	if r := mustRead(t, c); !r.Truncated {
		t.Error("tc=1 over dot: TC not set")
	}
}

// endless sends frames for another ID without end: a client reading past
// many frames is still not at the end.
func TestHostile_endless(t *testing.T) {
	s := start(t, Config{}, "tcp://127.0.0.1:0?endless=1")
	c := dialTCP(t, s.addr(0))
	q := query("a.example.", dns.TypeA)
	writeMsg(t, c, q)
	for i := range 1000 {
		r, err := readMsg(c, ioBound)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if r.Id == q.Id {
			t.Fatalf("frame %d answers the query's ID", i)
		}
	}
}

// slow_bytes writes an answer one byte at a time: a 40-odd-byte answer at
// 5 ms a byte takes well over 100 ms.
func TestHostile_slowBytes(t *testing.T) {
	s := start(t, Config{}, "tcp://127.0.0.1:0?slow_bytes=5ms")
	c := dialTCP(t, s.addr(0))
	start := time.Now()
	writeMsg(t, c, query("a.example.", dns.TypeA))
	r := mustRead(t, c)
	if d := time.Since(start); d < time.Duration(r.Len())*5*time.Millisecond/2 {
		t.Errorf("a %d-byte answer arrived in %v at slow_bytes=5ms", r.Len(), d)
	}
}

// The hostile behaviours apply over UDP too: a datagram near 64 KB. (A raw
// socket: miekg/dns's client would reject the TSIG it cannot verify.)
func TestHostile_overUDP(t *testing.T) {
	s := start(t, Config{}, "udp://127.0.0.1:0?txt=60000&tsig=1")
	c, err := net.Dial("udp", s.addr(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, _ := query("a.example.", dns.TypeTXT).Pack()
	c.Write(w)
	c.SetReadDeadline(time.Now().Add(ioBound))
	buf := make([]byte, 70000)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:n]); err != nil {
		t.Fatal(err)
	}
	if n < 59000 || r.IsTsig() == nil {
		t.Errorf("udp txt=60000&tsig=1: %d bytes, TSIG %v", n, r.IsTsig() != nil)
	}
}
