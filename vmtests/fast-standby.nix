# docs/design.md#scenarios "fast standby": at the shipped defaults (attempt 2000 ms, total
# 4000 ms) the primary stalls every attempt. Once it is in backoff the
# standby answers each query at once: a dead primary costs at most the
# queries in flight when it died, not one attempt timeout per query. The
# journal shows one backoff episode: one warn line on entry and, once the
# primary is healthy again, one info line on recovery.
{ self, pkgs }:
let
  c = import ./common.nix { inherit self pkgs; };
in
{
  name = "nxdns-fast-standby";

  nodes = c.failoverNodes { stalledFirst = true; };

  testScript =
    { nodes, ... }:
    c.pythonHelpers nodes
    + ''

      start_all()
      for unit in ["nxdns-fakeup-primary-stall.service", "nxdns-fakeup-standby.service"]:
          upstream.wait_for_unit(unit)
      upstream.wait_for_open_port(853, UPSTREAM)
      upstream.wait_for_open_port(443, UPSTREAM)
      start_resolver()

      with subtest("queries are answered while the stalled primary is found out"):
          # The start-up probe alone may already have put the primary in
          # backoff; if not, these queries' full attempts against it do.
          assert_clean(burst("-n 5 -timeout 6s -suffix first.standby.test."))
          wait_for_journal(BACKOFF, 60)

      with subtest("with the primary in backoff, the standby answers each query at once"):
          primary_before = counters(PRIMARY_HTTP)["answered"]
          standby_before = counters(STANDBY_HTTP)["answered"]
          r = burst("-rate 5 -duration 20s -timeout 6s -suffix steady.standby.test.")
          assert_clean(r)
          # No query pays the primary's 2000 ms attempt timeout.
          assert r["max_ms"] < 2000, f"slowest query: {r}"
          assert counters(PRIMARY_HTTP)["answered"] == primary_before
          standby_after = counters(STANDBY_HTTP)["answered"]
          assert standby_after - standby_before >= r["queries"], (standby_before, standby_after, r)

      with subtest("/metrics: no budget exhaustion"):
          m = metrics_text()
          assert has_metric(m, "nxdns_upstream_budget_exhausted_total"), "no budget metric"
          assert metric(m, "nxdns_upstream_budget_exhausted_total") == 0
          assert metric(m, "nxdns_upstream_backoff", index="0") == 1
          assert metric(m, "nxdns_upstream_backoff", index="1") == 0

      with subtest("one backoff line, not one per query"):
          assert journal_count(BACKOFF) == 1, journal_count(BACKOFF)
          assert journal_count(RECOVERED) == 0

      with subtest("the primary heals: one recovery line, and it serves again"):
          upstream.succeed("systemctl stop nxdns-fakeup-primary-stall.service")
          upstream.succeed("systemctl start nxdns-fakeup-primary.service")
          upstream.wait_for_open_port(853, UPSTREAM)
          upstream.wait_for_open_port(PRIMARY_HTTP, "127.0.0.1")
          # Background probes follow the capped, jittered backoff schedule.
          wait_for_journal(RECOVERED, 600)
          primary_before = counters(PRIMARY_HTTP)["answered"]
          assert_clean(burst("-n 5 -timeout 6s -suffix healed.standby.test."))
          assert counters(PRIMARY_HTTP)["answered"] - primary_before >= 5
          m = metrics_text()
          assert metric(m, "nxdns_upstream_backoff", index="0") == 0
          assert journal_count(BACKOFF) == 1, journal_count(BACKOFF)
          assert journal_count(RECOVERED) == 1, journal_count(RECOVERED)
    '';
}
