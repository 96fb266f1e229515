package peers

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// node is a store over a map standing in for the filter engine, on a
// settable clock.
type node struct {
	s     *Store
	state map[string]string
	now   time.Time
}

func newNode(t *testing.T, now time.Time) *node {
	t.Helper()
	n := &node{state: map[string]string{}, now: now}
	s, err := Open(t.TempDir(), func(k, v string) bool { n.state[k] = v; return true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return n.now }
	n.s = s
	return n
}

func (n *node) local(k, v string) { n.state[k] = v; n.s.Local(k, v) }

// Two nodes that changed the same keys while apart end in the same state
// whichever pulls first, and it is the later change that wins; a node
// whose clock runs an hour ahead wins the edits made while apart, but a
// change made after seeing its state wins over it (the clock moves past
// every stamp it has seen); nothing either did alone is lost.
func TestMerge_convergesLastWriterWinsWithAClockAhead(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, order := range []string{"a first", "b first"} {
		a, b := newNode(t, t0), newNode(t, t0.Add(time.Hour)) // b's clock lies by an hour
		a.local("allow/same.example", "1")
		a.local("allow/only-a.example", "1")
		a.now = a.now.Add(time.Minute)
		b.local("allow/same.example", "")
		b.local("allow/only-b.example", "1")
		a.now = a.now.Add(time.Minute)
		a.local("pause/all", "2026-12-03T13:00:00Z")
		if order == "a first" {
			a.s.Merge(b.s.State().Entries)
			b.s.Merge(a.s.State().Entries)
		} else {
			b.s.Merge(a.s.State().Entries)
			a.s.Merge(b.s.State().Entries)
		}
		if da, db := a.s.State().Digest, b.s.State().Digest; da != db {
			t.Fatalf("%s: digests differ:\n%v\n%v", order, a.s.State().Entries, b.s.State().Entries)
		}
		for k, want := range map[string]string{"allow/same.example": "", "allow/only-a.example": "1", "allow/only-b.example": "1", "pause/all": "2026-12-03T13:00:00Z"} {
			if a.state[k] != want || b.state[k] != want {
				t.Errorf("%s: %s is %q on a and %q on b, want %q", order, k, a.state[k], b.state[k], want)
			}
		}
		// After seeing b's stamps, a's next change wins though a's wall
		// clock is an hour behind b's.
		a.now = a.now.Add(time.Minute)
		a.local("allow/same.example", "1")
		b.s.Merge(a.s.State().Entries)
		if b.state["allow/same.example"] != "1" {
			t.Errorf("%s: a change made after the merge lost to an older one from a clock ahead", order)
		}
	}
}

// The state survives a restart: a node down for a day gives and takes
// every change when it is back; a garbage or unknown key changes nothing.
func TestStore_persistsAndIgnoresWhatItCannotApply(t *testing.T) {
	dir := t.TempDir()
	applied := map[string]string{}
	apply := func(k, v string) bool {
		if k == "nonsense" {
			return false
		}
		applied[k] = v
		return true
	}
	s, err := Open(dir, apply, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Local("allow/kept.example", "1")
	digest, node := s.State().Digest, s.Node()
	s2, err := Open(dir, apply, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s2.State().Digest != digest || s2.Node() != node {
		t.Error("the state or the node id changed across a restart")
	}
	if won := s2.Merge([]Entry{{Key: "nonsense", Value: "x", Stamp: Stamp{Wall: 1 << 50, Node: "zz"}}}); won != 0 || s2.State().Digest != digest {
		t.Error("a key the engine refused entered the state")
	}
}

// A peer that is not nxdns (a web page), one that refuses the token, and
// one that points back at this node leave the state as it is and show
// the reason in the status; a real peer's state is merged, and the peer
// shown in sync once both hold the same.
func TestPull_badPeersChangeNothingAndSayWhy(t *testing.T) {
	a := newNode(t, time.Now())
	a.local("allow/mine.example", "1")
	digest := a.s.State().Digest
	b := newNode(t, time.Now())
	b.local("allow/theirs.example", "1")
	serve := func(h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	html := serve(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>router login</html>") })
	refused := serve(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"unknown API token"}`, http.StatusUnauthorized)
	})
	self := serve(func(w http.ResponseWriter, r *http.Request) { a.s.Handler().ServeHTTP(w, r) })
	huge := serve(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"node":"<b>%s</b>","digest":"d","entries":[]}`, strings.Repeat("x", 1<<20))
	})
	real := serve(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		b.s.Handler().ServeHTTP(w, r)
	})
	c := &http.Client{Timeout: 5 * time.Second}
	for _, u := range []string{html, refused, self, huge, real} {
		a.s.status[u] = &PeerStatus{URL: u}
		a.s.pull(t.Context(), c, Peer{URL: u, Token: "t"})
		if u != real && a.s.State().Digest != digest {
			t.Fatalf("the peer at %s changed the state", u)
		}
	}
	// In sync once the peer has taken ours too (it pulls as well).
	b.s.Merge(a.s.State().Entries)
	a.s.pull(t.Context(), c, Peer{URL: real, Token: "t"})
	why := map[string]string{}
	for _, p := range a.s.Status() {
		why[p.URL] = p.Error
		if p.URL == real && (!p.InSync || p.Error != "") {
			t.Errorf("the real peer: %+v, want in sync", p)
		}
	}
	for u, want := range map[string]string{html: "not an nxdns peer state", refused: "401", self: "peer-node-id was copied from this node", huge: "node id"} {
		if !strings.Contains(why[u], want) {
			t.Errorf("peer %s: error %q, want it to say %q", u, why[u], want)
		}
	}
	if a.state["allow/theirs.example"] != "1" {
		t.Error("the real peer's change was not applied")
	}
}

// A peer that sends a stamp with the counter at its top (a lying or broken
// peer: a real one never makes 2^32 changes in a millisecond) does not
// wrap this node's clock round: a change made here after seeing it still
// wins, on both nodes, rather than being undone at the next pull.
func TestMerge_counterAtItsTopDoesNotWrapTheClock(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	a, b := newNode(t, t0), newNode(t, t0)
	b.state["allow/x.example"] = "1" // the lying peer's value
	a.s.Merge([]Entry{{Key: "allow/x.example", Value: "1", Stamp: Stamp{Wall: t0.UnixMilli(), Seq: math.MaxUint32, Node: b.s.Node()}}})
	a.local("allow/x.example", "")
	b.s.Merge(a.s.State().Entries)
	a.s.Merge([]Entry{{Key: "allow/x.example", Value: "1", Stamp: Stamp{Wall: t0.UnixMilli(), Seq: math.MaxUint32, Node: b.s.Node()}}})
	if a.state["allow/x.example"] != "" || b.state["allow/x.example"] != "" {
		t.Errorf("a's later change: %q on a, %q on b; want \"\" on both", a.state["allow/x.example"], b.state["allow/x.example"])
	}
}

// What a peer sends is bounded per entry (a key as long as a name's, a
// short value and node id), so a peer that is not nxdns, or lies, cannot
// grow the kept state past what Open reads back: after it filled the table
// with the longest entries it may send, a restart still opens the state.
// An entry past the bounds is not taken.
func TestMerge_peerEntriesAreBoundedSoTheStateOpensAgain(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, func(string, string) bool { return true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	long := []Entry{
		{Key: "pause/client/" + strings.Repeat("x", 4000), Value: "1", Stamp: Stamp{Wall: 1, Node: "b"}},
		{Key: "allow/x.example", Value: strings.Repeat("1", 4000), Stamp: Stamp{Wall: 1, Node: "b"}},
		{Key: "allow/y.example", Value: "1", Stamp: Stamp{Wall: 1, Node: strings.Repeat("b", 4000)}},
	}
	if won := s.Merge(long); won != 0 {
		t.Errorf("%d entries past the bounds taken", won)
	}
	var in []Entry
	for i := range maxEntries {
		key := fmt.Sprintf("pause/client/%0*d", maxKey-len("pause/client/"), i)
		in = append(in, Entry{Key: key, Value: "2026-12-03T12:00:00.123456789Z", Stamp: Stamp{Wall: 1 << 50, Seq: math.MaxUint32, Node: strings.Repeat("b", maxNode)}})
	}
	if won := s.Merge(in); won != maxEntries {
		t.Fatalf("%d of %d entries at the bounds taken", won, maxEntries)
	}
	if _, err := Open(dir, func(string, string) bool { return true }, nil); err != nil {
		t.Fatalf("the state a peer filled does not open again: %v", err)
	}
}
