package upstream

import (
	"context"

	"github.com/miekg/dns"
)

// Client is one upstream transport as the pool sees it. Exchange is safe for
// concurrent use, returns once ctx is done, and returns a response that
// passed Validate. Its errors carry a Kind where the transport knows one
// (for example KindBadResponse); the pool classifies the rest.
//
// Exchange keeps nothing of m once it returns (every transport packs m
// before it sends), and modifies nothing in it but what packing does:
// miekg/dns's Pack sets the OPT record's extended-rcode bits (the high byte
// of its TTL field) from m.Rcode. In a query nxdns builds (rcode 0, its own
// OPT: query.Request.Msg) they already hold that value, so the pool hands
// each attempt the caller's message itself, uncopied; that one field is
// what no other goroutine may read while an exchange runs.
type Client interface {
	Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
	Close() error
}
