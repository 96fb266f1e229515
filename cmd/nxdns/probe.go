package main

import (
	"context"
	"fmt"
	"io"

	"github.com/nxdns/nxdns/internal/app"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/upstream"
)

// probeUpstreams prints one line per enabled upstream and forward-zone
// resolver and exits 1 if any
// failed, so `nxdns check --probe` can gate a deployment.
func probeUpstreams(ctx context.Context, cfg config.Config, stdout io.Writer) int {
	failed := 0
	for _, r := range app.Probe(ctx, cfg) {
		status := "ok"
		if r.Err != nil {
			// The explanation says what to change; the error itself stays
			// for whoever needs the exact words (a bug report, a search).
			status = "FAILED: " + upstream.Explain(r.Err)
			failed++
		}
		what := r.URL
		if r.Zone != "" {
			what = "zone " + r.Zone + " " + r.URL
		}
		fmt.Fprintf(stdout, "probe %s: %s (%.1f ms)\n", what, status, float64(r.Latency.Microseconds())/1000)
		if r.Err != nil {
			fmt.Fprintf(stdout, "  detail: %v\n", r.Err)
		}
	}
	if failed > 0 {
		return exitProblems
	}
	return exitOK
}
