# docs/design.md#boot-path, the Pi's boot path: a Pi has no real-time clock, so after months
# switched off it boots with its clock months behind, and every DoT
# certificate looks "not yet valid". The resolver node here boots that way (a
# oneshot sets its clock 200 days back before timesyncd and nxdns start), with
# the boot path of nix/pi.nix: its time server is reachable without nxdns (an
# IP address; on the Pi, names resolved by the router). The time server (a
# node running chrony) is booted only once nxdns has been seen to refuse the
# upstream, so the test sees both sides:
#   - before: nxdns serves (SERVFAIL, never an unverified answer: TLS
#     verification stays on), says the clock is not synchronized in its log
#     and in /api/health, and the upstream is in backoff for "not yet valid";
#   - after: timesyncd sets the clock, nxdns notices and probes the upstream
#     again at once, and a verified DoT answer follows within seconds.
{ self, pkgs }:
let
  c = import ./common.nix { inherit self pkgs; };
  behindDays = 200;
in
{
  name = "nxdns-clock-behind";

  nodes = {
    upstream =
      { config, ... }:
      c.upstreamNode [
        (c.fakeup {
          name = "nxdns-fakeup-primary";
          listen = [ (c.dot config.networking.primaryIPAddress "latency=20ms") ];
          http = c.primaryHttp;
        })
      ];

    # An NTP server serving its own (correct) clock. The test script boots
    # it late: until then, NTP is unreachable, as for a Pi whose uplink is
    # not up yet.
    timeserver = {
      services.chrony = {
        enable = true;
        servers = [ ];
        extraConfig = ''
          local stratum 8
          allow all
        '';
      };
      networking.firewall.allowedUDPPorts = [ 123 ];
    };

    resolver =
      { nodes, pkgs, lib, ... }:
      {
        imports = [
          (c.resolverNode (nodes: {
            upstreams = [ (c.primaryUpstream nodes) ];
          }))
        ];
        # As on the Pi: the time server needs no DNS.
        networking.timeServers = [ nodes.timeserver.networking.primaryIPAddress ];
        # qemu-vm.nix turns timesyncd off (a VM gets its time from KVM);
        # this test is about a machine that has to ask NTP.
        services.timesyncd.enable = lib.mkForce true;

        # The Pi after months off: the clock starts far behind, before
        # timesyncd (which would move it forward to its saved clock file; a
        # fresh VM has none) and nxdns start.
        systemd.services.clock-behind = {
          description = "Set the clock ${toString behindDays} days back, as a Pi without RTC after months off";
          wantedBy = [ "sysinit.target" ];
          before = [
            "sysinit.target"
            "time-set.target"
            "systemd-timesyncd.service"
            "nxdns.service"
          ];
          unitConfig.DefaultDependencies = false;
          serviceConfig = {
            Type = "oneshot";
            RemainAfterExit = true;
          };
          path = [ pkgs.coreutils ];
          script = ''
            date -s "@$(( $(date +%s) - ${toString behindDays} * 86400 ))"
          '';
        };
      };

    client = c.clientNode;
  };

  testScript =
    { nodes, ... }:
    c.pythonHelpers nodes
    + ''
      import time


      def health() -> dict:
          # -f would fail on 503, which is a valid answer here.
          return json.loads(resolver.succeed("curl -s http://127.0.0.1:9153/api/health"))


      # Not start_all(): the time server stays off for now.
      upstream.start()
      resolver.start()
      client.start()
      upstream.wait_for_unit("nxdns-fakeup-primary.service")
      upstream.wait_for_open_port(853, UPSTREAM)
      upstream.wait_for_open_port(PRIMARY_HTTP, "127.0.0.1")
      start_resolver()

      with subtest("the resolver booted with its clock months behind"):
          behind = int(upstream.succeed("date +%s")) - int(resolver.succeed("date +%s"))
          assert behind > (${toString behindDays} - 10) * 86400, f"resolver only {behind} s behind"

      with subtest("nxdns serves, refuses the unverifiable upstream and says why"):
          wait_for_journal("system clock not synchronized", 60)
          wait_for_journal(BACKOFF, 60)
          assert journal_count("not yet valid") >= 1, "the backoff does not name the certificate's validity"
          out = client.succeed(f"kdig @{RESOLVER} +timeout=7 +retry=0 early.clock.test A")
          assert "SERVFAIL" in out, out
          # TLS verification stayed on: no query ever reached the upstream.
          assert counters(PRIMARY_HTTP)["answered"] == 0
          h = health()
          print(f"health before the clock is set: {h}")
          assert h["clock"] == {"state": "unsynchronized", "source": "timesyncd"}, h
          assert any("clock is not synchronized" in p for p in h["problems"]), h

      with subtest("once NTP answers: the clock is set, then a verified DoT answer within seconds"):
          timeserver.start()
          timeserver.wait_for_unit("chronyd.service")
          ntp_up = time.monotonic()
          # timesyncd retries an unreachable server every 30 s (ConnectionRetrySec).
          resolver.wait_until_succeeds("test -e /run/systemd/timesync/synchronized", timeout=90)
          synced = time.monotonic()
          behind = int(timeserver.succeed("date +%s")) - int(resolver.succeed("date +%s"))
          assert abs(behind) < 5, f"clock still {behind} s off after the sync"
          wait_for_journal("system clock synchronized", 30)
          client.wait_until_succeeds(
              f"kdig @{RESOLVER} +timeout=6 +retry=0 late.clock.test A | grep -q 'status: NOERROR'",
              timeout=60,
          )
          answered = time.monotonic()
          print(f"NTP reachable -> clock set: {synced - ntp_up:.1f} s; clock set -> DoT answer: {answered - synced:.1f} s")
          # nxdns's share: a clock poll (2 s) and one probe, not a backoff
          # interval (up to a minute).
          assert answered - synced < 20, answered - synced
          assert answered - ntp_up < 120, answered - ntp_up
          wait_for_journal("probing the upstreams again after the clock was set", 10)
          h = health()
          assert h["status"] == "ok", h
          assert h["clock"] == {"state": "synchronized", "source": "timesyncd"}, h
    '';
}
