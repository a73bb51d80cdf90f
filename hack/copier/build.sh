#!/usr/bin/env bash
# Builds captf-copy (main.go: the static copier the copy shape of a module image Job
# runs from the module image) with Go's standard library only, once per content of
# main.go: it lands in $CAPTF_CACHE_DIR/bin/copier-<hash>/captf-copy, and a second call
# finds it and returns at once. Prints the directory on its last line. With --check,
# builds nothing: prints the directory and exits 0 if it is built, else exits 1.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${CAPTF_CACHE_DIR:-$HOME/.cache/captf}"
sum=$(cat "$here/go.mod" "$here/main.go" | sha256sum | cut -c1-12)
out="$cache/bin/copier-$sum"
# shellcheck source=../lock.sh
. "$here/../lock.sh"
if [ -x "$out/captf-copy" ]; then
  echo "$out"; exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "not built: $out (run hack/copier/build.sh)" >&2; exit 1
fi
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
cd "$here"
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -buildvcs=false -trimpath -ldflags "-s -w" -o "$out.tmp/captf-copy" .
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out"
