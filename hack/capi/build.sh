#!/usr/bin/env bash
# Builds Cluster API's core manager, the kubeadm bootstrap manager and clusterctl
# from the Go module pinned in go.mod, once per version: the binaries land in
# $CAPTF_CACHE_DIR/bin/capi-<version>/ with what the manager needs at run time
# beside them, copied from the module cache (nothing fetched is committed):
#   crds/*.yaml             core/config/crd/bases
#   webhook/manifests.yaml  core/config/webhook/manifests.yaml
# A second call finds them and returns at once. Prints the directory on its last
# line. With --check, builds nothing: prints the directory and exits 0 if it is
# built, else exits 1 (tests use this to skip instead of building).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The same default as the Makefile, so `pytest` run by hand finds what `make` built.
cache="${CAPTF_CACHE_DIR:-$HOME/.cache/captf}"
version=$(awk '$1 == "require" && $2 == "sigs.k8s.io/cluster-api" {print $3; exit}' "$here/go.mod")
out="$cache/bin/capi-${version}"
# shellcheck source=../lock.sh
. "$here/../lock.sh"
binaries=(manager kubeadm-bootstrap-manager clusterctl)
built() {
  for b in "${binaries[@]}"; do [ -x "$out/$b" ] || return 1; done
  [ -f "$out/webhook/manifests.yaml" ] && compgen -G "$out/crds/*.yaml" >/dev/null
}
if built; then
  echo "$out"; exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "not built: $out (run hack/capi/build.sh)" >&2; exit 1
fi
rm -rf "$out.tmp" && mkdir -p "$out.tmp/crds" "$out.tmp/webhook"
cd "$here"
# shellcheck source=../progress.sh
. "$here/../progress.sh"
src=$(go mod download -json "sigs.k8s.io/cluster-api@${version}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
cp "$src"/core/config/crd/bases/*.yaml "$out.tmp/crds/"
cp "$src/core/config/webhook/manifests.yaml" "$out.tmp/webhook/"
chmod -R u+w "$out.tmp"  # the module cache is read-only, and so are its copies
# What Cluster API's release build stamps (hack/scripts/release/version.sh), minus the commit.
minor=${version#v1.}; minor=${minor%%.*}
v=sigs.k8s.io/cluster-api/version
ld="-s -w -X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=$minor"
ld="$ld -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
echo "building Cluster API $version (manager, kubeadm-bootstrap-manager, clusterctl) into $out (first build takes a while)" >&2
CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags "$ld" -o "$out.tmp/manager" sigs.k8s.io/cluster-api/core
echo "manager built after $(( $(date +%s) - start ))s" >&2
CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags "$ld" -o "$out.tmp/kubeadm-bootstrap-manager" sigs.k8s.io/cluster-api/bootstrap/kubeadm
echo "kubeadm-bootstrap-manager built after $(( $(date +%s) - start ))s" >&2
CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags "$ld" -o "$out.tmp/clusterctl" sigs.k8s.io/cluster-api/cmd/clusterctl
echo "clusterctl built after $(( $(date +%s) - start ))s" >&2
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out"
