package server

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/stats"
)

// Rcode slots of the per-source counters: the rcodes 0–23 (every one the
// server can send, BADVERS included), then one for "no answer sent".
const (
	rcodeNone  = -1
	noneSlot   = 24
	rcodeSlots = noneSlot + 1
)

// rcodeCounts counts one source's queries by the rcode answered.
type rcodeCounts [rcodeSlots]atomic.Uint64

func rcodeSlot(rcode int) int {
	if rcode < 0 || rcode >= noneSlot {
		return noneSlot
	}
	return rcode
}

func rcodeLabel(slot int) string {
	switch slot {
	case noneSlot:
		return "none"
	case dns.RcodeBadVers:
		// 16 is BADVERS in an OPT's extended rcode (RFC 6891) and BADSIG in
		// a TSIG (RFC 8945); miekg/dns's table says BADSIG, and nxdns only
		// ever sends BADVERS.
		return "BADVERS"
	}
	if s, ok := dns.RcodeToString[slot]; ok {
		return s
	}
	return "RCODE" + strconv.Itoa(slot)
}

// counters are the server's numbers, kept once: the metrics collector reads
// them through Snapshot at scrape time.
type counters struct {
	// bySource is copied on write: sources are few (the pool, each zone,
	// the cache, refused, server …) and all appear in a server's first
	// minutes, and a read lock would be two atomic writes on every query to
	// a word every CPU's readers share. mu orders the copies.
	mu       sync.Mutex
	bySource atomic.Pointer[map[string]*rcodeCounts]

	latency stats.Histogram // routed queries, from the first byte handled to the answer packed

	udpDropped     atomic.Uint64 // UDP queries dropped over maxUDPInFlight
	udpClientShare atomic.Uint64 // UDP queries dropped over the client's share (udpClientShare)
	udpKernel      atomic.Uint64 // datagrams the kernel dropped, its receive queue full (SO_RXQ_OVFL)
	udpBadSource   atomic.Uint64 // datagrams from port 0 or to a broadcast address, dropped unread
	malformed      atomic.Uint64 // messages dropped unanswered: no header, a response, a TCP message over the size limit
	tcpRefused     atomic.Uint64 // TCP connections refused over maxTCPConns
	tcpClientShare atomic.Uint64 // TCP connections refused over the client's share (tcpClientShare)
	tcpNotAllowed  atomic.Uint64 // TCP connections from outside dns.allow, closed at accept
	undelivered    atomic.Uint64 // answers packed but not delivered: the write failed
	fastAnswers    atomic.Uint64 // cache hits answered on the UDP reader from their wire form (fastpath.go)
	tcpIdle        atomic.Uint64 // TCP connections closed after the idle bound
	tcpSlow        atomic.Uint64 // TCP connections closed for a slow read or write
	byProto        protoCounts   // queries by the transport they arrived on (protocount.go)

	clientOpts clientOptCounters // client-identity options and ClientIDs not believed (clientid.go)
}

func (c *counters) init() { c.bySource.Store(&map[string]*rcodeCounts{}) }

// count adds one query. A source already seen costs a load and the count.
func (c *counters) count(source string, rcode int) {
	rc := (*c.bySource.Load())[source]
	if rc == nil {
		rc = c.addSource(source)
	}
	rc[rcodeSlot(rcode)].Add(1)
}

// addSource returns source's counts, adding them in a new copy of the map
// if no other query has meanwhile.
func (c *counters) addSource(source string) *rcodeCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := *c.bySource.Load()
	if rc := m[source]; rc != nil {
		return rc
	}
	next := maps.Clone(m)
	rc := new(rcodeCounts)
	next[source] = rc
	c.bySource.Store(&next)
	return rc
}

