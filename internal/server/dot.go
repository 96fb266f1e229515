package server

import (
	"crypto/tls"
	"net"

	"github.com/nxdns/nxdns/internal/query"
)

// admitDoT takes a DoT connection (RFC 7858) under the access list and the
// TCP cap, then serves it with the plain TCP connection code (tcpconn.go)
// over TLS: RFC 7766 framing, pipelining with answers out of order, the
// idle, read and write bounds. The connection is tracked before its
// handshake, so stopping the listener cuts a handshake in progress too.
func (s *Server) admitDoT(l *listener, c *net.TCPConn) {
	fc := &s.tls.stats.dot
	client, release, ok := s.admitStream(c, fc)
	if !ok {
		return
	}
	tc := tls.Server(c, s.tls.dotConf)
	conn := newTCPConn(s, l, tc, client, query.DoT)
	l.serveConn(conn, c, release, func() {
		if s.handshake(l, tc, fc) != nil {
			conn.close()
			return
		}
		if !s.dotClientID(conn, tc.ConnectionState().ServerName) {
			conn.close()
			return
		}
		conn.serve()
	})
}
