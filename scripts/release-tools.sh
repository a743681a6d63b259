#!/usr/bin/env bash
# release-tools.sh — build the release tools pinned in tools/release/go.mod
# into ${XDG_CACHE_HOME:-~/.cache}/optlake/bin, once per pin:
#   goreleaser  github.com/goreleaser/goreleaser/v2 (CI: check + snapshot build)
#   syft        github.com/anchore/syft/cmd/syft   (the release's SBOMs)
#
#   scripts/release-tools.sh goreleaser syft
#
# A separate module, so the release tools' dependencies stay out of
# optlake's go.mod. A binary is rebuilt only when its key changes: the
# SHA-256 of tools/release/go.mod and go.sum (every module version it is
# built from) and the build flags below, kept in a file next to it. Later
# calls print nothing and return at once, so CI on a machine that built
# them before pays nothing.
#
# The flags build only what the tools run here need (goreleaser's first
# build compiles ~1,450 packages, 5 CPU-minutes; 6.2 with Go's defaults):
#   -tags disable_grpc_modules  the Cloud Storage client without its gRPC
#                               DirectPath (xDS) resolver, as optlake's own
#                               build: ~140 packages (envoy's generated
#                               protobufs) nobody here calls;
#   -gcflags=all=-dwarf=false, -ldflags='-s -w'
#                               no debug information: nobody debugs these
#                               binaries, and the compiler and linker skip
#                               writing it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOL_BIN_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/optlake/bin"
FLAGS=(-trimpath -tags disable_grpc_modules -gcflags=all=-dwarf=false "-ldflags=-s -w")

pins=$(cat "$ROOT/tools/release/go.mod" "$ROOT/tools/release/go.sum" | sha256sum)
for name in "$@"; do
  case "$name" in
    goreleaser) pkg=github.com/goreleaser/goreleaser/v2 ;;
    syft) pkg=github.com/anchore/syft/cmd/syft ;;
    *) echo "release-tools: unknown tool $name (goreleaser, syft)" >&2; exit 2 ;;
  esac
  key="${pins%% *} ${FLAGS[*]}"
  if [ -x "$TOOL_BIN_DIR/$name" ] && [ "$(cat "$TOOL_BIN_DIR/$name.key" 2>/dev/null)" = "$key" ]; then
    continue
  fi
  mkdir -p "$TOOL_BIN_DIR"
  echo "release-tools: go build $pkg (tools/release/go.mod) into $TOOL_BIN_DIR (the first time takes minutes)"
  start=$(date +%s)
  (cd "$ROOT/tools/release" && GOFLAGS= go build "${FLAGS[@]}" -o "$TOOL_BIN_DIR/$name.tmp" "$pkg")
  mv "$TOOL_BIN_DIR/$name.tmp" "$TOOL_BIN_DIR/$name"
  echo "$key" > "$TOOL_BIN_DIR/$name.key"
  echo "release-tools: $name built in $(( $(date +%s) - start )) s"
done
