package server

import (
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// keepaliveUnit is RFC 7828's unit of the edns-tcp-keepalive timeout.
const keepaliveUnit = 100 * time.Millisecond

// addKeepalive advertises the idle bound on a TCP or DoT answer (RFC 7828
// §3.3.2: a server may send the option in answer to any query with an OPT
// over TCP), so a client that honours it closes or reuses its connection
// knowing when nxdns would close it. Never on UDP (§3.2.1) nor DoH, where
// the HTTP layer owns the connection (RFC 8484 §5.3 lets servers ignore it).
func addKeepalive(o *dns.OPT, p query.Proto) {
	if p != query.TCP && p != query.DoT {
		return
	}
	o.Option = append(o.Option, &dns.EDNS0_TCP_KEEPALIVE{
		Code:    dns.EDNS0TCPKEEPALIVE,
		Timeout: uint16(tcpIdleTimeout / keepaliveUnit),
	})
}
