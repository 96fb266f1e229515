#!/usr/bin/env bash
# Release artefacts: static nxdns binaries for linux/amd64 and linux/arm64, a
# .deb for each, and SHA256SUMS over all of them, in $OUT (default dist/).
#
# Reproducible: the same commit gives byte-identical files on any machine
# with the same Go version (go.mod's toolchain). CGO_ENABLED=0 (static, no C
# toolchain), -trimpath (no build paths), -buildid= (no per-build ID),
# -buildvcs=false (nothing read from .git but the stamps below), and
# SOURCE_DATE_EPOCH (the commit's time) for every timestamp in the .deb.
#
#   VERSION  the version stamped in the binary (default: git describe)
#   COMMIT   the commit stamped (default: git rev-parse --short=12 HEAD)
#   OUT      where the files go (default: dist)
#   ARCHES   which to build (default: "amd64 arm64")
#   BUILD_GOCACHE  a Go build cache for nxdns's own build only (a fresh one
#            shows the result does not depend on the cache; nfpm keeps the
#            usual cache)
#   NODEB=1  binaries and sums only
set -euo pipefail
cd "$(dirname "$0")/.."

# nfpm, run through the module proxy at a pinned version (the packaging tool,
# not a dependency of nxdns: go.mod does not list it).
NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2

version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo 0.0.0)}
version=${version#v}
commit=${COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
out=${OUT:-dist}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
# A Debian version must start with a digit: a bare commit hash becomes 0~hash.
debversion=$version
[[ "$debversion" =~ ^[0-9] ]] || debversion="0~$debversion"

mkdir -p "$out"
pkg=github.com/nxdns/nxdns/internal/buildinfo
ldflags="-s -w -buildid= -X $pkg.Version=$version -X $pkg.Commit=$commit"
files=()
for arch in ${ARCHES:-amd64 arm64}; do
  bin="$out/nxdns-$version-linux-$arch"
  echo "build $bin"
  env ${BUILD_GOCACHE:+GOCACHE="$BUILD_GOCACHE"} CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$bin" ./cmd/nxdns
  files+=("$(basename "$bin")")
  if [ "${NODEB:-}" != 1 ]; then
    deb="$out/nxdns_${debversion}_$arch.deb"
    echo "package $deb"
    VERSION=$debversion ARCH=$arch BINARY=$bin go run "$NFPM" package \
      --config packaging/nfpm.yaml --packager deb --target "$deb" >/dev/null
    files+=("$(basename "$deb")")
  fi
done
(cd "$out" && sha256sum "${files[@]}" >SHA256SUMS)
cat "$out/SHA256SUMS"
