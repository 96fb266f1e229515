# docs/design.md#scenarios "saturated primary" (field failure 2): the primary upstream's
# slots are all held by stalled exchanges while the standby sits idle. No
# query may wait behind the saturated primary while the standby has room:
# zero SERVFAIL, every answer well inside the 5 s budget, zero budget
# exhaustion on /metrics, the primary's failures and the queue visible there,
# and one backoff episode in the journal, not one line per query.
#
# The primary starts healthy (so the start-up probe passes and the pool
# really sends it work), then the test swaps it for a fake upstream that
# accepts connections and never answers, on the same address and port.
{ self, pkgs }:
let
  c = import ./common.nix { inherit self pkgs; };
in
{
  name = "nxdns-saturated-primary";

  nodes = c.failoverNodes { stalledFirst = false; };

  testScript =
    { nodes, ... }:
    c.pythonHelpers nodes
    + ''

      start_all()
      for unit in ["nxdns-fakeup-primary.service", "nxdns-fakeup-standby.service"]:
          upstream.wait_for_unit(unit)
      upstream.wait_for_open_port(853, UPSTREAM)
      upstream.wait_for_open_port(443, UPSTREAM)
      start_resolver()

      with subtest("the healthy primary answers first"):
          query_ok("warmup.saturated.test")
          assert counters(PRIMARY_HTTP)["answered"] >= 1

      with subtest("the primary stalls: connections accepted, nothing answered"):
          upstream.succeed("systemctl stop nxdns-fakeup-primary.service")
          upstream.succeed("systemctl start nxdns-fakeup-primary-stall.service")
          upstream.wait_for_open_port(853, UPSTREAM)
          upstream.wait_for_open_port(PRIMARY_HTTP, "127.0.0.1")
          standby_before = counters(STANDBY_HTTP)["answered"]

      with subtest("a burst is answered by the standby, inside the budget"):
          # Three waves of 30: the first takes the primary's free slots and
          # stalls there, the later ones find it saturated and must go
          # straight to the standby.
          r = burst("-n 30 -waves 3 -wave-gap 500ms -timeout 6s -suffix saturated.test.")
          assert_clean(r)
          # A query that drew a stalled primary slot spends one full attempt
          # (2000 ms) and then the standby; none may approach 4000 ms.
          assert r["max_ms"] < 4000, f"slowest query: {r}"

      with subtest("the standby fake upstream answered every query of the burst"):
          standby_after = counters(STANDBY_HTTP)["answered"]
          assert standby_after - standby_before >= r["queries"], (standby_before, standby_after, r)

      with subtest("/metrics: the queue, the primary's failures, zero budget exhaustion"):
          m = metrics_text()
          assert has_metric(m, "nxdns_upstream_queued_total"), "no queue metric"
          assert has_metric(m, "nxdns_upstream_budget_exhausted_total"), "no budget metric"
          assert metric(m, "nxdns_upstream_budget_exhausted_total") == 0
          failures = metric(m, "nxdns_upstream_requests_total", index="0", outcome="failure")
          assert failures >= 1, "the stalled primary's attempts were not recorded"
          standby_ok = metric(m, "nxdns_upstream_requests_total", index="1", outcome="success")
          assert standby_ok >= r["queries"], f"standby successes: {standby_ok}"
          # Whatever queued waited briefly: a slot on the idle standby, never
          # the stalled primary's attempt timeout.
          queued = metric(m, "nxdns_upstream_queued_total")
          waited = metric(m, "nxdns_upstream_queued_seconds_total")
          print(f"queued {queued} queries for {waited:.3f} s in total")
          assert waited <= 1.0 * max(queued, 1.0), f"queued {queued}, waited {waited} s"

      with subtest("one backoff episode in the journal, not one line per query"):
          wait_for_journal(BACKOFF, 60)
          assert journal_count(BACKOFF) == 1, journal_count(BACKOFF)
          assert journal_count(RECOVERED) == 0
    '';
}
