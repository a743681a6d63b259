#!/usr/bin/env bash
# Rebuilds third_party/iceberg-go: the packages of github.com/apache/iceberg-go
# that optlake links, at VERSION, under optlake's import path, with
# third_party/iceberg-go.patch applied (see third_party/iceberg-go/README.md).
# Usage: scripts/vendor-iceberg-go.sh [VERSION]   (default v0.7.0)
set -euo pipefail
version=${1:-v0.7.0}
cd "$(dirname "$0")/.."
src=$(go mod download -json "github.com/apache/iceberg-go@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "vendor-iceberg-go: cannot download iceberg-go $version" >&2; exit 1; }
dst=third_party/iceberg-go
keep=$(mktemp)
cp "$dst/README.md" "$keep"
rm -rf "$dst"
# The packages optlake's build reaches (go list -deps ./... | grep iceberg-go).
for p in . catalog catalog/internal catalog/rest catalog/sql config internal internal/datafileavro internal/fileuri internal/scanmetrics \
	internal/schemes io metrics puffin table table/dv table/internal table/substrait udf view view/internal; do
	mkdir -p "$dst/$p"
	for f in "$src/$p"/*.go "$src/$p"/*.yaml; do
		[ -f "$f" ] || continue
		case $f in *_test.go) continue ;; esac
		cp "$f" "$dst/$p/"
	done
done
cp "$src/LICENSE" "$src/NOTICE" "$dst/"
mv "$keep" "$dst/README.md"
chmod -R u+w "$dst"
find "$dst" -name '*.go' -exec sed -i 's#"github.com/apache/iceberg-go\([/"]\)#"github.com/optlake/optlake/third_party/iceberg-go\1#g' {} +
# go:linkname directives name a package by its import path too.
find "$dst" -name '*.go' -exec sed -i 's#^//go:linkname \([^ ]*\) github.com/apache/iceberg-go/#//go:linkname \1 github.com/optlake/optlake/third_party/iceberg-go/#' {} +
gofmt -w "$dst"
(cd "$dst" && patch -p1 --no-backup-if-mismatch < ../iceberg-go.patch)
echo "third_party/iceberg-go: iceberg-go $version, patched"
