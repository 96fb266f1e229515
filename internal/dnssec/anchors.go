package dnssec

import "github.com/miekg/dns"

// rootAnchors are the root zone's key-signing keys as DS records, as IANA
// publishes them (https://data.iana.org/root-anchors/root-anchors.xml):
// KSK-2017 and its announced successor KSK-2024, so a validator built now
// keeps working across the rollover.
var rootAnchors = []string{
	". IN DS 20326 8 2 E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D",
	". IN DS 38696 8 2 683D2D0ACB8C9B712A1948B27F741219298D0A450D612C483AF444A4C0FB2B16",
}

// RootAnchors returns the built-in root trust anchors.
func RootAnchors() []dns.RR {
	out := make([]dns.RR, 0, len(rootAnchors))
	for _, s := range rootAnchors {
		rr, err := dns.NewRR(s)
		if err != nil {
			panic("dnssec: built-in anchor: " + err.Error())
		}
		out = append(out, rr)
	}
	return out
}
