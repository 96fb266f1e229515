# The vendorHash of nxdns's Go dependencies: the NAR hash of the vendor/
# directory that `go mod vendor` makes from the git-tracked tree. It is the one
# place the value lives (nix/package.nix and nix/testbed.nix share it: same
# go.mod, same vendor/). After a change to go.mod or go.sum, or to which
# packages are imported, run `.ci/nix-check.sh --update-vendor-hash`.
"sha256-7lkcRfK2wGIRXst2q2J2JWXpTOdWSz1u/aPvBesxfXo="
