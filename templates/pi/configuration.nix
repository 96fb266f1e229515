# Your Pi: everything here replaces the defaults of nxdns's nix/pi.nix
# (lists included). Options: docs/how-to/deploy-on-a-pi.md and
# docs/reference/configuration.md.
{
  networking.hostName = "nxdns-pi";

  # Your router: the LAN's DHCP server, the Pi's own resolver (NTP names,
  # nix, ssh) and the resolver of the local zones.
  services.nxdns.pi.router = "192.168.1.1";

  # The only way in (no password login, no console user). The image is
  # refused at evaluation until this holds a key, e.g.
  #   "ssh-ed25519 AAAAC3Nza… you@laptop"
  users.users.root.openssh.authorizedKeys.keys = [
  ];

  # Upstreams, forward zones, clients: nix/pi.nix has Quad9 then Cloudflare
  # and the router for `lan` and 192.168.in-addr.arpa. To change them:
  # services.nxdns.settings = {
  #   upstreams = [
  #     { url = "tls://dns.quad9.net"; address = "9.9.9.9"; priority = 0; }
  #   ];
  #   clients = [ { ip = "192.168.1.20"; name = "laptop"; } ];
  # };
}
