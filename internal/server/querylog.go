package server

import (
	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/nxdns/nxdns/internal/query"
)

// logQuery writes the query's one line (docs/design.md#query-log) at Info on the
// "server.query" logger. Fields that have no value are left out rather than
// filled with a placeholder: no client_name when none is known, no upstream
// when none is attributed (docs/design.md#pool-attribution: never a fake identity), no ede when
// none was sent, no name or type when the question did not parse.
//
// The fields are written straight from the event (one inline field) rather
// than built as a slice of zap.Fields first: at cache-hit rates that slice
// was a tenth of the line's cost. The field holds the event, so the core
// must encode the line before Write returns, as zap's own cores do: a UDP
// fast hit's event may be overwritten by the next hit (fastPath.reuse).
func (s *Server) logQuery(e *query.Event) {
	if ce := s.qlog.Check(zap.InfoLevel, "query"); ce != nil {
		ce.Write(zap.Inline(eventLine{e}))
	}
}

// eventLine is the query-log line's fields, in their order.
type eventLine struct{ e *query.Event }

func (l eventLine) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	e := l.e
	enc.AddString("client", e.Client.String())
	if e.ClientName != "" {
		enc.AddString("client_name", e.ClientName)
	}
	addDevice(enc, e) // clientid.go
	if e.Name != "" {
		enc.AddString("name", e.Name)
		enc.AddString("type", dns.Type(e.Qtype).String())
	}
	enc.AddString("proto", e.Proto.String())
	enc.AddString("rcode", rcodeLabel(rcodeSlot(e.Rcode)))
	enc.AddString("source", e.Source)
	if e.Pool != "" { // a group's own upstreams (docs/filter.md "Per-group upstreams")
		enc.AddString("pool", e.Pool)
	}
	if e.Upstream != "" {
		enc.AddString("upstream", e.Upstream)
	}
	if len(e.Tried) > 1 || len(e.Tried) == 1 && e.Tried[0] != e.Upstream {
		// Every upstream tried, in order (docs/design.md#pool-classification), when that says more
		// than upstream does: a failover, or a failure attributed to none.
		if err := enc.AddArray("tried", stringArray(e.Tried)); err != nil {
			return err
		}
	}
	if e.Answer != "" { // record summarised the Reply
		enc.AddString("answer", e.Answer)
	}
	// Microsecond resolution: a cached or LAN answer takes well under 1 ms.
	enc.AddFloat64("duration_ms", float64(e.Duration.Microseconds())/1000)
	if e.EDE != nil {
		enc.AddUint16("ede", e.EDE.Code)
		if e.EDE.Text != "" {
			enc.AddString("ede_text", e.EDE.Text) // a DNSSEC verdict's "zone: reason" (docs/dnssec.md)
		}
	}
	if e.Filter.Blocked || e.Filter.SafeSearch != "" {
		enc.AddString("list", e.Filter.List)
		enc.AddString("rule", e.Filter.Rule)
		if e.Filter.Group != "" {
			enc.AddString("group", e.Filter.Group)
		}
	}
	// The household switches say what decided in words (docs/filter.md).
	if e.Filter.Service != "" {
		enc.AddString("reason", "blocked service: "+e.Filter.Service+inGroup(e.Filter.Group))
	} else if e.Filter.SafeSearch != "" {
		enc.AddString("reason", "safe search: "+e.Filter.SafeSearch+inGroup(e.Filter.Group))
	}
	return nil
}

// stringArray is a string list as a log array, as zap.Strings writes it.
type stringArray []string

func (ss stringArray) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, s := range ss {
		enc.AppendString(s)
	}
	return nil
}

// inGroup is a reason's mention of the group that decided.
func inGroup(g string) string {
	if g == "" {
		return ""
	}
	return " (group " + g + ")"
}
