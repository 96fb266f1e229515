package forward

import (
	"fmt"
	"time"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/upstream"
)

// Encrypted resolvers (docs/forward.md "Encrypted resolvers"): a zone whose
// resolver is tls://, https://, quic:// or h3:// sends its queries through the
// upstreams' own transport (upstream.NewClient), so certificate checks,
// connection reuse, DoQ's stream rules and error classification are the
// pool's. The zone keeps everything else of its own: one resolver, no
// failover, the one read_timeout deadline of exchange, its counters and
// health, and the router-aware cache rules keyed by the resolver URL.

// newEncryptedZone builds a zone over an encrypted transport. The URL's host
// must be an IP: a zone has no address key, and no resolver's name is
// resolved. Errors name the key and show the URL redacted (a DoH path may
// carry a token).
func newEncryptedZone(name string, fz config.ForwardZone, timeout time.Duration) (*Zone, error) {
	ep, err := upstream.ParseEndpoint(fz.Resolver, "", fz.TLSName) // url.Parse lower-cases the scheme
	if err != nil {
		return nil, fmt.Errorf("resolver: %s: %w", upstream.RedactString(fz.Resolver), err)
	}
	client, err := upstream.NewClient(ep, fz.CA, nil)
	if err != nil {
		return nil, fmt.Errorf("resolver: %s: %w", ep.Redacted(), err)
	}
	return &Zone{
		name:    name,
		url:     ep.Redacted(),
		network: string(ep.Scheme),
		addr:    ep.Addr,
		timeout: timeout,
		client:  client,
		health:  newZoneHealth(),
	}, nil
}

// closeClient closes the zone's encrypted transport, if any.
func (z *Zone) closeClient() {
	if z.client != nil {
		z.client.Close()
	}
}

// closeClients closes every zone's encrypted transport.
func (t *Table) closeClients() {
	for _, z := range t.zones {
		z.closeClient()
	}
}
