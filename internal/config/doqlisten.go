package config

import "fmt"

// checkDoQListen applies tls.doq_listen's rules (docs/server.md "DNS over
// QUIC"): valid IP:port addresses (usually 853, RFC 9250 §4.1.1), none twice, and none on a UDP port dns.listen binds. They are UDP
// sockets, so they do not collide with tls.dot_listen's TCP ones on the
// same port: DoT and DoQ share 853 by design.
func checkDoQListen(ps *Problems, addrs, dnsListen []string) {
	var taken []bound
	for i, s := range dnsListen { // already reported by checkListen when invalid
		if ap, msg := parseListen(s, "53"); msg == "" {
			taken = append(taken, bound{ap, fmt.Sprintf("dns.listen[%d]", i)})
		}
	}
	checkTLSListen(ps, "tls.doq_listen", "853", addrs, taken)
}
