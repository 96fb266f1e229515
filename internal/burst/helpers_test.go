package burst

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// plan is a test server's decision for one query: the reply (nil: never
// answer) and how long to wait before sending it.
type plan struct {
	reply *dns.Msg
	delay time.Duration
}

// udpServer is a loopback UDP DNS server for these tests. A parallel one
// answers each query on its own goroutine; a serial one finishes each query,
// delay included, before reading the next: the staircase of docs/design.md#burst-staircase.
type udpServer struct {
	conn  net.PacketConn
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	names []string // every query name received, in arrival order
}

func startUDP(t *testing.T, serial bool, decide func(q *dns.Msg) plan) *udpServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &udpServer{conn: conn, done: make(chan struct{})}
	s.wg.Go(func() { s.serve(serial, decide) })
	t.Cleanup(func() {
		close(s.done)
		conn.Close()
		s.wg.Wait()
	})
	return s
}

func (s *udpServer) addr() string { return s.conn.LocalAddr().String() }

func (s *udpServer) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.names...)
}

func (s *udpServer) serve(serial bool, decide func(*dns.Msg) plan) {
	buf := make([]byte, dns.MaxMsgSize)
	for {
		n, peer, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		q := new(dns.Msg)
		if q.Unpack(buf[:n]) != nil || len(q.Question) != 1 {
			continue
		}
		s.mu.Lock()
		s.names = append(s.names, q.Question[0].Name)
		s.mu.Unlock()
		p := decide(q)
		if p.reply == nil {
			continue
		}
		answer := func() {
			select {
			case <-time.After(p.delay): // the server's latency, not synchronisation
			case <-s.done:
				return
			}
			if wire, err := p.reply.Pack(); err == nil {
				s.conn.WriteTo(wire, peer)
			}
		}
		if serial {
			answer()
		} else {
			s.wg.Go(answer)
		}
	}
}

// index is the number i in a generated name "<prefix>-<i>.<suffix>", or -1
// for a baseline name.
func index(name string) int {
	label := strings.SplitN(name, ".", 2)[0]
	i, err := strconv.Atoi(label[strings.LastIndexByte(label, '-')+1:])
	if err != nil {
		return -1
	}
	return i
}

func reply(q *dns.Msg, rcode int) *dns.Msg {
	r := new(dns.Msg)
	r.SetRcode(q, rcode)
	if rcode == dns.RcodeSuccess {
		rr, _ := dns.NewRR(q.Question[0].Name + " 60 IN A 192.0.2.1")
		r.Answer = []dns.RR{rr}
	}
	return r
}
