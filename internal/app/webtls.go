package app

import (
	"crypto/tls"
	"errors"

	"github.com/nxdns/nxdns/internal/config"
)

// webEndpoint is what the web endpoint binds: web.listen, and
// web.tls_listen for HTTPS beside it (docs/dashboard.md, "HTTPS"). A reload
// that changes neither keeps the running endpoint.
type webEndpoint struct {
	listen string
	tls    string
}

func endpointOf(w config.Web) webEndpoint {
	if w.Listen == "" {
		return webEndpoint{} // no endpoint, so no HTTPS either
	}
	return webEndpoint{listen: w.Listen, tls: w.TLSListen}
}

var errNoWebCertificate = errors.New("no [tls] certificate is loaded")

// webCertificate serves the HTTPS listener's handshakes with the [tls]
// pair of the running generation, so a renewal or a reload that names other
// files is picked up at the next handshake. Lock-free: a handshake never
// waits for a reload.
func (a *App) webCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if g := a.gen.Load(); g != nil && g.certs != nil {
		return g.certs.GetCertificate(hello)
	}
	return nil, errNoWebCertificate
}
