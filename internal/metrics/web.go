package metrics

import "github.com/prometheus/client_golang/prometheus"

// WebState is the web endpoint's counts, kept by the composition root so
// that they outlive an endpoint a reload replaces (docs/dashboard.md, "The
// login").
type WebState struct {
	LoginRateLimited uint64       // login attempts refused by the rate limit, unchecked
	LoginEpisodes    uint64       // episodes of rate limiting (one client refused, then quiet for a minute)
	Tokens           []TokenCount // API token requests (docs/dashboard.md, "API tokens")
}

// TokenCount is one series of nxdns_web_api_token_requests_total.
type TokenCount struct {
	Name, Result string
	N            uint64
}

var (
	webLoginLimited = prometheus.NewDesc("nxdns_web_login_rate_limited_total",
		"Login attempts refused by the rate limit (429) without checking the password.",
		nil, nil)
	webLoginEpisodes = prometheus.NewDesc("nxdns_web_login_rate_limit_episodes_total",
		"Episodes of login rate limiting: each is one log line when it starts and one when it ends.",
		nil, nil)
	webTokenRequests = prometheus.NewDesc("nxdns_web_api_token_requests_total",
		"Requests that carried an API token, by token name (\"unknown\" for none that matches) and result: ok, unknown, revoked, expired, scope, plain_http, unreadable.",
		[]string{"token", "result"}, nil)
)

type webCollector struct{ snap func() WebState }

func (webCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- webLoginLimited
	ch <- webLoginEpisodes
	ch <- webTokenRequests
}

func (c webCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	send(ch, webLoginLimited, prometheus.CounterValue, float64(s.LoginRateLimited))
	send(ch, webLoginEpisodes, prometheus.CounterValue, float64(s.LoginEpisodes))
	for _, t := range s.Tokens {
		send(ch, webTokenRequests, prometheus.CounterValue, float64(t.N), t.Name, t.Result)
	}
}
