#!/usr/bin/env bash
# Builds the OCI registry (distribution's `registry`) and go-containerregistry's
# `crane` from the Go modules pinned in go.mod, once per version pair: both land in
# $CAPTF_CACHE_DIR/bin/registry-<distribution>-crane-<ggcr>/ and a second call
# finds them and returns at once. Prints the directory on its last line. With
# --check, builds nothing: prints the directory and exits 0 if it is built, else
# exits 1 (tests use this to skip instead of building).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The same default as the Makefile, so `pytest` run by hand finds what `make` built.
cache="${CAPTF_CACHE_DIR:-$HOME/.cache/captf}"
dist=$(awk '$1 == "github.com/distribution/distribution/v3" {print $2; exit}' "$here/go.mod")
ggcr=$(awk '$1 == "github.com/google/go-containerregistry" {print $2; exit}' "$here/go.mod")
out="$cache/bin/registry-${dist}-crane-${ggcr}"
# shellcheck source=../lock.sh
. "$here/../lock.sh"
if [ -x "$out/registry" ] && [ -x "$out/crane" ]; then
  echo "$out"; exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "not built: $out (run hack/registry/build.sh)" >&2; exit 1
fi
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
cd "$here"
# shellcheck source=../progress.sh
. "$here/../progress.sh"
# What distribution's Makefile stamps, minus the commit.
p=github.com/distribution/distribution/v3
ld="-s -w -X $p/version.version=$dist -X $p/version.mainpkg=$p"
echo "building registry $dist and crane $ggcr into $out (first build takes a few minutes)" >&2
CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags "$ld" -o "$out.tmp/registry" "$p/cmd/registry"
CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags "-s -w" -o "$out.tmp/crane" github.com/google/go-containerregistry/cmd/crane
echo "registry and crane built after $(( $(date +%s) - start ))s" >&2
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out"
