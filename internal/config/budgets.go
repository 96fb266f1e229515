package config

// The shipped budgets obey two inequalities (docs/design.md#config-budgets), written out with
// their numbers in docs/reference/configuration.md. A file may break them —
// an operator can have reasons — so they are warnings, which `nxdns check`
// prints and which never stop nxdns from starting or reloading.

// stubFirstTryMS is the first-try timeout of the stub resolvers most LAN
// clients run: glibc and musl (RES_TIMEOUT, 5 s), dig and kdig (+timeout,
// 5 s). A typed answer must reach the client before it: after that the
// client has given up on the try, and the answer goes nowhere.
const stubFirstTryMS = 5000

// answerMarginMS is what the server's answer needs after the budget ends:
// building the SERVFAIL with its Extended DNS Error, writing it, the LAN's
// one-way trip, and the scheduling of a busy Pi. A client's timer starts
// before its query leaves and the budget only when nxdns reads it, so the
// margin also covers that gap. Half a second is generous for a LAN.
const answerMarginMS = 500

// Warning codes. Like every Code they are stable; unlike the others they
// never make a file invalid.
const (
	// CodeStandbyWithoutAttempt: 2 × attempt_timeout_ms > total_timeout_ms,
	// so after a stalled primary the standby gets less than a full attempt
	// ("specific beats generic" broken).
	CodeStandbyWithoutAttempt Code = "StandbyWithoutAttempt"
	// CodeBudgetOutlastsClients: total_timeout_ms + answerMarginMS >
	// stubFirstTryMS, so a query that spends its budget is answered after
	// common stub resolvers gave up on the try ("the server yields first"
	// broken).
	CodeBudgetOutlastsClients Code = "BudgetOutlastsClients"
)

// Warnings returns what is legal in c but breaks a promise the defaults
// keep. c should be valid; Warnings does not repeat Validate's problems.
func Warnings(c Config) Problems {
	var ps Problems
	u := c.Upstream
	// The margin of inequality (1) is zero: an attempt that ends exactly at
	// the deadline had its full interval, and the pool records it as such
	// (docs/upstream-pool.md), so 2 × attempt = total leaves the standby a
	// whole attempt.
	if 2*u.AttemptTimeoutMS > u.TotalTimeoutMS {
		ps.add("upstream.attempt_timeout_ms", CodeStandbyWithoutAttempt,
			"%d ms fits less than twice in total_timeout_ms (%d ms): after a stalled first upstream the next one gets only %d ms, less than a full attempt",
			u.AttemptTimeoutMS, u.TotalTimeoutMS, u.TotalTimeoutMS-u.AttemptTimeoutMS)
	}
	if u.TotalTimeoutMS+answerMarginMS > stubFirstTryMS {
		ps.add("upstream.total_timeout_ms", CodeBudgetOutlastsClients,
			"%d ms plus %d ms to answer is past the %d ms after which glibc, musl, dig and kdig give up on a try: a query that spends its budget gets its SERVFAIL after the client stopped waiting",
			u.TotalTimeoutMS, answerMarginMS, stubFirstTryMS)
	}
	return ps
}
