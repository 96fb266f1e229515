# The smallest configuration: `services.nxdns.enable = true;`. It must build
# (the module's `nxdns check` passes) and serve: the module writes out the
# built-in upstreams, since the binary uses them only without a file. Its
# rendered TOML is committed as vmtests/golden/minimal.toml (regenerate:
# vmtests/golden/regenerate.sh), and CI runs `nxdns check` on it.
{ pkgs, ... }:
{
  services.nxdns = {
    enable = true;
    # module.nix alone has no default package (nixpkgs has no pkgs.nxdns);
    # the flake's nixosModules.default sets it, so with the flake this line
    # is not needed.
    package = pkgs.callPackage ../nix/package.nix { };
  };
}
