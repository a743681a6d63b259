#!/usr/bin/env bash
# image.sh — build the optlake container image (Containerfile) with podman
# from the linux binaries that GoReleaser left in dist/ (make
# release-snapshot, make release, or CI's single-target snapshot build).
# Nothing is compiled and nothing is pulled: the base is scratch, the CA
# bundle is the build machine's (Debian's ca-certificates), the user is
# build/container/etc/passwd's optlake (65532).
#
#   scripts/image.sh IMAGE [DIST]
#
# tags IMAGE:VERSION (GoReleaser's version: 0.1.0 for the tag v0.1.0) and
# prints that reference. With binaries for several linux architectures it
# builds one image per architecture (IMAGE:VERSION-ARCH) and makes IMAGE:VERSION
# a manifest list of them. The image's OCI labels carry the version, the
# commit and the commit's date (also its creation time, so a rebuild of the
# same commit from the same binaries is the same image).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
image=${1:?usage: scripts/image.sh IMAGE [DIST]}
dist=${2:-$ROOT/dist}
ca_bundle=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
source_url=${IMAGE_SOURCE:-https://github.com/optlake/optlake}

for f in "$dist/metadata.json" "$dist/artifacts.json"; do
  [ -f "$f" ] || { echo "image: no $f: build with GoReleaser first (make release-snapshot)" >&2; exit 1; }
done
[ -s "$ca_bundle" ] || { echo "image: no CA bundle at $ca_bundle (apt-get install ca-certificates)" >&2; exit 1; }
command -v podman >/dev/null || { echo "image: podman is not installed (make deps)" >&2; exit 1; }

# version and commit from GoReleaser's metadata; one line per linux binary:
# ARCH PATH (paths in artifacts.json are relative to the project root).
read -r version commit < <(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["version"], m["commit"])' "$dist/metadata.json")
mapfile -t binaries < <(python3 -c '
import json, sys
for a in json.load(open(sys.argv[1])):
    if a.get("type") == "Binary" and a.get("goos") == "linux" and a.get("name") == "optlake":
        print(a["goarch"], a["path"])' "$dist/artifacts.json")
[ ${#binaries[@]} -gt 0 ] || { echo "image: no linux optlake binary in $dist/artifacts.json" >&2; exit 1; }
created=$(TZ=UTC git -C "$ROOT" show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd "$commit")
epoch=$(git -C "$ROOT" show -s --format=%ct "$commit")

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp" "$ctx/data" "$ctx/rootfs/usr/share/doc/optlake/third_party/iceberg-go"
cp "$ROOT/build/container/etc/passwd" "$ROOT/build/container/etc/group" "$ctx/rootfs/etc/"
cp "$ca_bundle" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
# The licence texts the release archives carry (.goreleaser.yaml's files).
cp "$ROOT/LICENSE" "$ctx/rootfs/usr/share/doc/optlake/"
cp "$ROOT/third_party/iceberg-go/LICENSE" "$ROOT/third_party/iceberg-go/NOTICE" "$ctx/rootfs/usr/share/doc/optlake/third_party/iceberg-go/"
chmod -R u=rwX,go=rX "$ctx/rootfs/usr"
chmod 0644 "$ctx/rootfs/etc/passwd" "$ctx/rootfs/etc/group" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
chmod 1777 "$ctx/rootfs/tmp"

refs=()
for line in "${binaries[@]}"; do
  arch=${line%% *} path=${line#* }
  case "$path" in /*) ;; *) path="$ROOT/$path" ;; esac
  mkdir -p "$ctx/linux/$arch"
  cp "$path" "$ctx/linux/$arch/optlake"
  chmod 0755 "$ctx/linux/$arch/optlake"
  ref="$image:$version"
  [ ${#binaries[@]} -eq 1 ] || ref="$image:$version-$arch"
  podman build --quiet --platform "linux/$arch" --timestamp "$epoch" -f "$ROOT/Containerfile" \
    --build-arg VERSION="$version" --build-arg REVISION="$commit" --build-arg CREATED="$created" \
    --build-arg SOURCE="$source_url" \
    -t "$ref" "$ctx" >/dev/null
  refs+=("$ref")
done
if [ ${#refs[@]} -gt 1 ]; then
  podman manifest rm "$image:$version" >/dev/null 2>&1 || true
  podman manifest create "$image:$version" >/dev/null
  for ref in "${refs[@]}"; do
    podman manifest add "$image:$version" "containers-storage:$ref" >/dev/null
  done
fi
echo "$image:$version"
