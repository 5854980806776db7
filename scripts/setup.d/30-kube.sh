#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go module proxy (module tools/kubeapiserver) for the
# integration tests that need a real Kubernetes API server. The first build takes about
# 12 minutes of CPU; afterwards this is a no-op because both binaries of the pinned version exist.
set -euo pipefail

KUBE_VERSION=v1.37.2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$root/.cache/kube/$KUBE_VERSION"

if [[ -x "$out/kube-apiserver" && -x "$out/etcd" ]]; then
	exit 0
fi

mkdir -p "$out"
minor="${KUBE_VERSION#v1.}"
minor="${minor%%.*}"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"

cd "$root/tools/kubeapiserver"
echo "30-kube: building kube-apiserver and etcd $KUBE_VERSION into $out (first time only)" >&2
start=$SECONDS
# Build into temporary names and rename, so an interrupted build never leaves a binary that
# the skip check above would take for a finished one.
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
mv "$out/etcd.tmp" "$out/etcd"
mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
echo "30-kube: built in $((SECONDS - start))s" >&2
