package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
)

// Peer is one element of [[peers]]: another nxdns whose dashboard state
// (allowed names, pauses) this one keeps in agreement with
// (docs/how-to/two-pis.md, "Replication").
type Peer struct {
	URL       string `toml:"url"`        // http(s)://IP:PORT of its web endpoint
	TokenFile string `toml:"token_file"` // an API token of the peer's (read scope is enough)
}

// MaxPeers bounds [[peers]]: a household runs two, perhaps three.
const MaxPeers = 4

func checkPeers(ps *Problems, peers []Peer, f Filter) {
	if len(peers) > MaxPeers {
		ps.add("peers", CodeOutOfRange, "%d peers: at most %d", len(peers), MaxPeers)
	}
	if len(peers) > 0 && f.StateDir == "" {
		ps.add("peers", CodeStateDirRequired, "peers need filter.state_dir, where the replicated state is kept while a peer is down")
	}
	seen := map[string]int{}
	for i, p := range peers {
		path := fmt.Sprintf("peers[%d]", i)
		u, err := url.Parse(p.URL)
		switch {
		case err != nil:
			ps.add(path+".url", CodeInvalidURL, "%q: %v", p.URL, err)
		case u.Scheme != "http" && u.Scheme != "https":
			ps.add(path+".url", CodeUnsupportedScheme, "%q: want http://IP:PORT or https://IP:PORT", p.URL)
		case u.User != nil:
			ps.add(path+".url", CodeUserinfo, "credentials in the URL: use token_file")
		default:
			if _, err := netip.ParseAddrPort(u.Host); err != nil && u.Scheme == "http" {
				ps.add(path+".url", CodeInvalidAddress, "%q: want an IP address and a port (a peer found by name would need the DNS nxdns itself serves)", u.Host)
			}
		}
		if j, dup := seen[p.URL]; dup {
			ps.add(path+".url", CodeDuplicate, "%s is already peers[%d]", p.URL, j)
		}
		seen[p.URL] = i
		if p.TokenFile == "" {
			ps.add(path+".token_file", CodeRequired, "a file holding an API token of the peer's (nxdns token add NAME --scope read, on the peer)")
		} else if !filepath.IsAbs(p.TokenFile) {
			ps.add(path+".token_file", CodeNotAbsolute, "%q: want an absolute path", p.TokenFile)
		}
	}
}
