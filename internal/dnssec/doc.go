// Package dnssec validates DNS answers (RFC 4033, 4034, 4035, 5155, 6840)
// for a forwarder: it builds the chain of trust from the root trust anchors
// down to the zone that signed each RRset of an answer, fetching the DS and
// DNSKEY sets it needs through a Fetch function the caller supplies (so the
// fetches go through the same upstreams, with the query's own context and
// deadline), and gives the answer one Status with the reason and the RFC 8914
// Extended DNS Error that names it (docs/dnssec.md).
//
// What a Result guarantees:
//   - Secure: every RRset of the answer section, and for a negative answer
//     the NSEC or NSEC3 records that prove it, carry a signature that
//     verified, valid at the validator's clock (with the configured skew),
//     by a key whose DNSKEY set chains by DS records to a trust anchor;
//     an answer synthesised from a wildcard also has the proof that the
//     name itself does not exist (RFC 4035 §5.3.4, RFC 5155 §8.8).
//   - Insecure: a link of that chain is proven absent — a signed proof that
//     a delegation has no DS (RFC 4035 §5.2), a DS set whose algorithms or
//     digests are all unsupported (RFC 6840 §5.2), an NSEC3 opt-out span
//     (RFC 5155 §6), NSEC3 records above 150 iterations (RFC 9276 §3.2), or
//     a negative trust anchor (RFC 7646) covering the name. Never because a
//     record was merely missing: RRSIGs stripped under a signed parent are
//     Bogus.
//   - Bogus: the chain was expected and broke; EDE 6 (DNSSEC Bogus), 7
//     (Signature Expired), 8 (Signature Not Yet Valid), 9 (DNSKEY Missing,
//     also when a DS or DNSKEY fetch fails), 10 (RRSIGs Missing) or 12
//     (NSEC Missing) says how.
//   - Indeterminate: there was nothing to validate (an rcode other than
//     NOERROR and NXDOMAIN, no question) or no trust anchor covers the
//     name.
//
// Algorithms: RSA/SHA-256 (8), RSA/SHA-512 (10), ECDSA P-256 (13), P-384
// (14) and Ed25519 (15); a zone whose DS records name only other
// algorithms, or only digests other than SHA-1, SHA-256 and SHA-384, is
// insecure (RFC 6840 §5.2). NSEC3 hash algorithm 1 (SHA-1) only.
//
// The work per query is bounded whatever the answer or the zones contain,
// against KeyTrap and NSEC3-iteration attacks (CVE-2023-50387,
// CVE-2023-50868): at most MaxVerifications signature verifications,
// MaxKeyTries key-and-signature pairs tried for one RRset, MaxHashes NSEC3
// name hashes (each of at most MaxNSEC3Iterations+1 SHA-1 rounds, since a
// higher count makes the records insecure before anything is hashed) and
// MaxFetches DS or DNSKEY fetches; a query that reaches a bound is Bogus
// (EDE 6, "validation work limit"). Chains are followed only towards the
// root (a DS is looked up only for a strict descendant of the zone that
// signed it), so a zone cannot make the DS lookups loop.
//
// Validated DNSKEY sets and zone statuses are kept until the shortest of
// their TTLs and signature expirations (at most an hour; a bogus verdict
// 30 seconds, a failed fetch not at all), and concurrent queries that
// need the same zone share one fetch, none waiting for it past its own
// deadline. Below a delegation proven unsigned, names cost no lookup.
//
// Guard applies [dnssec] mode to a resolver's answers (docs/dnssec.md): it
// asks with DO=1, sets AD exactly on Secure answers (and caps their TTLs
// at their signatures' expiration, RFC 4035 §5.3.3), leaves CD=1 queries
// unvalidated and without AD, and in enforce mode with the clock set
// answers Bogus with SERVFAIL and the verdict's EDE. In shadow mode it
// answers without waiting for the verdict, and so never with AD; the
// validation runs afterwards in a bounded queue (shadow.go).
package dnssec
