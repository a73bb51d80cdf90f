#!/usr/bin/env bash
# Builds promtool from the Prometheus Go module pinned in go.mod, once per version:
# the binary lands in $CAPTF_CACHE_DIR/bin/promtool-<version>/promtool and a second
# call finds it and returns at once. Prints the binary's path on its last line. With
# --check, builds nothing: prints the path and exits 0 if it is built, else exits 1
# (tests use this to skip instead of building). The tests run `promtool check rules`
# and `promtool test rules` on manifests/monitoring/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${CAPTF_CACHE_DIR:-$HOME/.cache/captf}"
version=$(awk '$1 == "require" && $2 == "github.com/prometheus/prometheus" {print $3; exit}' "$here/go.mod")
out="$cache/bin/promtool-${version}"
# shellcheck source=../lock.sh
. "$here/../lock.sh"
if [ -x "$out/promtool" ]; then
  echo "$out/promtool"; exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "not built: $out/promtool (run hack/promtool/build.sh)" >&2; exit 1
fi
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
cd "$here"
# shellcheck source=../progress.sh
. "$here/../progress.sh"
# As Prometheus's promu does: the version `promtool --version` prints.
ld="-s -w -X github.com/prometheus/common/version.Version=$version"
echo "building promtool $version into $out (first build takes a few minutes)" >&2
CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags "$ld" -o "$out.tmp/promtool" github.com/prometheus/prometheus/cmd/promtool
echo "promtool built after $(( $(date +%s) - start ))s" >&2
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out/promtool"
