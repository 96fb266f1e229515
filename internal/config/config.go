// Package config is nxdns's configuration: the TOML model of docs/design.md#configuration, its
// defaults, strict loading and validation. It imports nothing internal, never
// logs and never exits: callers decide whether a problem stops the process or
// keeps the running configuration.
package config

// Config is the whole file. Field names follow the TOML keys. Every key but
// the upstreams has a default in Default; a file must declare its own
// upstreams (see Load), so an empty file is rejected with NoUpstreams.
type Config struct {
	DNS          DNS           `toml:"dns"`
	Upstream     Upstream      `toml:"upstream"`
	Upstreams    []UpstreamURL `toml:"upstreams"`
	ForwardZones []ForwardZone `toml:"forward_zones"`
	Clients      []Client      `toml:"clients"`
	Web          Web           `toml:"web"`
	TLS          TLS           `toml:"tls"`
	Log          Log           `toml:"log"`
	History      History       `toml:"history"`
	Local        Local         `toml:"local"`
	Filter       Filter        `toml:"filter"`
	DNSSEC       DNSSEC        `toml:"dnssec"`
	Devices      Devices       `toml:"devices"` // docs/devices.md
	MQTT         MQTT          `toml:"mqtt"`
	Peers        []Peer        `toml:"peers"`
}

// DNS is the serving side: where nxdns listens and whom it answers.
type DNS struct {
	Listen []string `toml:"listen"` // IP:port; each gets a UDP and a TCP listener
	Allow  []string `toml:"allow"`  // CIDR prefixes or "local"; clients outside get REFUSED

	// The answer cache and serve-stale of docs/design.md#cache. TTLs and ages are whole
	// seconds, the unit of a DNS TTL.
	CacheSize   int    `toml:"cache_size"`      // answers held; 0 disables the cache
	CacheBytes  int64  `toml:"cache_max_bytes"` // the answers' memory, in bytes (docs/cache.md "Memory")
	CacheMinTTL int    `toml:"cache_min_ttl"`   // shorter TTLs are raised to it; <= CacheMaxTTL
	CacheMaxTTL int    `toml:"cache_max_ttl"`   // longer TTLs are lowered to it
	StaleMaxAge int    `toml:"stale_max_age"`   // how long past expiry an answer may be served stale; 0 disables
	Prefetch    *bool  `toml:"prefetch"`        // nil means true: refresh names asked again near expiry
	CacheFile   string `toml:"cache_file"`      // absolute path the cache is saved to and loaded from; "" for none

	// Rebinding protection and the per-device rate limit (guards.go).
	RebindingProtection *bool    `toml:"rebinding_protection"` // nil means true
	RebindingAllow      []string `toml:"rebinding_allow"`      // names (and every name below) whose private answers pass
	RebindingAnswer     string   `toml:"rebinding_answer"`     // "servfail" (default) or "nxdomain"
	RateLimitQPS        int      `toml:"rate_limit_qps"`       // per device; 0 turns the limit off
	RateLimitBurst      int      `toml:"rate_limit_burst"`     // the bucket's size
	RateLimitExempt     []string `toml:"rate_limit_exempt"`    // IPs or CIDRs never limited (a forwarding router)
	// TrustedForwarders are the forwarders (a router running dnsmasq with
	// add-mac and add-subnet) whose EDNS0 client MAC (option 65001) and
	// client subnet are believed (docs/devices.md "Behind a forwarder").
	TrustedForwarders []string `toml:"trusted_forwarders"`
}

// Upstream holds the time budgets shared by every upstream and zone.
type Upstream struct {
	AttemptTimeoutMS int `toml:"attempt_timeout_ms"` // one attempt against one upstream, connect included
	TotalTimeoutMS   int `toml:"total_timeout_ms"`   // the pool's per-query budget: every wait and attempt
	ReadTimeoutMS    int `toml:"read_timeout_ms"`    // one whole forward-zone exchange (UDP, TC=1, TCP)
}

// UpstreamURL is one encrypted upstream resolver (an element of [[upstreams]]).
type UpstreamURL struct {
	URL      string `toml:"url"`      // tls://host[:port] or https://host[:port]/path
	Address  string `toml:"address"`  // IP to connect to; defaults to the URL's host when it is an IP
	TLSName  string `toml:"tls_name"` // name the certificate must carry; defaults to the URL's host
	CAFile   string `toml:"ca_file"`  // extra PEM roots on top of the system's
	CA       []byte `toml:"-"`        // CAFile's content as ReadFiles read and checked it: what the transport trusts
	Priority int    `toml:"priority"` // lower is tried first; ties keep file order
	Enabled  *bool  `toml:"enabled"`  // nil means true; pointer so "absent" differs from false
}

