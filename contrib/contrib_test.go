// Package contrib holds what runs beside nxdns rather than in it: the
// Grafana dashboard (grafana/nxdns.json) and the Prometheus alert rules
// (prometheus/nxdns-rules.yml), which the NixOS module can provision. The
// tests here check that every series they query is one nxdns exports;
// .ci/monitoring.sh checks the rules with promtool.
package contrib

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/metrics"
)

const (
	dashboardFile = "grafana/nxdns.json"
	rulesFile     = "prometheus/nxdns-rules.yml"
	metricsDoc    = "../docs/reference/metrics.md"
)

// pending are series of docs/design.md#cache, docs/design.md#filtering, docs/design.md#tls-serving and docs/design.md#metrics that the dashboard and
// the rules use before docs/reference/metrics.md documents them (they are
// being built on other branches). A name documented since must leave this
// list: the test fails until it does, so the list never hides a typo.
var pending = []string{}

// known is every series name nxdns exports: the reference's "### `name`"
// headings, and the runtime and process series of the real registry.
func known(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^### `([a-z0-9_]+)`$").FindAllStringSubmatch(string(doc), -1) {
		out[m[1]] = true
	}
	if len(out) < 15 {
		t.Fatalf("only %d series documented in %s: the reader is broken", len(out), metricsDoc)
	}
	families, err := metrics.New(metrics.Sources{}).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		out[f.GetName()] = true
	}
	return out
}

// seriesRE finds the series names of nxdns and of the Go client's runtime
// and process collectors in a PromQL expression.
var seriesRE = regexp.MustCompile(`\b(?:nxdns|process|go)_[a-z0-9_]+\b`)

// series returns the names an expression reads, a histogram's _bucket, _sum
// and _count reduced to its name when that is what is known.
func series(expr string, known map[string]bool) []string {
	var out []string
	for _, n := range seriesRE.FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && known[base] {
				n = base
			}
		}
		out = append(out, n)
	}
	return out
}

// dashboardExprs returns every target expression of the dashboard, by panel
// title.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	out := map[string][]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[p.Title] = append(out[p.Title], tg.Expr)
		}
	}
	return out
}

// ruleExprs returns every rule's expression, by alert name. The file is
// written in one shape — `- alert: NAME` then `expr:` on one line or as a
// folded block — which is all this reads (promtool checks the YAML itself).
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	alert := ""
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if name, ok := strings.CutPrefix(l, "- alert: "); ok {
			alert = name
			continue
		}
		v, ok := strings.CutPrefix(l, "expr: ")
		if !ok || alert == "" {
			continue
		}
		if v == ">-" || v == "|" || v == ">" {
			indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
			var parts []string
			for i+1 < len(lines) && len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) > indent {
				i++
				parts = append(parts, strings.TrimSpace(lines[i]))
			}
			v = strings.Join(parts, " ")
		}
		out[alert] = v
	}
	return out
}

// TestMonitoring_queriesOnlySeriesNxdnsExports: every series the dashboard
// and the alert rules read is documented or registered (or pending, and then
// not yet documented).
func TestMonitoring_queriesOnlySeriesNxdnsExports(t *testing.T) {
	k := known(t)
	exprs := map[string]string{}
	for title, es := range dashboardExprs(t) {
		for _, e := range es {
			exprs["dashboard panel "+title+": "+e] = e
		}
	}
	for alert, e := range ruleExprs(t) {
		exprs["alert "+alert+": "+e] = e
	}
	if len(exprs) < 20 {
		t.Fatalf("only %d expressions read: the readers are broken", len(exprs))
	}
	used := map[string]bool{}
	for where, e := range exprs {
		names := series(e, k)
		if len(names) == 0 {
			t.Errorf("%s reads no nxdns series", where)
		}
		for _, n := range names {
			used[n] = true
			if !k[n] && !slices.Contains(pending, n) {
				t.Errorf("%s reads %s, which nxdns does not export (not in %s, not registered)", where, n, metricsDoc)
			}
		}
	}
	for _, n := range pending {
		if k[n] {
			t.Errorf("%s is documented now: remove it from pending in contrib_test.go", n)
		}
		if !used[n] {
			t.Errorf("%s is pending but nothing reads it: remove it from pending", n)
		}
	}
}

// TestSeries_readsNames: the name reader finds histogram families, runtime
// series and pending ones, and nothing in label values or functions.
func TestSeries_readsNames(t *testing.T) {
	k := map[string]bool{"nxdns_query_duration_seconds": true}
	got := series(`histogram_quantile(0.95, sum by (le) (rate(nxdns_query_duration_seconds_bucket{job="nxdns_x"}[5m]))) + time() - process_start_time_seconds`, k)
	want := []string{"nxdns_query_duration_seconds", "nxdns_x", "process_start_time_seconds"}
	if !slices.Equal(got, want) {
		t.Errorf("series = %q, want %q", got, want)
	}
}

// TestRules_coverTheIssue: the alerts docs/design.md#nixos-module and issue 16 ask for exist:
// an upstream in backoff for 10 minutes, budget exhaustion, listener drops,
// list refresh failures, certificate expiry, reload failures.
func TestRules_coverTheIssue(t *testing.T) {
	rules := ruleExprs(t)
	want := map[string]string{
		"NxdnsUpstreamInBackoff":        "nxdns_upstream_backoff",
		"NxdnsBudgetExhausted":          "nxdns_upstream_budget_exhausted_total",
		"NxdnsBudgetExhaustionRateHigh": "nxdns_upstream_budget_exhausted_total",
		"NxdnsListenerDrops":            "nxdns_listener_dropped_total",
		"NxdnsFilterListRefreshFailing": "nxdns_filter_list_refresh_failures_total",
		"NxdnsCertificateExpiresSoon":   "nxdns_tls_cert_expiry_timestamp_seconds",
		"NxdnsConfigReloadFailed":       "nxdns_config_reloads_total",
	}
	for alert, metric := range want {
		if e, ok := rules[alert]; !ok || !strings.Contains(e, metric) {
			t.Errorf("alert %s reading %s: got %q", alert, metric, e)
		}
	}
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(b), "- alert: NxdnsUpstreamInBackoff\n")
	if block, _, _ := strings.Cut(after, "- alert:"); !strings.Contains(block, "for: 10m") {
		t.Errorf("NxdnsUpstreamInBackoff does not wait 10 minutes:\n%s", block)
	}
}

// TestDashboard_isProvisionable: what Grafana's file provisioning needs — a
// uid, unique panel ids, every query on the dashboard's data-source variable
// (so it works with whatever the Prometheus data source is called).
func TestDashboard_isProvisionable(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name, Type string
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []json.RawMessage `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" {
		t.Error("no uid: a provisioned dashboard needs one to keep its URL")
	}
	if !slices.ContainsFunc(d.Templating.List, func(v struct{ Name, Type string }) bool {
		return v.Name == "datasource" && v.Type == "datasource"
	}) {
		t.Error("no datasource variable")
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %+v, %d targets; want ${datasource} and a query", p.Title, p.Datasource, len(p.Targets))
		}
	}
}
