package burst

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
)

// gatedUpstream starts a fake upstream with one listener of transport
// ("dot" or "doq") whose certificate, issued by a CA made for the test,
// carries 127.0.0.1. It holds back the answers to the first hold burst
// queries (baseline names pass) until all of them have arrived, so a run
// completes only if the client had them all outstanding at once. The CA's
// PEM file is returned for Config.CAFile.
func gatedUpstream(t *testing.T, transport string, hold int) (*fakeup.Server, string) {
	t.Helper()
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := ca.WriteFiles(caFile, filepath.Join(t.TempDir(), "ca.key")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	arrived := 0
	gate := make(chan struct{})
	l, err := fakeup.ParseListen(transport + "://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Hooks = &fakeup.Hooks{Answer: func(ctx context.Context, q *dns.Msg) *dns.Msg {
		if index(q.Question[0].Name) >= 0 {
			mu.Lock()
			if arrived++; arrived == hold {
				close(gate)
			}
			mu.Unlock()
			select {
			case <-gate:
			case <-ctx.Done():
				return nil
			}
		}
		return reply(q, dns.RcodeSuccess)
	}}
	up, err := fakeup.Start(fakeup.Config{Listen: []fakeup.Listen{l}, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		up.Close()
		if transport == ProtoDoQ {
			// quic-go's listener keeps its UDP socket, and the goroutines
			// reading it, until the connection IDs of a closed connection
			// expire (3 PTO: about a second after a failed handshake,
			// whose RTT is unknown); fakeup.Close does not wait for that.
			addr := up.Listeners()[0].Addr.String()
			testutil.WaitFor(t, "the DoQ listener's socket to close", 10*time.Second, func() bool {
				c, err := net.ListenPacket("udp", addr)
				if err == nil {
					c.Close()
				}
				return err == nil
			})
		}
	})
	return up, caFile
}

// TestRun_dotAndDoQShareOneConnectionWithQueriesInFlightTogether: over
// -proto dot and doq the baseline and the wave travel on one connection,
// verified against the test CA, and the wave's queries are outstanding at
// once (pipelined on DoT, a stream each on DoQ): the upstream answers none
// until all ten have arrived.
func TestRun_dotAndDoQShareOneConnectionWithQueriesInFlightTogether(t *testing.T) {
	for _, proto := range []string{ProtoDoT, ProtoDoQ} {
		t.Run(proto, func(t *testing.T) {
			up, caFile := gatedUpstream(t, proto, 10)
			cfg := config(up.Listeners()[0].Addr.String())
			cfg.Proto, cfg.CAFile, cfg.N, cfg.Baseline = proto, caFile, 10, 3
			rep := mustRun(t, cfg)
			if rep.Queries != 10 || rep.Rcodes["NOERROR"] != 10 || rep.BaselineP50MS == 0 {
				t.Errorf("queries %d, rcodes %v, timeouts %d, errors %d, baseline p50 %v; want 10 NOERROR and a baseline",
					rep.Queries, rep.Rcodes, rep.Timeouts, rep.Errors, rep.BaselineP50MS)
			}
			if c := up.Counters(); c.Connections != 1 || c.Queries != 13 {
				t.Errorf("%d connections, %d queries; want 1 connection carrying all 13", c.Connections, c.Queries)
			}
		})
	}
}

// TestRun_dotAndDoQVerifyTheCertificate: without the test CA the dial
// fails with the verification error and no query is counted as sent;
// -insecure skips verification.
func TestRun_dotAndDoQVerifyTheCertificate(t *testing.T) {
	for _, proto := range []string{ProtoDoT, ProtoDoQ} {
		t.Run(proto, func(t *testing.T) {
			up, _ := gatedUpstream(t, proto, 1)
			cfg := config(up.Listeners()[0].Addr.String())
			cfg.Proto, cfg.N, cfg.Baseline = proto, 1, 0
			if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("Run against an unknown CA = %v, want a certificate error", err)
			}
			if c := up.Counters(); c.Queries != 0 {
				t.Errorf("%d queries reached the server through an unverified connection", c.Queries)
			}
			cfg.Insecure = true
			if rep := mustRun(t, cfg); rep.Rcodes["NOERROR"] != 1 {
				t.Errorf("insecure: rcodes %v, want 1 NOERROR", rep.Rcodes)
			}
		})
	}
}

// TestRun_distinctRepeatsTheNames: -distinct 3 cycles the fixed rate's
// names over three, so a cache in front answers all but the first three.
func TestRun_distinctRepeatsTheNames(t *testing.T) {
	srv := startUDP(t, false, func(q *dns.Msg) plan { return plan{reply: reply(q, dns.RcodeSuccess)} })
	cfg := config(srv.addr())
	cfg.N, cfg.Waves, cfg.Baseline, cfg.Distinct = 0, 0, 0, 3
	cfg.Rate, cfg.Duration = 100, 120*time.Millisecond // 12 queries
	rep := mustRun(t, cfg)
	names := map[string]int{}
	for _, n := range srv.received() {
		names[n]++
	}
	if rep.Queries != 12 || len(names) != 3 {
		t.Errorf("%d queries over %d names %v; want 12 over 3", rep.Queries, len(names), names)
	}
}
