package server

import (
	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/query"
)

// logQuery writes the query's one line (SPEC §9 "Logs") at Info on the
// "server.query" logger. Fields that have no value are left out rather than
// filled with a placeholder: no client_name when none is known, no upstream
// when none is attributed (SPEC §4.4: never a fake identity), no ede when
// none was sent, no name or type when the question did not parse.
func (s *Server) logQuery(e *query.Event) {
	ce := s.qlog.Check(zap.InfoLevel, "query")
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 16)
	fields = append(fields, zap.String("client", e.Client.String()))
	if e.ClientName != "" {
		fields = append(fields, zap.String("client_name", e.ClientName))
	}
	if e.Name != "" {
		fields = append(fields, zap.String("name", e.Name), zap.String("type", dns.Type(e.Qtype).String()))
	}
	fields = append(fields,
		zap.String("proto", e.Proto.String()),
		zap.String("rcode", rcodeLabel(rcodeSlot(e.Rcode))),
		zap.String("source", e.Source),
	)
	if e.Upstream != "" {
		fields = append(fields, zap.String("upstream", e.Upstream))
	}
	if len(e.Tried) > 1 || len(e.Tried) == 1 && e.Tried[0] != e.Upstream {
		// Every upstream tried, in order (SPEC §4.4), when that says more
		// than upstream does: a failover, or a failure attributed to none.
		fields = append(fields, zap.Strings("tried", e.Tried))
	}
	if a := query.Summary(e.Reply); a != "" {
		fields = append(fields, zap.String("answer", a))
	}
	// Microsecond resolution: a cached or LAN answer takes well under 1 ms.
	fields = append(fields, zap.Float64("duration_ms", float64(e.Duration.Microseconds())/1000))
	if e.EDE != nil {
		fields = append(fields, zap.Uint16("ede", e.EDE.Code))
	}
	if e.Filter.Blocked {
		fields = append(fields, zap.String("list", e.Filter.List), zap.String("rule", e.Filter.Rule))
		if e.Filter.Group != "" {
			fields = append(fields, zap.String("group", e.Filter.Group))
		}
	}
	ce.Write(fields...)
}