// IsEnabled reports whether the upstream becomes a pool entry.
func (u UpstreamURL) IsEnabled() bool { return u.Enabled == nil || *u.Enabled }

// ForwardZone sends names at or below Zone to one LAN resolver.
type ForwardZone struct {
	Zone     string `toml:"zone"`     // a domain, e.g. "lan" or "168.192.in-addr.arpa"
	Resolver string `toml:"resolver"` // udp://IP:port, tcp://IP:port, or tls://, https://, quic:// with an IP host (zonetls.go)
	Validate *bool  `toml:"validate"` // DNSSEC-validate its answers; nil means false (docs/dnssec.md)
	TLSName  string `toml:"tls_name"` // encrypted resolvers: the name the certificate must carry; defaults to the URL's host
	CAFile   string `toml:"ca_file"`  // encrypted resolvers: extra PEM roots on top of the system's
	CA       []byte `toml:"-"`        // CAFile's content as ReadFiles read it
}

// Client is a static name for a LAN client, shown in logs: the client at
// IP, the device with MAC, or the DoT/DoH client presenting ClientID
// (docs/devices.md); at least one of the three.
type Client struct {
	IP       string `toml:"ip"`
	Name     string `toml:"name"`
	MAC      string `toml:"mac"`
	ClientID string `toml:"client_id"`
}

// Web is the HTTP endpoint for /metrics and /api/health.
type Web struct {
	Listen       string `toml:"listen"`        // host:port; empty disables
	PasswordFile string `toml:"password_file"` // a bcrypt hash (nxdns hash-password); "" means loopback only
	// TLSListen serves the same endpoint over HTTPS with the [tls]
	// certificate (docs/dashboard.md, "HTTPS"); "" serves plain HTTP only.
	TLSListen string `toml:"tls_listen"`
	// Hostnames are the names besides the listen address and "localhost"
	// that a request's Host may carry (docs/dashboard.md, "DNS rebinding").
	Hostnames []string `toml:"hostnames"`
	// TokensOverHTTP accepts API tokens over plain HTTP from other hosts
	// (docs/dashboard.md, "API tokens"); by default only loopback and HTTPS.
	TokensOverHTTP bool `toml:"tokens_over_http"`
}

// Log sets verbosity and the per-query line.
type Log struct {
	Level   string `toml:"level"`   // debug, info, warn, error
	Queries *bool  `toml:"queries"` // nil means true
}

// QueryLog reports whether one line per query is logged.
func (l Log) QueryLog() bool { return l.Queries == nil || *l.Queries }

// Default is the built-in configuration: loopback on an unprivileged port, so
// `nxdns run` works out of the box without root, and two well-known public
// DoT resolvers given by IP address (nxdns never resolves an upstream's name).
// Those upstreams serve only when no file is given: Load drops them, so a
// file never sends queries to a resolver its author did not name.
func Default() Config {
	return Config{
		DNS: DNS{
			// Port 5300: unprivileged, and not 5353, which avahi (mDNS) holds
			// on most Linux desktops (docs/design.md#configuration).
			Listen:      []string{"127.0.0.1:5300", "[::1]:5300"},
			Allow:       []string{AllowLocal},
			CacheSize:   10000,
			CacheBytes:  32 << 20, // internal/cache's DefaultMaxBytes: fits a 512 MB Pi beside everything else
			CacheMinTTL: 0,
			CacheMaxTTL: 86400, // one day
			StaleMaxAge: 86400, // one day, within RFC 8767 §5's suggested 1 to 3 days
			// guards.go
			RateLimitQPS:    DefaultRateLimitQPS,
			RateLimitBurst:  DefaultRateLimitBurst,
			RateLimitExempt: append([]string(nil), DefaultRateLimitExempt...),
		},
		Upstream: Upstream{AttemptTimeoutMS: 2000, TotalTimeoutMS: 4000, ReadTimeoutMS: 3000},
		Upstreams: []UpstreamURL{
			{URL: "tls://dns.quad9.net", Address: "9.9.9.9", TLSName: "dns.quad9.net"},
			{URL: "tls://one.one.one.one", Address: "1.1.1.1", TLSName: "one.one.one.one", Priority: 1},
		},
		Web:     Web{Listen: "127.0.0.1:9153"},
		Log:     Log{Level: "info"},
		Filter:  FilterDefaults(),
		History: defaultHistory(),
		DNSSEC:  defaultDNSSEC(),
		MQTT:    defaultMQTT(),
	}
}
