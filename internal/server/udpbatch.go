package server

import (
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"golang.org/x/net/ipv4"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/wireform"
)

// udpBatch is one reader's view of a UDP socket: it reads the datagrams
// queued at the socket several at a time (recvmmsg) and writes the answers
// the fast path gives them several at a time (sendmmsg). At cache-hit rates
// a syscall and the runtime's work around it were a fifth of a query's
// cost; a batch shares them. Nothing waits for a batch to fill: a read
// returns what is queued, at least one datagram, and the batch's answers go
// out once its datagrams have been looked at.
//
// Guarantee: every fast answer queued is written (or found undeliverable)
// and its event recorded by the flush that follows the read it came from,
// in the reader's own goroutine; so a query's event is recorded after its
// answer's write, as on the general path. Not safe for concurrent use: each
// reader has its own.
type udpBatch struct {
	conn interface {
		ReadBatch(ms []ipv4.Message, flags int) (int, error)
		WriteBatch(ms []ipv4.Message, flags int) (int, error)
	}
	in    []ipv4.Message
	out   []ipv4.Message
	bufs  [][]byte     // out[i]'s answer buffer
	iovs  [][1][]byte  // out[i]'s Buffers, kept so that queueing allocates nothing
	oobs  [][]byte     // out[i]'s source-address control message, likewise
	sent  []fastAnswer // out[i]'s query, to be recorded
	evs   []query.Event
	name  *[wireform.MaxName]byte
	drops kernelDrops // the socket's receive-queue drop count
}

// fastAnswer is a fast-path answer waiting for its write.
type fastAnswer struct {
	g  *generation
	ev *query.Event
}

// udpBatchSize is how many datagrams one read takes at most: enough to
// share a syscall across a burst, few enough that the first answer of a
// batch waits only microseconds for the last.
const udpBatchSize = 16

// udpReadSize is a batch slot's buffer: a query is one question and an OPT
// record, well under 1 KiB even with cookies and padding, so a slot holds
// the largest query TCP takes (maxTCPQuerySize). A longer datagram arrives
// cut short (MSG_TRUNC) and is dropped as malformed, never parsed in part.
// Sixteen 64 KiB slots per reader would pin 1 MiB for each CPU and address.
const udpReadSize = maxTCPQuerySize

func newUDPBatch(c *net.UDPConn, v6 bool) *udpBatch {
	b := &udpBatch{conn: newMmsgConn(c, v6), name: new([wireform.MaxName]byte)}
	b.in = make([]ipv4.Message, udpBatchSize)
	b.out = make([]ipv4.Message, 0, udpBatchSize)
	b.bufs = make([][]byte, udpBatchSize)
	b.iovs = make([][1][]byte, udpBatchSize)
	b.oobs = make([][]byte, udpBatchSize)
	b.sent = make([]fastAnswer, 0, udpBatchSize)
	b.evs = make([]query.Event, udpBatchSize)
	for i := range b.in {
		b.in[i].Buffers = [][]byte{make([]byte, udpReadSize)}
		b.in[i].OOB = make([]byte, oobSize+overflowOOBSize)
		b.bufs[i] = make([]byte, maxUDPAnswer)
		b.oobs[i] = make([]byte, 0, oobSize)
	}
	return b
}

// read waits for datagrams and returns how many it read into b.in.
func (b *udpBatch) read() (int, error) {
	for i := range b.in {
		b.in[i].OOB = b.in[i].OOB[:cap(b.in[i].OOB)]
	}
	return b.conn.ReadBatch(b.in, 0)
}

// datagram is the i-th datagram read: its bytes, control messages and
// sender; truncated reports a datagram longer than its slot.
func (b *udpBatch) datagram(i int) (wire, oob []byte, from netip.AddrPort, truncated bool) {
	m := &b.in[i]
	truncated = m.Flags&unix.MSG_TRUNC != 0
	if a, ok := m.Addr.(*net.UDPAddr); ok {
		ap := a.AddrPort()
		from = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return m.Buffers[0][:m.N], m.OOB[:m.NN], from, truncated
}

// buffer is where the next answer is to be written, and event its query's
// event: both belong to the batch and are reused once flush has recorded
// the query (the query.Sink contract), so a fast answer allocates nothing.
func (b *udpBatch) buffer() []byte { return b.bufs[len(b.out)][:0] }

// event is the next answer's event (see buffer).
func (b *udpBatch) event() *query.Event { return &b.evs[len(b.out)] }

// queue adds the answer ans (in buffer()) to the i-th datagram, sent from
// src, to the batch's writes; g and ev are recorded once it is written.
func (b *udpBatch) queue(i int, ans []byte, src netip.Addr, g *generation, ev *query.Event) {
	j := len(b.out)
	b.iovs[j][0] = ans
	b.oobs[j] = appendSourceOOB(b.oobs[j][:0], src)
	b.out = append(b.out, ipv4.Message{Buffers: b.iovs[j][:], OOB: b.oobs[j], Addr: b.in[i].Addr})
	b.sent = append(b.sent, fastAnswer{g: g, ev: ev})
}

// flush writes the queued answers and records their queries: an answer the
// socket refused is counted undelivered and the rest still go out.
func (s *Server) flush(b *udpBatch) {
	for done := 0; done < len(b.out); {
		// sendmmsg reports -1 when its first message fails (x/net passes
		// that on), and a count short of the batch when a later one does.
		n, _ := b.conn.WriteBatch(b.out[done:], 0) // the count says what went out
		n = min(max(n, 0), len(b.out)-done)
		for _, a := range b.sent[done : done+n] {
			s.finishFast(a.g, a.ev, true)
		}
		done += n
		if n == 0 && done < len(b.out) {
			// The message at done failed (or, with no error, nothing moved:
			// never loop on it).
			s.finishFast(b.sent[done].g, b.sent[done].ev, false)
			done++
		}
	}
	clear(b.evs[:len(b.sent)]) // no cached answer held past its flush
	clear(b.out)
	clear(b.sent)
	clear(b.iovs) // nor an answer buffer
	b.out, b.sent = b.out[:0], b.sent[:0]
}
