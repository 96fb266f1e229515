# docs/design.md#scenarios "reload": a configuration switch reloads nxdns without dropping a
# query. The resolver boots with the DoT primary as its only upstream; its
# specialisation "standby" has the DoH standby instead. While the client
# sends a steady stream of queries, the resolver switches to the
# specialisation (`switch-to-configuration test`, what `nixos-rebuild switch`
# runs): systemd must reload nxdns (same process, ExecReload's `nxdns reload`
# waits for the outcome), every query of the stream must be answered, and the queries after
# the switch must reach the standby. Then a plain `systemctl reload` returns
# only once nxdns is serving again, /metrics has the process series, and six
# kills in a row never leave the unit failed.
{ self, pkgs }:
let
  c = import ./common.nix { inherit self pkgs; };
in
{
  name = "nxdns-reload";

  nodes = {
    upstream =
      { config, ... }:
      let
        ip = config.networking.primaryIPAddress;
      in
      c.upstreamNode [
        (c.fakeup {
          name = "nxdns-fakeup-primary";
          listen = [ (c.dot ip "latency=20ms") ];
          http = c.primaryHttp;
        })
        (c.fakeup {
          name = "nxdns-fakeup-standby";
          listen = [ (c.doh ip "latency=20ms") ];
          http = c.standbyHttp;
        })
        { environment.systemPackages = [ pkgs.jq ]; }
      ];

    resolver =
      { nodes, lib, ... }:
      {
        imports = [
          (c.resolverNode (nodes: {
            upstreams = [ (c.primaryUpstream nodes) ];
          }))
        ];
        specialisation.standby.configuration = {
          services.nxdns.settings.upstreams = lib.mkForce [ (c.standbyUpstream nodes) ];
        };
      };

    client = c.clientNode;
  };

  testScript =
    { nodes, ... }:
    c.pythonHelpers nodes
    + ''

      def main_pid() -> str:
          return resolver.succeed("systemctl show -p MainPID --value nxdns.service").strip()


      start_all()
      for unit in ["nxdns-fakeup-primary.service", "nxdns-fakeup-standby.service"]:
          upstream.wait_for_unit(unit)
      upstream.wait_for_open_port(853, UPSTREAM)
      upstream.wait_for_open_port(443, UPSTREAM)
      start_resolver()
      query_ok("before.reload.test")
      pid = main_pid()

      with subtest("switching the configuration reloads nxdns and drops no query"):
          # 20 queries a second for 20 s, as a transient unit, so the switch
          # happens in the middle of the stream.
          primary_before = counters(PRIMARY_HTTP)["answered"]
          client.succeed(
              "systemd-run --unit=stream -p StandardOutput=file:/tmp/stream.json "
              "-p StandardError=file:/tmp/stream.log "
              f"$(command -v nxdns-burst) -target {RESOLVER}:53 -rate 20 -duration 20s "
              "-timeout 6s -suffix stream.reload.test."
          )
          # The stream is flowing (a second of it reached the primary).
          upstream.wait_until_succeeds(
              f"test $(curl -sf http://127.0.0.1:{PRIMARY_HTTP}/counters | jq .answered) -ge {primary_before + 20}",
              timeout=30,
          )
          standby_before = counters(STANDBY_HTTP)["answered"]
          out = resolver.succeed(
              "/run/current-system/specialisation/standby/bin/switch-to-configuration test 2>&1"
          )
          print(out)
          assert re.search(r"reloading the following units:.*\bnxdns\.service", out), out
          assert not re.search(r"(restarting|stopping|starting) the following units:.*\bnxdns\.service", out), out
          # ExecReload's nxdns reload returned after the outcome (written
          # after READY=1), so the unit is active, not reloading, and it is
          # the same process.
          state = resolver.succeed("systemctl show -p ActiveState --value nxdns.service").strip()
          assert state == "active", state
          assert main_pid() == pid, f"nxdns was restarted: {pid} -> {main_pid()}"
          client.wait_until_fails("systemctl is-active --quiet stream.service", timeout=60)
          r = json.loads(client.succeed("cat /tmp/stream.json"))
          print(f"stream across the switch: {r}")
          assert_clean(r)
          assert r["queries"] >= 300, r
          assert journal_count("reloaded") == 1, journal_count("reloaded")

      with subtest("after the switch the queries go to the new configuration's upstream"):
          assert counters(STANDBY_HTTP)["answered"] > standby_before
          primary_before = counters(PRIMARY_HTTP)["answered"]
          assert_clean(burst("-n 5 -timeout 6s -suffix after.reload.test."))
          assert counters(PRIMARY_HTTP)["answered"] == primary_before

      with subtest("systemctl reload returns once nxdns serves again"):
          resolver.succeed("systemctl reload nxdns.service")
          state = resolver.succeed("systemctl show -p ActiveState --value nxdns.service").strip()
          assert state == "active", state
          assert journal_count("reloaded") == 2, journal_count("reloaded")
          query_ok("after.systemctl-reload.test")
          assert main_pid() == pid

      with subtest("/metrics keeps the process series (no ProcSubset=pid)"):
          assert has_metric(metrics_text(), "process_start_time_seconds")

      with subtest("a crash loop never leaves the LAN's DNS server failed"):
          # Six kills in a row: more than systemd's default start limit (five
          # starts in ten seconds). Each time nxdns comes back, after a delay
          # that grows (RestartSteps), and the unit never enters "failed".
          for _ in range(6):
              before = main_pid()
              resolver.succeed(f"kill -KILL {before}")
              resolver.wait_until_succeeds(
                  "test \"$(systemctl show -p MainPID --value nxdns.service)\" != 0 "
                  f"&& test \"$(systemctl show -p MainPID --value nxdns.service)\" != {before} "
                  "&& systemctl is-active --quiet nxdns.service",
                  timeout=120,
              )
              resolver.fail("systemctl is-failed --quiet nxdns.service")
          resolver.wait_for_open_port(53)
          query_ok("after.crash-loop.test")
    '';
}
