package upstream

import (
	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/wireform"
)

// packQUIC is packPadded for the QUIC transports (DoQ, DoH over HTTP/3):
// the query's OPT record advertises 65535 bytes, the largest message a
// stream carries, instead of the 1232 the handler chose for UDP paths.
// RFC 9250 §4.6 has DoQ ignore the EDNS UDP size, and nothing is cut to a
// datagram over HTTP/3 either; but CoreDNS (v1.15.0) sizes its DoQ and DoH3
// answers by it as if they went over UDP and sets TC above it, an answer
// every stream transport refuses (ValidateStream), so any name whose answer
// exceeded 1232 bytes failed against such a server and counted against its
// health (docs/upstream-pool.md "DNS over QUIC (DoQ)"). m is not changed:
// the size is set in the packed copy.
func packQUIC(m *dns.Msg) ([]byte, error) {
	wire, err := packPadded(m)
	if err != nil {
		return nil, err
	}
	wireform.SetUDPSize(wire, dns.MaxMsgSize)
	return wire, nil
}
