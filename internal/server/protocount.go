package server

import (
	"sync/atomic"

	"github.com/nxdns/nxdns/internal/query"
)

// protoNames are the transports counted, in the order ProtoCount lists them.
var protoNames = [...]query.Proto{query.UDP, query.TCP, query.DoT, query.DoH, query.DoQ, query.DoH3}

// protoCounts counts queries by the transport they arrived on (docs/design.md#tls-serving:
// queries per proto in the metrics).
type protoCounts [len(protoNames)]atomic.Uint64

func (c *protoCounts) count(p query.Proto) {
	for i, q := range protoNames {
		if q == p {
			c[i].Add(1)
			return
		}
	}
}

// ProtoCount is the number of queries that arrived over one transport.
type ProtoCount struct {
	Proto string // udp, tcp, dot, doh, doq, h3
	Count uint64
}

func (c *protoCounts) snapshot() []ProtoCount {
	out := make([]ProtoCount, len(protoNames))
	for i, p := range protoNames {
		out[i] = ProtoCount{Proto: p.String(), Count: c[i].Load()}
	}
	return out
}
