// Package testutil holds loopback DNS-over-TLS and DNS-over-HTTPS servers,
// launchers for real third-party resolvers, and a per-test certificate
// authority for nxdns's tests. It is imported only from _test.go files and by
// test tools; nothing in the product links it.
//
// The DoT and DoH servers are internal/fakeup listeners driven through
// fakeup.Hooks: one fake-upstream implementation serves the transport tests
// here and the scenario tests (vmtests, cmd/nxdns-fakeup), so a misbehaviour
// added once — the hostile ones of issue 13 included (StartDoTWith: oversized
// EDE, TSIG, TC over a stream, endless data, slow bytes) — exists for both.
// They listen on 127.0.0.1 only, present a certificate issued by the test's
// CA (clients verify it; nothing here skips verification), count what they
// see (accepts, handshakes, queries, connections) and can misbehave on
// request (FailNext, SetDelay, CloseIdle) so transport tests can reproduce
// the failures of docs/design.md#dot-client and docs/design.md#doh-client. Every server is shut down by t.Cleanup.
//
// StartUnbound and StartDnsmasq run the installed unbound (an encrypted
// upstream: DoT, and DoH when built with nghttp2) and dnsmasq (a home
// router's LAN resolver) on free loopback ports, so interop tests check nxdns
// against servers nobody here wrote. They skip the test when the program is
// not installed, and t.Cleanup stops them.
//
// WaitFor is the tests' one bounded poll for state another goroutine or
// process publishes; InNetns re-runs a test that changes interfaces in a
// network namespace of its own (unshare -rn), and IP runs ip(8) there.
package testutil
