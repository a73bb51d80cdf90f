#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from the Go modules pinned in go.mod, once per
# version: the binaries land in $CAPTF_CACHE_DIR/bin/<name>-<version>/ and a
# second call finds them and returns at once. GOMODCACHE and GOCACHE keep Go's
# own caches, so a rebuild after a clean clone only relinks.
# Prints the directory holding the three binaries on its last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# The same default as the Makefile, so `pytest` run by hand finds what `make` built.
cache="${CAPTF_CACHE_DIR:-$HOME/.cache/captf}"
k8s_version=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/go.mod")
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$here/go.mod")
out="$cache/bin/kube-${k8s_version}-etcd-${etcd_version}"
# shellcheck source=../lock.sh
. "$here/../lock.sh"
if [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/etcd" ]; then
  echo "$out"; exit 0
fi
mkdir -p "$out.tmp"
minor=${k8s_version#v1.}; minor=${minor%%.*}
kv=k8s.io/component-base/version
cv=k8s.io/client-go/pkg/version
ldk="-s -w -X $kv.gitVersion=$k8s_version -X $kv.gitMajor=1 -X $kv.gitMinor=$minor -X $kv.gitTreeState=clean -X $kv.buildDate=1970-01-01T00:00:00Z"
ldk="$ldk -X $cv.gitVersion=$k8s_version -X $cv.gitMajor=1 -X $cv.gitMinor=$minor"
cd "$here"
# shellcheck source=../progress.sh
. "$here/../progress.sh"
echo "building kube-apiserver, kube-controller-manager $k8s_version and etcd $etcd_version into $out (first build takes a while)" >&2
CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$etcd_version" \
  -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3
echo "etcd built after $(( $(date +%s) - start ))s" >&2
CGO_ENABLED=0 go build -buildvcs=false -trimpath -tags=providerless -ldflags "$ldk" -o "$out.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
echo "kube-apiserver built after $(( $(date +%s) - start ))s" >&2
CGO_ENABLED=0 go build -buildvcs=false -trimpath -tags=providerless -ldflags "$ldk" -o "$out.tmp/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
echo "kube-controller-manager built after $(( $(date +%s) - start ))s" >&2
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out"
