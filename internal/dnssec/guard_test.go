package dnssec

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/upstream"
)

// exchangerFunc answers the guard's exchange with a message built per query.
type exchangerFunc func(q *dns.Msg) *dns.Msg

func (f exchangerFunc) Exchange(_ context.Context, q *dns.Msg) (upstream.Result, error) {
	return upstream.Result{Msg: f(q), Upstream: "test"}, nil
}

func guardWorld(t *testing.T, mode Mode, clockSet bool) (*world, *tzone, *Guard, *observer.ObservedLogs, *Stats) {
	t.Helper()
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	core, logs := observer.New(zap.InfoLevel)
	st := &Stats{}
	return w, z, NewGuard(w.validator(t, nil), mode, func() bool { return clockSet }, zap.New(core), st, time.Second), logs, st
}

func query(name string, do, cd bool) *dns.Msg {
	q := new(dns.Msg).SetQuestion(name, dns.TypeA)
	q.SetEdns0(1232, do)
	q.CheckingDisabled = cd
	return q
}

// A secure answer's TTLs are cut to its signature's remaining life (RFC
// 4035 §5.3.3), and a client without DO gets it without the RRSIG.
func TestGuard_secureAnswerTTLAndRecords(t *testing.T) {
	_, z, g, _, _ := guardWorld(t, Enforce, true)
	ans := z.signAt(time.Now().Add(-time.Hour), time.Now().Add(10*time.Minute), rr("www.a.test. 86400 IN A 192.0.2.1"))
	r := g.Wrap(exchangerFunc(func(q *dns.Msg) *dns.Msg {
		if !q.IsEdns0().Do() {
			t.Error("the upstream was asked without DO")
		}
		return msg("www.a.test.", dns.TypeA, 0, ans, nil)
	}))
	res, err := r.Exchange(context.Background(), query("www.a.test.", false, false))
	if err != nil || !res.Msg.AuthenticatedData || len(res.Msg.Answer) != 1 || res.Msg.Answer[0].Header().Ttl > 600 {
		t.Fatalf("answer %v, %v: want AD, the A alone, TTL at most 600", res.Msg, err)
	}
	if ans[0].Header().Ttl != 86400 {
		t.Error("the upstream's record was modified")
	}
}

// Bogus: enforce answers SERVFAIL with the EDE naming the zone, shadow and
// an enforce waiting for the clock pass the data without AD; one log line
// per episode, every verdict counted; CD=1 is not validated and gets no AD.
func TestGuard_bogusByMode(t *testing.T) {
	for _, c := range []struct {
		name     string
		mode     Mode
		clockSet bool
		servfail bool
	}{{"enforce", Enforce, true, true}, {"shadow", Shadow, true, false}, {"enforce before the clock", Enforce, false, false}} {
		t.Run(c.name, func(t *testing.T) {
			_, _, g, logs, st := guardWorld(t, c.mode, c.clockSet)
			stripped := msg("www.a.test.", dns.TypeA, 0, []dns.RR{rr("www.a.test. 300 IN A 192.0.2.1")}, nil)
			stripped.AuthenticatedData = true // an upstream that says it validated
			r := g.Wrap(exchangerFunc(func(*dns.Msg) *dns.Msg { return stripped }))
			for range 3 {
				res, _ := r.Exchange(context.Background(), query("www.a.test.", true, false))
				m := res.Msg
				if c.servfail {
					o := m.IsEdns0()
					if m.Rcode != dns.RcodeServerFailure || o == nil || len(o.Option) != 1 || o.Option[0].(*dns.EDNS0_EDE).InfoCode != dns.ExtendedErrorCodeRRSIGsMissing ||
						o.Option[0].(*dns.EDNS0_EDE).ExtraText[:7] != "a.test." {
						t.Fatalf("enforce answered %v", m)
					}
				} else if m.Rcode != dns.RcodeSuccess || m.AuthenticatedData || len(m.Answer) != 1 {
					t.Fatalf("answered %v, want the data without AD", m)
				}
			}
			if c.mode == Shadow { // the verdicts follow the answers
				testutil.WaitFor(t, "shadow's verdicts", 10*time.Second, func() bool { return st.Snapshot().Pending == 0 })
			}
			if n := logs.Len(); n != 1 {
				t.Errorf("%d log lines for one episode, want 1", n)
			}
			if s := st.Snapshot(); s.Bogus != 3 || (s.Enforced == 3) != c.servfail || len(s.Recent) != 3 {
				t.Errorf("stats %+v", s)
			}
			res, _ := r.Exchange(context.Background(), query("www.a.test.", true, true))
			if res.Msg.Rcode != dns.RcodeSuccess || res.Msg.AuthenticatedData {
				t.Errorf("CD=1 answered %v, want the data without AD", res.Msg)
			}
		})
	}
}

// A forward zone that is not validated keeps its data but loses the AD
// bit its router set: AD means nxdns validated.
func TestGuard_unvalidatedZoneLosesAD(t *testing.T) {
	_, _, g, _, st := guardWorld(t, Enforce, true)
	up := msg("nas.lan.", dns.TypeA, 0, []dns.RR{rr("nas.lan. 300 IN A 192.168.1.5")}, nil)
	up.AuthenticatedData = true
	res, err := g.Unvalidated(exchangerFunc(func(*dns.Msg) *dns.Msg { return up })).Exchange(context.Background(), query("nas.lan.", true, false))
	if err != nil || res.Msg.AuthenticatedData || len(res.Msg.Answer) != 1 || !up.AuthenticatedData {
		t.Fatalf("answer %v, %v; the router's message AD %v: want the data without AD, the router's message untouched", res.Msg, err, up.AuthenticatedData)
	}
	if s := st.Snapshot(); s.Secure+s.Insecure+s.Bogus+s.Indeterminate != 0 {
		t.Errorf("an unvalidated answer was counted: %+v", s)
	}
}

// A signature not yet valid by a clock nobody confirmed (a Pi restored to
// its shutdown time, no time service) is passed on in enforce, with the
// log line saying why, so the time servers' names still resolve; with the
// clock confirmed it is refused like any bogus answer.
func TestGuard_notYetValidRefusedOnlyWithAConfirmedClock(t *testing.T) {
	for _, confirmed := range []bool{false, true} {
		_, z, g, logs, st := guardWorld(t, Enforce, true)
		g.WithClockConfirmed(func() bool { return confirmed })
		ans := z.signAt(time.Now().Add(24*time.Hour), time.Now().Add(48*time.Hour), rr("www.a.test. 300 IN A 192.0.2.1"))
		r := g.Wrap(exchangerFunc(func(*dns.Msg) *dns.Msg { return msg("www.a.test.", dns.TypeA, 0, ans, nil) }))
		res, _ := r.Exchange(context.Background(), query("www.a.test.", true, false))
		if got := res.Msg.Rcode == dns.RcodeServerFailure; got != confirmed {
			t.Errorf("clock confirmed %v: SERVFAIL %v, want %v", confirmed, got, confirmed)
		}
		if res.Msg.AuthenticatedData {
			t.Errorf("clock confirmed %v: a not-yet-valid answer has AD", confirmed)
		}
		if snap := st.Snapshot(); snap.Bogus != 1 {
			t.Errorf("clock confirmed %v: bogus counted %d, want 1", confirmed, snap.Bogus)
		}
		if !confirmed && logs.FilterMessageSnippet("no time service has confirmed").Len() != 1 {
			t.Errorf("no log line says why the answer was passed on: %v", logs.All())
		}
	}
}
