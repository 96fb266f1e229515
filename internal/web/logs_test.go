package web

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/logging"
	nxquery "github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/upstream"
)

const logsReference = "../../docs/reference/logs.md"

// lineRE is a journal-mode line: "<6>INFO server.query query {...}".
var lineRE = regexp.MustCompile(`^<(\d)>([A-Z]+) (\S+) (.+?) (\{.*\})$`)

// logLine is one parsed line.
type logLine struct {
	priority, level, logger, message string
	fields                           map[string]any
}

func parseLine(t *testing.T, line string) logLine {
	t.Helper()
	m := lineRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("line %q does not have the journal shape <N>LEVEL logger message {json}", line)
	}
	l := logLine{priority: m[1], level: m[2], logger: m[3], message: m[4]}
	if err := json.Unmarshal([]byte(m[5]), &l.fields); err != nil {
		t.Fatalf("line %q: the fields are not one JSON object (jq could not read them): %v", line, err)
	}
	return l
}

type namesFunc func(netip.Addr) string

func (f namesFunc) Name(a netip.Addr) string { return f(a) }

// TestLogsReference_matchesRealLines produces the query line (every field
// present) and both backoff episode lines through the real server and pool,
// with the journald logger, and checks each against the example and field
// table docs/reference/logs.md gives for it: same priority, level, logger
// and message, and exactly the documented fields. A field added in code but
// not in the docs, or documented but gone, fails here.
func TestLogsReference_matchesRealLines(t *testing.T) {
	buf := new(lockedBuffer)
	log := logging.New(logging.Options{Level: zap.NewAtomicLevelAt(zap.InfoLevel), Journal: true, Out: buf})
	primary := newFake(dotURL)
	standby := newFake("tls://192.0.2.2:853") // both fail: the query line lists both as tried
	pool := newPool(t, upstream.Options{Attempt: time.Second, Total: 2 * time.Second, Logger: log}, primary, standby)
	srv := server.New(server.Options{Logger: log}, &server.State{
		Router:   router{pool: pool},
		Allow:    []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Names:    namesFunc(func(netip.Addr) string { return "laptop" }),
		Devices:  everyDeviceField{},
		QueryLog: true,
		Stages:   []nxquery.Stage{blockStage{}},
	})
	if err := srv.Listen([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	udp, _ := srv.Addrs()
	ask := func(name string) {
		q := newQuery(name)
		q.SetEdns0(1232, false) // an EDNS client, so SERVFAILs carry an EDE
		if _, _, err := (&dns.Client{Timeout: 10 * time.Second}).Exchange(q, udp[0].String()); err != nil {
			t.Fatal(err)
		}
	}
	primary.fails.Store(true)
	standby.fails.Store(true)
	for range 3 { // SERVFAIL with EDE 23; the third enters backoff
		ask("ok.example.")
	}
	primary.fails.Store(false)
	standby.fails.Store(false)
	ask("ok.example.")  // the last-resort pass answers: recovered
	ask("ads.example.") // a filter decision: list, rule and group
	// A query's line is written after its answer was sent (so an undelivered
	// answer is logged as such): wait for all five.
	testutil.WaitFor(t, "four query lines", 10*time.Second, func() bool { return strings.Count(buf.String(), "INFO server.query query ") >= 5 })

	seen := map[string]logLine{} // by "logger message", with the union of fields seen
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		l := parseLine(t, sc.Text())
		key := l.logger + " " + l.message
		if prev, ok := seen[key]; ok {
			maps.Copy(prev.fields, l.fields)
			continue
		}
		seen[key] = l
	}
	documented := readLogsReference(t)
	for _, key := range []string{"server.query query", "pool upstream entering backoff", "pool upstream recovered"} {
		got, ok := seen[key]
		if !ok {
			t.Errorf("the scenario wrote no %q line:\n%s", key, buf)
			continue
		}
		doc, ok := documented[key]
		if !ok {
			t.Errorf("%s has no example line for %q", logsReference, key)
			continue
		}
		if got.priority != doc.example.priority || got.level != doc.example.level {
			t.Errorf("%q: written as <%s>%s, documented as <%s>%s", key, got.priority, got.level, doc.example.priority, doc.example.level)
		}
		if gk, dk := slices.Sorted(maps.Keys(got.fields)), slices.Sorted(maps.Keys(doc.fields)); !slices.Equal(gk, dk) {
			t.Errorf("%q: written with fields %v, documented with %v", key, gk, dk)
		}
		for k := range doc.example.fields {
			if !doc.fields[k] {
				t.Errorf("%q: the example shows field %s, which the table does not document", key, k)
			}
		}
	}
	if strings.Contains(buf.String(), secretMarker) {
		t.Errorf("a log line shows the DoH token:\n%s", buf)
	}
}

// loggedLine is one documented line: its example and its field table.
type loggedLine struct {
	example logLine
	fields  map[string]bool
}

// readLogsReference reads every example line (in a code block, starting
// "<N>") and the field table after it, up to the next example or section.
func readLogsReference(t *testing.T) map[string]loggedLine {
	t.Helper()
	b, err := os.ReadFile(logsReference)
	if err != nil {
		t.Fatal(err)
	}
	rowRE := regexp.MustCompile("^\\| `([a-z_]+)` \\|")
	out := map[string]loggedLine{}
	var current string
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "<"):
			l := parseLine(t, line)
			current = l.logger + " " + l.message
			out[current] = loggedLine{example: l, fields: map[string]bool{}}
		case strings.HasPrefix(line, "## "):
			current = ""
		case current != "":
			if m := rowRE.FindStringSubmatch(line); m != nil {
				out[current].fields[m[1]] = true
			}
		}
	}
	return out
}

// everyDeviceField stands for the device view (internal/devices): it names
// every query's device with every field the query line can carry, as a
// new device behind a trusted forwarder that sent its MAC, with a ClientID.
type everyDeviceField struct{}

func (everyDeviceField) Identify(ev *nxquery.Event) {
	ev.ClientName, ev.ClientMAC, ev.ClientID = "laptop", "02:00:5e:00:53:01", "laptop"
	ev.Via, ev.NewDevice = netip.MustParseAddr("127.0.0.2"), true
}

// blockStage stands for the filter (internal/filter) on one name, so the
// scenario writes a query line with the decision's fields.
type blockStage struct{}

func (blockStage) Answer(ctx context.Context, r *nxquery.Request, next nxquery.Handler) (*dns.Msg, error) {
	if r.Msg.Question[0].Name != "ads.example." {
		return next.Answer(ctx, r)
	}
	r.Event.Source = nxquery.SourceBlocked
	r.Event.Filter = nxquery.Decision{Blocked: true, List: "ads", Rule: "ads.example", Group: "default"}
	resp := new(dns.Msg)
	resp.SetRcode(r.Msg, dns.RcodeNameError)
	return resp, nil
}
