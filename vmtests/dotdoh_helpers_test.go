package vmtests

import (
	"crypto/tls"

	"github.com/miekg/dns"
)

func tlsClientConfig(n *tlsNode) *tls.Config {
	return &tls.Config{RootCAs: n.ca.Pool(), ServerName: "dns.home.test"}
}

func peerSerial(c *dns.Conn) string {
	return c.Conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
}
