#!/usr/bin/env bash
# Builds OpenTofu and the `local` provider from the Go modules pinned in
# go.mod and local/go.mod, once per version pair, into
# $CAPTF_CACHE_DIR/bin/tofu-<version>-local-<version>/:
#   tofu                                   the CLI
#   mirror/registry.opentofu.org/hashicorp/local/<v>/<os>_<arch>/terraform-provider-local_v<v>
#   tofurc                                 CLI config: that mirror, and never the network for it
# A second call finds them and returns at once. Prints the directory on its
# last line. With --check, builds nothing: prints the directory and exits 0 if
# it is complete, else exits 1 (tests use this to skip instead of building).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${CAPTF_CACHE_DIR:-$HOME/.cache/captf}"
tofu_version=$(awk '{ if ($1 == "require") $0 = substr($0, 9) } $1 == "github.com/opentofu/opentofu" {print $2; exit}' "$here/go.mod")
local_version=$(awk '$2 == "provider-version" {print $3; exit}' "$here/local/go.mod")
platform="$(go env GOOS)_$(go env GOARCH)"
out="$cache/bin/tofu-${tofu_version}-local-${local_version}"
# shellcheck source=../lock.sh
. "$here/../lock.sh"
provider_rel="mirror/registry.opentofu.org/hashicorp/local/${local_version}/${platform}/terraform-provider-local_v${local_version}"
if [ -x "$out/tofu" ] && [ -x "$out/$provider_rel" ] && [ -f "$out/tofurc" ]; then
  echo "$out"; exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "not built: $out (run hack/tofu/build.sh)" >&2; exit 1
fi
rm -rf "$out.tmp" && mkdir -p "$out.tmp/$(dirname "$provider_rel")"
# shellcheck source=../progress.sh
. "$here/../progress.sh"
echo "building tofu $tofu_version and terraform-provider-local $local_version into $out" >&2
# version.dev=no is what OpenTofu's release build sets: `tofu version` then
# reports the plain release version read from its embedded VERSION file.
(cd "$here" && CGO_ENABLED=0 go build -buildvcs=false -mod=readonly -trimpath \
  -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" \
  -o "$out.tmp/tofu" github.com/opentofu/opentofu/cmd/tofu)
echo "tofu built after $(( $(date +%s) - start ))s" >&2
(cd "$here/local" && CGO_ENABLED=0 go build -buildvcs=false -mod=readonly -trimpath -ldflags "-s -w" \
  -o "$out.tmp/$provider_rel" github.com/terraform-providers/terraform-provider-local)
echo "terraform-provider-local built after $(( $(date +%s) - start ))s" >&2
"$here/write-tofurc.sh" "$out/mirror" > "$out.tmp/tofurc"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out"
