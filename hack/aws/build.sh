#!/usr/bin/env bash
# Builds hashicorp/terraform-provider-aws from the Go module pinned in go.mod, once
# per version, into a filesystem mirror under
# $CAPTF_CACHE_DIR/bin/aws-<release>-<commit>/ (the same layout as hack/tofu's):
#   mirror/registry.opentofu.org/hashicorp/aws/<release>/<os>_<arch>/terraform-provider-aws_v<release>
#   tofurc    CLI config: the `local` provider's mirror (hack/tofu) and this one,
#             never the network for either
# Opt in (`make aws`): the build takes about 2,500 CPU seconds and 9 GB of memory, so
# nothing else builds it; tests that need it skip until it is there.
# A second call finds it and returns at once. Prints the directory on its last line.
# With --check, builds nothing: prints the directory and exits 0 if it is complete,
# else exits 1. GOFLAGS is passed through: GOFLAGS=-p=1 compiles one package at a time
# (less memory at once, the same CPU seconds).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${CAPTF_CACHE_DIR:-$HOME/.cache/captf}"
module_version=$(awk '{ if ($1 == "require") $0 = substr($0, 9) } $1 == "github.com/hashicorp/terraform-provider-aws" {print $2; exit}' "$here/go.mod")
release=$(awk '$2 == "provider-version" {print $3; exit}' "$here/go.mod")
platform="$(go env GOOS)_$(go env GOARCH)"
out="$cache/bin/aws-${release}-${module_version##*-}"
provider_rel="mirror/registry.opentofu.org/hashicorp/aws/${release}/${platform}/terraform-provider-aws_v${release}"
built() { [ -x "$out/$provider_rel" ] && [ -f "$out/tofurc" ]; }
# Asked before the lock: $out appears whole (renamed from $out.tmp) or not at all, and a
# check must not wait half an hour for a build under way to finish.
if [ "${1:-}" = "--check" ]; then
  if built; then echo "$out"; exit 0; fi
  echo "not built: $out (run make aws: about 2,500 CPU seconds and 9 GB of memory)" >&2; exit 1
fi
# shellcheck source=../lock.sh
. "$here/../lock.sh"
if built; then
  echo "$out"; exit 0
fi
tofu_dir=$("$here/../tofu/build.sh" | tail -n 1)
rm -rf "$out.tmp" && mkdir -p "$out.tmp/$(dirname "$provider_rel")"
# shellcheck source=../progress.sh
. "$here/../progress.sh"
echo "building terraform-provider-aws $release ($module_version) into $out (20-35 min, 9 GB)" >&2
# version.ProviderVersion is what the provider's release build stamps; the provider
# reports it to OpenTofu's logs and in its user agent.
(cd "$here" && CGO_ENABLED=0 go build -buildvcs=false -mod=readonly -trimpath \
  -ldflags "-s -w -X github.com/hashicorp/terraform-provider-aws/version.ProviderVersion=${release}" \
  -o "$out.tmp/$provider_rel" github.com/hashicorp/terraform-provider-aws)
echo "terraform-provider-aws built after $(( $(date +%s) - start ))s" >&2
"$here/write-tofurc.sh" "$tofu_dir/mirror" "$out/mirror" > "$out.tmp/tofurc"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out"
