#!/usr/bin/env bash
# release-tools.sh — build the release tools pinned in tools/release/go.mod
# into ${XDG_CACHE_HOME:-~/.cache}/optlake/bin, once per pinned version:
#   goreleaser  github.com/goreleaser/goreleaser/v2 (CI: check + snapshot build)
#   syft        github.com/anchore/syft/cmd/syft   (the release's SBOMs)
#
#   scripts/release-tools.sh goreleaser syft
#
# A separate module, so the release tools' dependencies stay out of
# optlake's go.mod. go build stamps no version the cache can check: a file
# next to each binary records the version it was built at. The first build
# compiles each tool from source (several minutes each on 2 cores); later
# calls print nothing and return at once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOL_BIN_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/optlake/bin"

for name in "$@"; do
  case "$name" in
    goreleaser) pkg=github.com/goreleaser/goreleaser/v2 mod=github.com/goreleaser/goreleaser/v2 ;;
    syft) pkg=github.com/anchore/syft/cmd/syft mod=github.com/anchore/syft ;;
    *) echo "release-tools: unknown tool $name (goreleaser, syft)" >&2; exit 2 ;;
  esac
  version=$(cd "$ROOT/tools/release" && GOFLAGS= go list -m -f '{{.Version}}' "$mod")
  have=""
  if [ -x "$TOOL_BIN_DIR/$name" ] && [ -f "$TOOL_BIN_DIR/$name.version" ]; then
    have=$(cat "$TOOL_BIN_DIR/$name.version")
  fi
  [ "$have" = "$version" ] && continue
  mkdir -p "$TOOL_BIN_DIR"
  echo "release-tools: go build $name@$version into $TOOL_BIN_DIR (the first time takes minutes)"
  start=$(date +%s)
  (cd "$ROOT/tools/release" && GOFLAGS= go build -trimpath -o "$TOOL_BIN_DIR/$name.tmp" "$pkg")
  mv "$TOOL_BIN_DIR/$name.tmp" "$TOOL_BIN_DIR/$name"
  echo "$version" > "$TOOL_BIN_DIR/$name.version"
  echo "release-tools: $name@$version built in $(( $(date +%s) - start )) s"
done
