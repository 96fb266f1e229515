package devices

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/query"
)

// An acknowledgement replicates (docs/how-to/two-pis.md, "Replication"):
// Ack tells the hook once; on a second registry the replicated key
// acknowledges a device it has seen as new, and one it has never seen is
// not new at its first query there — the two Pis are the LAN's two DNS
// servers, so a device asks both. Applying tells no hook (a peer's change
// is not sent back), is kept in the devices file, and a key that is no
// device key is refused.
func TestReplicate_ackOnOneIsAckOnTheOther(t *testing.T) {
	a, b := NewRegistry(nil), NewRegistry(nil)
	dir := t.TempDir()
	if err := b.UseStateDir(dir); err != nil {
		t.Fatal(err)
	}
	var told, echoed []string
	a.OnChange(func(k, v string) { told = append(told, k+"="+v) })
	b.OnChange(func(k, v string) { echoed = append(echoed, k+"="+v) })
	va, vb := NewView(a, ViewOptions{}), NewView(b, ViewOptions{})
	ask := func(v *View, mac string) bool {
		ev := &query.Event{Client: netip.MustParseAddr("192.168.1.5"), ClientMAC: mac}
		v.Identify(ev)
		return ev.NewDevice
	}
	const seen, unseen = "02:00:5e:00:00:0a", "02:00:5e:00:00:0b"
	ask(va, seen)
	ask(va, unseen)
	if !ask(vb, seen) {
		t.Fatal("a first-seen device is not new on b")
	}
	a.Ack("mac:" + seen)
	a.Ack(seen) // a MAC alone is no key: nothing
	a.Ack("mac:" + seen)
	a.Ack("mac:" + unseen)
	want := []string{"device/mac:" + seen + "=1", "device/mac:" + unseen + "=1"}
	if strings.Join(told, " ") != strings.Join(want, " ") {
		t.Fatalf("told %v, want %v (once per acknowledgement)", told, want)
	}
	for _, kv := range told {
		k, v, _ := strings.Cut(kv, "=")
		if !b.ApplyReplicated(k, v) {
			t.Errorf("ApplyReplicated(%q) refused", kv)
		}
	}
	if len(echoed) != 0 {
		t.Errorf("applying told the hook: %v", echoed)
	}
	if ask(vb, seen) || ask(vb, unseen) {
		t.Error("a device acknowledged on the peer is new here")
	}
	for _, k := range []string{"device/" + seen, "device/mac:zz", "allow/x.example", "device/id:"} {
		if b.ApplyReplicated(k, "1") {
			t.Errorf("ApplyReplicated(%q) accepted", k)
		}
	}
	if b.ApplyReplicated("device/mac:"+seen, "0") {
		t.Error("a value other than 1 accepted")
	}
	b.Close()
	f, _ := os.ReadFile(filepath.Join(dir, DevicesFile))
	for _, mac := range []string{seen, unseen} {
		if !strings.Contains(string(f), "mac:"+mac+" ") || strings.Contains(string(f), "mac:"+mac+" 0") {
			t.Errorf("the devices file does not keep %s acknowledged:\n%s", mac, f)
		}
	}
}
