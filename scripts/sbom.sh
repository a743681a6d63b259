#!/usr/bin/env bash
# sbom.sh — the SPDX SBOM of one release archive (.goreleaser.yaml's sboms):
# syft (pinned in tools/release/go.mod) lists the Go modules compiled into
# the binary, each with the licence its module's files declare, read from
# the Go module cache (offline); optlake's own module then gets LICENSE's
# licence and the release's version, which syft cannot read from a binary.
#
#   scripts/sbom.sh ARCHIVE DOCUMENT VERSION
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: scripts/sbom.sh ARCHIVE DOCUMENT VERSION"
archive=${1:?$usage} document=${2:?$usage} version=${3:?$usage}
# The SPDX identifier of LICENSE (the image's label names it too).
license=Apache-2.0
grep -q 'Apache License' "$ROOT/LICENSE" && grep -q 'Version 2.0, January 2004' "$ROOT/LICENSE" ||
  { echo "sbom: LICENSE is not the $license text this script names" >&2; exit 1; }

# GoReleaser runs this with HOME and PATH only: ask go where the modules
# are. Every file of the archive is listed with its digests.
SYFT_CHECK_FOR_APP_UPDATE=false SYFT_FILE_METADATA_SELECTION=all \
  SYFT_GOLANG_SEARCH_LOCAL_MOD_CACHE_LICENSES=true SYFT_GOLANG_LOCAL_MOD_CACHE_DIR="$(go env GOMODCACHE)" \
  syft scan "$archive" --quiet --output "spdx-json=$document"
python3 - "$document" "$license" "$version" <<'EOF'
import json, sys
path, license, version = sys.argv[1:4]
with open(path) as f:
    doc = json.load(f)
main = [p for p in doc.get("packages", []) if p.get("name") == "github.com/optlake/optlake"]
if not main:
    sys.exit(f"sbom: {path} lists no package github.com/optlake/optlake")
for p in main:
    p["licenseDeclared"] = p["licenseConcluded"] = license
    p["versionInfo"] = version
with open(path, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
EOF
