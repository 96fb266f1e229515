package tlscert

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Finding is one check of Inspect: what was checked, whether it passed, and
// what to do when it did not.
type Finding struct {
	OK   bool
	What string // "certificate chain valid against the system roots"
	Fix  string // empty when OK
}

// Inspect answers "will Android's Private DNS accept this?" (docs/design.md#tls-certificate,
// `nxdns check --tls`). Android (9 and later, strict mode) connects to the
// host name the user typed on port 853 and requires what every browser
// requires: a chain to a root in the system store, built from what the
// server sends (no AIA fetching), the name in the subjectAltName, and the
// validity period covering now. name may be empty: then every DNS name the
// certificate carries is listed as a candidate. roots nil means the system
// roots.
func Inspect(certFile, keyFile, name string, roots *x509.CertPool, now time.Time) []Finding {
	l, err := loadPair(certFile, keyFile)
	if err != nil {
		return []Finding{{What: "certificate and key load", Fix: err.Error() + ": point tls.cert_file at the chain (fullchain.pem) and tls.key_file at its key"}}
	}
	leaf := l.cert.Leaf
	fs := []Finding{{OK: true, What: fmt.Sprintf("certificate and key load (%s)", certFile)}}
	fs = append(fs, nameFinding(leaf, name))
	fs = append(fs, validityFinding(leaf, now))

	inter := x509.NewCertPool()
	for _, der := range l.cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	_, err = leaf.Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	f := Finding{OK: err == nil, What: "chain valid against the system roots (what Android trusts)"}
	if err != nil {
		f.Fix = chainFix(err, len(l.cert.Certificate), leaf)
	}
	return append(fs, f)
}

func nameFinding(leaf *x509.Certificate, name string) Finding {
	if name == "" {
		if len(leaf.DNSNames) == 0 {
			return Finding{What: "certificate carries a host name",
				Fix: "Android's Private DNS takes a host name, not an IP address: get a certificate for a name such as dns.home.example.org"}
		}
		return Finding{OK: true, What: "host names covered: " + strings.Join(leaf.DNSNames, ", ") + " (pass --tls-name to check the one the phones use)"}
	}
	if err := leaf.VerifyHostname(name); err != nil {
		return Finding{What: "host name " + name + " covered",
			Fix: fmt.Sprintf("the certificate is for %s, not %s: set Android's Private DNS to one of those names, or get a certificate for %s",
				strings.Join(leaf.DNSNames, ", "), name, name)}
	}
	if net.ParseIP(name) != nil || !strings.Contains(name, ".") {
		return Finding{What: "host name " + name + " usable", Fix: "Android's Private DNS takes a fully qualified host name, not an IP address or a single label"}
	}
	return Finding{OK: true, What: "host name " + name + " covered"}
}

func validityFinding(leaf *x509.Certificate, now time.Time) Finding {
	what := fmt.Sprintf("valid now (until %s)", leaf.NotAfter.UTC().Format(time.DateTime+" UTC"))
	switch {
	case now.Before(leaf.NotBefore):
		return Finding{What: what, Fix: "not valid before " + leaf.NotBefore.UTC().Format(time.DateTime) + " UTC: check this machine's clock"}
	case !now.Before(leaf.NotAfter):
		return Finding{What: what, Fix: "expired: renew it (is the ACME timer running? journalctl -u acme-*)"}
	case leaf.NotAfter.Sub(now) < ExpiryWarning:
		return Finding{What: what, Fix: fmt.Sprintf("expires in %s: renew it now", leaf.NotAfter.Sub(now).Round(time.Hour))}
	}
	return Finding{OK: true, What: what}
}

// chainFix turns a verification error into what to change.
func chainFix(err error, chainLen int, leaf *x509.Certificate) string {
	var ua x509.UnknownAuthorityError
	switch {
	case errors.As(err, &ua) && chainLen == 1 && leaf.Issuer.String() != leaf.Subject.String():
		return "the file holds only the leaf certificate: use the full chain (fullchain.pem), phones do not fetch missing intermediates"
	case errors.As(err, &ua):
		return "not issued by a public CA (self-signed or a private CA): Android's Private DNS accepts only certificates that chain to its system roots; get one from Let's Encrypt with a DNS-01 challenge (docs/how-to/serve-dot-doh.md)"
	}
	return err.Error()
}
