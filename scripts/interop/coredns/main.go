// Command coredns is CoreDNS v1.15.0 with only the plugins nxdns's interop
// tests use (vmtests/coredns_test.go): a DoQ and DoH3 server and client
// that nobody here wrote. It is a module of its own, outside nxdns's root
// module, so nxdns's go.mod and vendor hash never carry CoreDNS; .ci/interop.sh
// builds it (docs/decisions/quic-library.md, "Interop with CoreDNS").
package main

import (
	"github.com/coredns/coredns/coremain"

	// The plugins the tests' Corefiles name, and nothing else.
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/https3"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/quic"
	_ "github.com/coredns/coredns/plugin/template"
	_ "github.com/coredns/coredns/plugin/tls"
)

func main() {
	coremain.Run()
}
