package main

import (
	"fmt"
	"io"
	"time"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/tlscert"
)

// checkTLS prints whether Android's Private DNS will accept the serving
// certificate of cfg ([tls]), one line per check with what to fix, and
// exits 1 if any check failed. name is the host name the phones are set to
// ("" lists the certificate's names instead).
func checkTLS(cfg config.Config, name string, stdout io.Writer) int {
	t := cfg.TLS
	if t.CertFile == "" || t.KeyFile == "" {
		fmt.Fprintln(stdout, "tls: FAILED: [tls] cert_file and key_file are not set: nxdns serves no DoT/DoH (docs/how-to/serve-dot-doh.md)")
		return exitProblems
	}
	failed := 0
	for _, f := range tlscert.Inspect(t.CertFile, t.KeyFile, name, nil, time.Now()) {
		if f.OK {
			fmt.Fprintf(stdout, "tls: ok: %s\n", f.What)
			continue
		}
		failed++
		fmt.Fprintf(stdout, "tls: FAILED: %s: %s\n", f.What, f.Fix)
	}
	if failed > 0 {
		fmt.Fprintln(stdout, "tls: Android's Private DNS will refuse this setup")
		return exitProblems
	}
	fmt.Fprintln(stdout, "tls: Android's Private DNS will accept this setup")
	return exitOK
}
