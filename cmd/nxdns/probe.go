package main

import (
	"context"
	"fmt"
	"io"

	"github.com/nxdns/nxdns/internal/config"
)

// probeUpstreams is filled in when the transports land.
func probeUpstreams(ctx context.Context, cfg config.Config, stdout io.Writer) int {
	fmt.Fprintln(stdout, "probe: not available in this build")
	return exitProblems
}
