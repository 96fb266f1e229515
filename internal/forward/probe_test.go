package forward

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdns/nxdns/internal/testutil"
)

// TestProbe_deadResolverIsVisibleAndRecovers: a zone resolver that does not
// answer is marked down by the start-up probe with one warn line, stays one
// episode however many live queries fail, and is marked up with one info
// line once it answers a probe again (issue 16, finding 18).
func TestProbe_deadResolverIsVisibleAndRecovers(t *testing.T) {
	var answering atomic.Bool
	addr := startUDP(t, func(conn *net.UDPConn, from netip.AddrPort, q *dns.Msg) {
		if answering.Load() {
			m := new(dns.Msg).SetRcode(q, dns.RcodeNameError) // a router not authoritative for its zone: still up
			reply(t, conn, from, m)
		}
	})
	tab := newTestTable(t, 200*time.Millisecond, "lan", "udp://"+addr.String())
	core, logs := observer.New(zap.InfoLevel)
	tab.Start(zap.New(core))
	defer tab.Close()

	testutil.WaitFor(t, "the zone down after the start-up probe", 5*time.Second, func() bool { return tab.Snapshot()[0].Down })
	z, _ := tab.Match("lan.")
	for range 5 {
		if _, _, err := z.Resolve(t.Context(), queryA("host.lan.")); err == nil {
			t.Fatal("a silent resolver answered")
		}
	}
	testutil.WaitFor(t, `a "forward-zone resolver unreachable" line`, 5*time.Second, func() bool { return logs.FilterMessage("forward-zone resolver unreachable").Len() >= 1 })

	answering.Store(true)
	// The first backoff probe comes within backoffFirst (2 s, jittered down).
	testutil.WaitFor(t, "the zone up once the resolver answers", 10*time.Second, func() bool { return !tab.Snapshot()[0].Down })
	testutil.WaitFor(t, `a "forward-zone resolver recovered" line`, 5*time.Second, func() bool { return logs.FilterMessage("forward-zone resolver recovered").Len() >= 1 })
	if n := logs.FilterMessage("forward-zone resolver unreachable").Len(); n != 1 {
		t.Errorf("%d unreachable lines, want 1 per episode", n)
	}
	if s := tab.Snapshot()[0]; s.ProbesFailed == 0 || s.ProbesOK == 0 {
		t.Errorf("probes ok %d, failed %d; want both counted", s.ProbesOK, s.ProbesFailed)
	}
}

// TestProbe_liveFailuresMarkDown: a resolver that answered the start-up
// probe and then stops is marked down by live queries at the threshold.
func TestProbe_liveFailuresMarkDown(t *testing.T) {
	var answering atomic.Bool
	answering.Store(true)
	addr := startUDP(t, func(conn *net.UDPConn, from netip.AddrPort, q *dns.Msg) {
		if answering.Load() {
			reply(t, conn, from, answerA(q, "192.0.2.1"))
		}
	})
	tab := newTestTable(t, 200*time.Millisecond, "lan", "udp://"+addr.String())
	tab.Start(nil)
	defer tab.Close()
	testutil.WaitFor(t, "the start-up probe answered", 5*time.Second, func() bool { return tab.Snapshot()[0].ProbesOK == 1 })
	answering.Store(false)
	z, _ := tab.Match("lan.")
	for i := range zoneDownThreshold {
		if tab.Snapshot()[0].Down {
			t.Fatalf("down after %d failures, want %d", i, zoneDownThreshold)
		}
		z.Resolve(t.Context(), queryA("host.lan."))
	}
	if !tab.Snapshot()[0].Down {
		t.Errorf("not down after %d failed queries", zoneDownThreshold)
	}
}

func TestTable_closeWithoutStart(t *testing.T) {
	tab := newTestTable(t, time.Second, "lan", "udp://127.0.0.1:53")
	tab.Close()
	var none *Table
	none.Start(nil)
	none.Close()
}
