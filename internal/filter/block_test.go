package filter

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// TestBlock_fromTheDashboardForEveryClient: a name blocked at run time is
// blocked, with the names below it, for a client in no group and one in
// a group, over the configuration's allowlist; the check says why; the
// dashboard's own allow wins; Unblock undoes it; a restart keeps it.
func TestBlock_fromTheDashboardForEveryClient(t *testing.T) {
	cfg := filterCfg(t)
	cfg.Filter.StateDir = t.TempDir()
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)

	for _, name := range []string{"video.example.", "ok.tracker.example."} {
		if _, ev := ask(t, s, &next{}, "10.9.9.9", name, dns.TypeA); ev.Source == query.SourceBlocked {
			t.Fatalf("%s blocked before the block", name)
		}
		if _, added, err := e.Block(strings.ToUpper(name)); err != nil || !added {
			t.Fatalf("Block(%s): %v %v", name, added, err)
		}
	}
	for _, client := range []string{"10.9.9.9", "192.168.1.5"} {
		for _, name := range []string{"video.example.", "cdn.video.example.", "ok.tracker.example."} {
			n := &next{}
			resp, ev := ask(t, s, n, client, name, dns.TypeA)
			if ev.Source != query.SourceBlocked || n.got != 0 || ev.Filter.List != DashboardList {
				t.Errorf("%s for %s: source %s, forwarded %d, list %q", name, client, ev.Source, n.got, ev.Filter.List)
			}
			if resp == nil || len(resp.Answer) != 1 {
				t.Errorf("%s: want the null answer, got %v", name, resp)
			}
		}
	}
	if s.Passes(&query.Event{Name: "video.example.", Qclass: dns.ClassINET, Client: netip.MustParseAddr("10.9.9.9")}, nil) {
		t.Error("a cached answer of a blocked name passes")
	}
	d := s.Check("cdn.video.example", netip.MustParseAddr("10.9.9.9"), "", time.Now())
	if !d.Blocked || d.List != DashboardList || d.Rule != "||video.example^" || !strings.HasPrefix(d.Explanation, "blocked from the dashboard") {
		t.Errorf("check: %+v", d)
	}

	// The dashboard's allow of a name below wins over the block.
	if _, _, err := e.Allow("cdn.video.example"); err != nil {
		t.Fatal(err)
	}
	if _, ev := ask(t, s, &next{}, "10.9.9.9", "cdn.video.example.", dns.TypeA); ev.Source == query.SourceBlocked {
		t.Error("an allowed name below a blocked one is still blocked")
	}

	restarted := newEngine(t, cfg.Filter)
	if got := restarted.BlockedNames(); !slices.Equal(got, []string{"ok.tracker.example", "video.example"}) {
		t.Fatalf("after a restart: %v", got)
	}
	if _, removed, err := restarted.Unblock("video.example"); err != nil || !removed {
		t.Fatalf("Unblock: %v %v", removed, err)
	}
	if _, ev := ask(t, restarted.NewStage(cfg, time.UTC), &next{}, "10.9.9.9", "video.example.", dns.TypeA); ev.Source == query.SourceBlocked {
		t.Error("still blocked after Unblock")
	}
	b, err := os.ReadFile(filepath.Join(cfg.Filter.StateDir, BlockFile))
	if err != nil || !strings.HasPrefix(string(b), "# Names blocked from the nxdns dashboard") || strings.Contains(string(b), "\nvideo.example\n") {
		t.Errorf("%s: %q %v", BlockFile, b, err)
	}
}

// TestBlock_badInput: markup and sentences are no names; past MaxAllowed
// names the next block is refused and nothing is lost.
func TestBlock_badInput(t *testing.T) {
	cfg := filterCfg(t)
	e := newEngine(t, cfg.Filter)
	for _, bad := range []string{"<script>alert(1)</script>", "not a name", "", "a..b"} {
		if _, _, err := e.Block(bad); err == nil {
			t.Errorf("Block(%q) accepted", bad)
		}
	}
	// A full file, as ten thousand clicks over the months leave it (each
	// click copies the set: a household's rate, not a loop's).
	cfg.Filter.StateDir = t.TempDir()
	var full strings.Builder
	for i := range MaxAllowed {
		fmt.Fprintf(&full, "n%d.example\n", i)
	}
	if err := os.WriteFile(filepath.Join(cfg.Filter.StateDir, BlockFile), []byte(full.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	e = newEngine(t, cfg.Filter)
	if n := len(e.BlockedNames()); n != MaxAllowed {
		t.Fatalf("%d names loaded from the full file, want %d", n, MaxAllowed)
	}
	if _, _, err := e.Block("one-more.example"); err != ErrBlockFull {
		t.Fatalf("block past the cap: %v, want ErrBlockFull", err)
	}
	if n := len(e.BlockedNames()); n != MaxAllowed {
		t.Fatalf("%d names after the refused one, want %d", n, MaxAllowed)
	}
}
