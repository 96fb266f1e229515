// Package vmtests reproduces the field failures of docs/design.md#field-failures against the real
// nxdns binary on loopback: a fake DoT/DoH upstream (internal/fakeup) with
// added latency or stalls, nxdns started as a process with a generated
// configuration, and the burst client (internal/burst) measuring what a LAN
// client sees. The NixOS VM tests beside this file run the same scenarios
// across three machines; these run on every `go test ./...`.
package vmtests
