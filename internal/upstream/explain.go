package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// maxExplainNames bounds the certificate names Explain lists, so the text
// stays inside an Extended DNS Error that fits a 512-byte answer.
const maxExplainNames = 3

// Explain is the cause of a failed exchange in words an operator can act on
// (docs/design.md#pool-answers): the text of EDE 23 and of `nxdns check --probe`. Certificate
// failures say what to change — ca_file, the clock, tls_name — because
// "network error: x509: certificate signed by unknown authority" names the
// symptom and not the fix. Anything it does not recognise is its Kind's text
// ("upstream timeout"). The text never holds a URL: callers name the
// (redacted) upstream themselves.
func Explain(err error) string {
	return explainAt(err, time.Now())
}

// explainAt is Explain with the clock given, so tests can place a
// certificate's validity around "now".
func explainAt(err error, now time.Time) string {
	if err == nil {
		return ""
	}
	fallback := KindNoResources.Error() // Classify's verdict on an error with no Kind
	if k, ok := errors.AsType[Kind](err); ok {
		fallback = k.Error()
	}
	err = underlying(err)
	if _, ok := errors.AsType[*QueryError](err); ok {
		return fallback // a verdict without a transport error: nothing more to say
	}
	if _, ok := errors.AsType[*AttemptError](err); ok {
		return fallback
	}
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		record   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown):
		return "certificate signed by unknown authority: set ca_file to the resolver's CA (PEM), " +
			"or install the system's CA certificates (ca-certificates) for a public resolver"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired && invalid.Cert != nil:
		c := invalid.Cert
		if now.Before(c.NotBefore) {
			return fmt.Sprintf("certificate not yet valid (from %s, this host's clock says %s): check the clock (NTP)",
				c.NotBefore.UTC().Format(time.DateOnly), now.UTC().Format(time.DateOnly))
		}
		return fmt.Sprintf("certificate expired on %s (this host's clock says %s): check the clock, or tell the resolver's operator",
			c.NotAfter.UTC().Format(time.DateOnly), now.UTC().Format(time.DateOnly))
	case errors.As(err, &invalid):
		return "certificate rejected (" + invalid.Error() + ")"
	case errors.As(err, &hostname) && hostname.Certificate != nil:
		return fmt.Sprintf("certificate not valid for %s (it names %s): check tls_name", hostname.Host, certNames(hostname.Certificate))
	case errors.As(err, &record):
		return "not a TLS server on this port (plain DNS? DoT is port 853)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: nothing listens on that port"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the upstream: check this host's network and firewall"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by the upstream"
	}
	return fallback
}

// underlying is the transport's own error inside the pool's verdicts:
// *QueryError and *AttemptError unwrap only to their Kind (one error, one
// group), so errors.As cannot see the x509 error they hold.
func underlying(err error) error {
	for {
		if qe, ok := errors.AsType[*QueryError](err); ok && qe.Err != nil {
			err = qe.Err
			continue
		}
		if ae, ok := errors.AsType[*AttemptError](err); ok && ae.Err != nil {
			err = ae.Err
			continue
		}
		return err
	}
}

// certNames lists what a certificate is valid for, bounded.
func certNames(c *x509.Certificate) string {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return "no name"
	}
	if len(names) > maxExplainNames {
		return strings.Join(names[:maxExplainNames], ", ") + fmt.Sprintf(" and %d more", len(names)-maxExplainNames)
	}
	return strings.Join(names, ", ")
}
