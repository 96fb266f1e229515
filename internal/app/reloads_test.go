package app

import (
	"testing"
)

// TestReload_outcomesCounted: a rejected file and an applied one each count
// once under their outcome, and only an applied one moves the generation
// and its timestamp (issue 16, finding 19).
func TestReload_outcomesCounted(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	a := r.start(t, r.config(t, addr, false))
	start := a.configState()
	if start.Generation != 1 || start.LoadedAt.IsZero() {
		t.Fatalf("at start: %+v, want generation 1 with a load time", start)
	}
	if err := a.ReloadFile(r.write(t, "bogus = 1\n")); err == nil {
		t.Fatal("a bad file reloaded")
	}
	s := a.configState()
	if s.ReloadsFailed != 1 || s.ReloadsOK != 0 || !s.LastFailed || s.Generation != 1 || s.LoadedAt != start.LoadedAt {
		t.Fatalf("after a rejected reload: %+v", s)
	}
	if err := a.Reload(r.config(t, addr, true)); err != nil {
		t.Fatal(err)
	}
	s = a.configState()
	if s.ReloadsFailed != 1 || s.ReloadsOK != 1 || s.LastFailed || s.Generation != 2 || !s.LoadedAt.After(start.LoadedAt) {
		t.Fatalf("after an applied reload: %+v", s)
	}

	fams, err := a.registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range fams {
		if mf.GetName() != "nxdns_config_reloads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if got["success"] != 1 || got["failure"] != 1 {
		t.Errorf("nxdns_config_reloads_total = %v, want success 1, failure 1", got)
	}
}
