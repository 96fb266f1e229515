package buildinfo

import (
	"strings"
	"testing"
)

func TestStampWins(t *testing.T) {
	old, oldC := Version, Commit
	t.Cleanup(func() { Version, Commit = old, oldC })
	Version, Commit = "1.2.3", "0123456789abcdef0123"
	i := Get()
	if i.Version != "1.2.3" {
		t.Errorf("version = %q, want the stamped 1.2.3", i.Version)
	}
	if i.Commit != "0123456789ab" {
		t.Errorf("commit = %q, want the stamp shortened to 12", i.Commit)
	}
	if !strings.HasPrefix(i.String(), "nxdns 1.2.3 (commit 0123456789ab") {
		t.Errorf("String() = %q", i.String())
	}
}

func TestFallbackNeverEmpty(t *testing.T) {
	old, oldC := Version, Commit
	t.Cleanup(func() { Version, Commit = old, oldC })
	Version, Commit = "", ""
	i := Get()
	if i.Version == "" || i.Commit == "" || i.Go == "" {
		t.Fatalf("unstamped build info has empty fields: %+v", i)
	}
}
