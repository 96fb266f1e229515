package server

import (
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
)

// logQuery writes the query's one line (SPEC §9 "Logs") at Info on the
// "server.query" logger. Fields that have no value are left out rather than
// filled with a placeholder: no client_name when none is known, no upstream
// when none is attributed (SPEC §4.4: never a fake identity), no ede when
// none was sent, no name or type when the question did not parse.
func (s *Server) logQuery(q *query, d time.Duration) {
	ce := s.qlog.Check(zap.InfoLevel, "query")
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 11)
	fields = append(fields, zap.String("client", q.client.String()))
	if q.st.Names != nil {
		if name := q.st.Names.Name(q.client); name != "" {
			fields = append(fields, zap.String("client_name", name))
		}
	}
	if q.req != nil && len(q.req.Question) == 1 {
		qq := q.req.Question[0]
		fields = append(fields, zap.String("name", qq.Name), zap.String("type", dns.Type(qq.Qtype).String()))
	}
	proto := "udp"
	if q.tcp {
		proto = "tcp"
	}
	fields = append(fields,
		zap.String("proto", proto),
		zap.String("rcode", rcodeLabel(rcodeSlot(q.rcode))),
		zap.String("source", q.source),
	)
	if q.upstream != "" {
		fields = append(fields, zap.String("upstream", q.upstream))
	}
	// Microsecond resolution: a cached or LAN answer takes well under 1 ms.
	fields = append(fields, zap.Float64("duration_ms", float64(d.Microseconds())/1000))
	if q.ede != nil {
		fields = append(fields, zap.Uint16("ede", q.ede.InfoCode))
	}
	ce.Write(fields...)
}
