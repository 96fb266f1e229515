package upstream

import (
	"context"

	"github.com/miekg/dns"
)

// Client is one upstream transport as the pool sees it. Exchange is safe for
// concurrent use, does not modify m, returns once ctx is done, and returns a
// response that passed Validate. Its errors carry a Kind where the transport
// knows one (for example KindBadResponse); the pool classifies the rest.
type Client interface {
	Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
	Close() error
}