// Snapshot is a point-in-time copy of the server's counters and gauges.
type Snapshot struct {
	// Queries counts answered (and cancelled) queries by source and rcode;
	// only non-zero pairs, sorted. Rcode "none" is a query that got no
	// answer (cancelled). Source "refused" are clients outside dns.allow,
	// "server" queries the server rejected itself (FORMERR, NOTIMP, BADVERS).
	Queries []QueryCount
	Latency stats.HistogramSnapshot // routed queries only

	UDPInFlight int64 // UDP queries being answered now, both families
	TCPConns    int64 // TCP connections open now, both families

	UDPDropped     uint64 // UDP queries dropped over the in-flight cap
	UDPClientShare uint64 // UDP queries dropped over one client's share of the cap
	UDPKernel      uint64 // datagrams the kernel dropped (receive queue full) before nxdns read them
	UDPBadSource   uint64 // datagrams from source port 0 or to a broadcast address, dropped before any work
	Malformed      uint64 // messages dropped unanswered (unparsable header, QR set, a query over 4096 bytes)
	TCPRefused     uint64 // TCP connections refused over the cap
	TCPClientShare uint64 // TCP connections refused over one client's share of the cap
	TCPNotAllowed  uint64 // TCP connections from outside dns.allow, closed at accept
	Undelivered    uint64 // answers that could not be written (UDP send error, failed TCP write); their queries count as rcode "none"
	Refused        uint64 // queries REFUSED by the access list (the "refused" source, summed)
	TCPIdleClosed  uint64 // TCP connections closed after the idle bound
	TCPSlowClosed  uint64 // TCP connections closed for a slow read or write

	Protos []ProtoCount // queries by transport: udp, tcp, dot, doh

	ClientOptions ClientOptionCounts // client MAC, subnet and ClientID not believed (clientid.go)
}

// QueryCount is one (source, rcode) counter.
type QueryCount struct {
	Source string
	Rcode  string // "NOERROR", "SERVFAIL", …, or "none"
	Count  uint64
}

// Snapshot reads every counter. Counts keep running while it reads, so two
// fields may differ by the queries finishing meanwhile; Prometheus tolerates
// that.
func (s *Server) Snapshot() Snapshot {
	c := &s.stats
	snap := Snapshot{
		Latency:        c.latency.Snapshot(),
		UDPDropped:     c.udpDropped.Load(),
		UDPClientShare: c.udpClientShare.Load(),
		UDPKernel:      c.udpKernel.Load(),
		UDPBadSource:   c.udpBadSource.Load(),
		Malformed:      c.malformed.Load(),
		TCPRefused:     c.tcpRefused.Load(),
		TCPClientShare: c.tcpClientShare.Load(),
		TCPNotAllowed:  c.tcpNotAllowed.Load(),
		Undelivered:    c.undelivered.Load(),
		TCPIdleClosed:  c.tcpIdle.Load(),
		TCPSlowClosed:  c.tcpSlow.Load(),
		Protos:         c.byProto.snapshot(),
		ClientOptions:  c.clientOpts.snapshot(),
	}
	for f := range numFamilies {
		snap.UDPInFlight += s.udpCap[f].inUse()
		snap.TCPConns += s.tcpCap[f].inUse()
	}
	for source, rc := range *c.bySource.Load() {
		for slot := range rc {
			n := rc[slot].Load()
			if n == 0 {
				continue
			}
			snap.Queries = append(snap.Queries, QueryCount{Source: source, Rcode: rcodeLabel(slot), Count: n})
			if source == query.SourceRefused {
				snap.Refused += n
			}
		}
	}
	slices.SortFunc(snap.Queries, func(a, b QueryCount) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Rcode, b.Rcode))
	})
	return snap
}

// record hands the finished event to its consumers: the counters, the
// query-log line and every sink (docs/design.md#query-event: one event, read by all).
func (s *Server) record(st *State, e *query.Event) {
	if e.Answer == "" {
		e.Answer = query.Summary(e.Reply)
	}
	s.stats.count(e.Source, e.Rcode)
	s.stats.byProto.count(e.Proto)
	if e.Resolved {
		s.stats.latency.Observe(e.Duration)
	}
	if st.QueryLog {
		s.logQuery(e)
	}
	for _, sink := range st.Sinks {
		sink.Record(e)
	}
}
