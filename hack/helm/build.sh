#!/usr/bin/env bash
# Builds helm from the Go module pinned in go.mod, once per version: the binary
# lands in $CAPTF_CACHE_DIR/bin/helm-<version>/helm and a second call finds it and
# returns at once. Prints the binary's path on its last line. With --check, builds
# nothing: prints the path and exits 0 if it is built, else exits 1 (tests use
# this to skip instead of building).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${CAPTF_CACHE_DIR:-$HOME/.cache/captf}"
version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" {print $3; exit}' "$here/go.mod")
out="$cache/bin/helm-${version}"
# shellcheck source=../lock.sh
. "$here/../lock.sh"
if [ -x "$out/helm" ]; then
  echo "$out/helm"; exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "not built: $out/helm (run hack/helm/build.sh)" >&2; exit 1
fi
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
cd "$here"
# shellcheck source=../progress.sh
. "$here/../progress.sh"
# As Helm's Makefile does: the Kubernetes version `helm lint` and `helm template`
# assume is the one of the client-go it was built with (v0.X.Y is Kubernetes 1.X).
client_go=$(go list -f '{{.Version}}' -m k8s.io/client-go)
minor=${client_go#v0.}; minor=${minor%%.*}
v=helm.sh/helm/v3
ld="-s -w -X $v/internal/version.version=$version -X $v/internal/version.gitTreeState=clean"
ld="$ld -X $v/pkg/lint/rules.k8sVersionMajor=1 -X $v/pkg/lint/rules.k8sVersionMinor=$minor"
ld="$ld -X $v/pkg/chartutil.k8sVersionMajor=1 -X $v/pkg/chartutil.k8sVersionMinor=$minor"
echo "building helm $version into $out (first build takes a few minutes)" >&2
CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags "$ld" -o "$out.tmp/helm" helm.sh/helm/v3/cmd/helm
echo "helm built after $(( $(date +%s) - start ))s" >&2
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out/helm"
