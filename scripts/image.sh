#!/usr/bin/env bash
# Builds Groundwork's container image without a Docker engine: a static groundwork binary
# (CGO_ENABLED=0, -trimpath, no build id), then tools/image puts it with the machine's CA bundle
# into an image made from scratch, written to bin/image/ as an OCI layout (oci/), a tarball for
# `docker load` / `podman load` (groundwork.tar) and a CycloneDX SBOM (sbom.cdx.json).
# Timestamps come from SOURCE_DATE_EPOCH (default: the last commit's time), so two runs on the
# same tree print the same digest. Only Go modules are downloaded.
#
#   scripts/image.sh                 # GOARCH of this machine
#   GOARCH=arm64 scripts/image.sh    # another architecture
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin"

out="${IMAGE_OUT:-bin/image}"
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
revision="$(git rev-parse HEAD 2>/dev/null || true)"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"

mkdir -p "$out"
CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags '-s -w -buildid=' -o "$out/groundwork" ./cmd/groundwork
go run ./tools/image -binary "$out/groundwork" -out "$out" -version "$version" -revision "$revision" \
	-ca-certs "${CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}"
