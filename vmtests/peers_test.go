package vmtests

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/testutil"
)

// link is a TCP relay on a fixed loopback port standing in for the
// network between two Pis: down closes it and every connection through it,
// up listens again on the same port.
type link struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
}

func newLink(t *testing.T, target string) *link {
	l := &link{addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), target: target}
	l.up(t)
	t.Cleanup(l.down)
	return l
}

func (l *link) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.ln = ln
	l.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", l.target)
			if err != nil {
				c.Close()
				continue
			}
			l.mu.Lock()
			l.conns = append(l.conns, c, d)
			l.mu.Unlock()
			go func() { io.Copy(d, c); d.Close() }()
			go func() { io.Copy(c, d); c.Close() }()
		}
	}()
}

func (l *link) down() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		l.ln.Close()
		l.ln = nil
	}
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

func (p *nxdnsProc) allowed(t *testing.T) []string {
	t.Helper()
	resp, err := http.Get("http://" + p.web + "/api/filter/allow")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct{ Names []string }
	json.NewDecoder(resp.Body).Decode(&a)
	return a.Names
}

// stamp is the wall time (unix ms) of key's stamp in p's replicated state.
func (p *nxdnsProc) stamp(t *testing.T, key string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + p.web + "/api/peers/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Entries []struct {
			Key   string
			Stamp struct{ Wall int64 }
		}
	}
	json.NewDecoder(resp.Body).Decode(&st)
	for _, e := range st.Entries {
		if e.Key == key {
			return e.Stamp.Wall
		}
	}
	t.Fatalf("no %s in the replicated state", key)
	return 0
}

func (p *nxdnsProc) do(t *testing.T, method, path string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+p.web+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s", method, path, resp.Status)
	}
}

// Two nxdns with each other as [[peers]], the link between them a relay:
// a name allowed on one is allowed on the other; with the link down both
// take conflicting actions (one allows a name the other allows and then
// removes, each allows one of its own, one pauses a client); once the
// link is up they end in the same state, the later action winning the
// conflict, and neither loses an action of its own. /api/peers and the
// dashboard's Peers page say when they are in sync.
func TestPeers_twoNxdnsConvergeAfterThePartitionWithoutLosingAnAction(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0")
	webA, webB := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	toA, toB := newLink(t, webA), newLink(t, webB)
	dirA, dirB := t.TempDir(), t.TempDir()
	token := func(stateDir, file string) string {
		out, err := exec.Command(nxdnsBinary, "token", "add", "peer", "--scope", "read", "--state-dir", stateDir).Output()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), file)
		if err := os.WriteFile(path, out, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tokA, tokB := token(dirA, "a.token"), token(dirB, "b.token") // A's token, held by B; B's, held by A
	start := func(web, stateDir, peer, tokenFile string) *nxdnsProc {
		return startNxdns(t, ca, settings{web: web, extra: fmt.Sprintf("[filter]\nstate_dir = %q\n[[peers]]\nurl = \"http://%s\"\ntoken_file = %q\n", stateDir, peer, tokenFile)}, up)
	}
	a := start(webA, dirA, toB.addr, tokB)
	b := start(webB, dirB, toA.addr, tokA)

	a.do(t, "POST", "/api/filter/allow?name=first.example")
	testutil.WaitFor(t, "the allow made on A on B", 20*time.Second, func() bool { return slices.Contains(b.allowed(t), "first.example") })

	toA.down()
	toB.down()
	a.do(t, "POST", "/api/filter/allow?name=same.example")
	a.do(t, "POST", "/api/filter/allow?name=only-a.example")
	b.do(t, "POST", "/api/filter/allow?name=same.example")
	b.do(t, "POST", "/api/filter/allow?name=only-b.example")
	b.do(t, "POST", "/api/filter/pause?minutes=30&client=192.168.1.30")
	// B's removal must be the later action by the wall clock (the one the
	// rule lets win): made in a later millisecond than A's allow.
	stampA := a.stamp(t, "allow/same.example")
	for time.Now().UnixMilli() <= stampA {
		runtime.Gosched()
	}
	b.do(t, "DELETE", "/api/filter/allow?name=same.example")
	testutil.WaitFor(t, "a failed pull counted on A while the link is down", 20*time.Second, func() bool {
		return metric(a.metrics(t), "nxdns_peer_pulls_total", "result", "failed") > 0
	})
	if slices.Contains(b.allowed(t), "only-a.example") || slices.Contains(a.allowed(t), "only-b.example") {
		t.Fatal("a change crossed the link while it was down")
	}
	toA.up(t)
	toB.up(t)
	want := []string{"first.example", "only-a.example", "only-b.example"}
	testutil.WaitFor(t, "both in the same state once joined", 30*time.Second, func() bool {
		return slices.Equal(a.allowed(t), want) && slices.Equal(b.allowed(t), want)
	})
	check := func(p *nxdnsProc) bool {
		resp, err := http.Get("http://" + p.web + "/api/filter/check?name=games.example&client=192.168.1.30")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"paused":true`)
	}
	testutil.WaitFor(t, "B's pause of a client on A too", 10*time.Second, func() bool { return check(a) && check(b) })
	testutil.WaitFor(t, "/api/peers in sync on both", 20*time.Second, func() bool {
		for _, p := range []*nxdnsProc{a, b} {
			resp, err := http.Get("http://" + p.web + "/api/peers")
			if err != nil {
				return false
			}
			var st struct {
				Peers []struct {
					InSync bool `json:"in_sync"`
				}
			}
			json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if len(st.Peers) != 1 || !st.Peers[0].InSync {
				return false
			}
		}
		return true
	})
	for _, p := range []*nxdnsProc{a, b} {
		if f := p.metrics(t); metric(f, "nxdns_peer_in_sync") != 1 || metric(f, "nxdns_peer_changes_total") < 1 {
			t.Errorf("in sync %v, changes taken %v", metric(f, "nxdns_peer_in_sync"), metric(f, "nxdns_peer_changes_total"))
		}
	}
	// The dashboard's Peers page says so too.
	resp, err := http.Get("http://" + a.web + "/peers")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), toB.addr) || !strings.Contains(string(page), "<td>yes</td>") {
		t.Errorf("the Peers page does not show the peer in sync:\n%s", page)
	}
}
