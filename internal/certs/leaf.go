package certs

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"time"
)

// IssueValid is Issue with an explicit validity period, for tests of expiry
// handling (a certificate that expires tomorrow, or expired yesterday).
func (ca *CA) IssueValid(notBefore, notAfter time.Time, names ...string) (tls.Certificate, error) {
	return ca.issue(notBefore, notAfter, names)
}

// WriteLeafFiles writes a certificate from Issue as a PEM chain (leaf, then
// the CA, as an ACME client's fullchain.pem) and its key as PEM.
func WriteLeafFiles(c tls.Certificate, certFile, keyFile string) error {
	var chain []byte
	for _, der := range c.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	der, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return err
	}
	if err := os.WriteFile(certFile, chain, 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}
