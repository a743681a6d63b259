#!/usr/bin/env bash
# deps.sh — install what the tests need that Go modules do not bring:
#   * clickhouse-server + clickhouse-client (Debian's 18.16) and zookeeper, from apt;
#   * postgresql (the Iceberg SQL catalog's tests), from apt when missing;
#   * prometheus-node-exporter, systemd-analyze, flock and python3 (the deploy
#     examples' checks) and the zstd CLI (the archive's frame test), from apt
#     when missing;
#   * node + npm (only if missing), and tools/duckdb's node modules (the DuckDB
#     Parquet reader the tests check against), from the npm registry;
#   * tools/chdb's node modules: chdb, whose optional @chdb/lib-linux-x64-gnu
#     ships libchdb.so, a current ClickHouse (26.7) the schema and README
#     queries are tested on (~180 MB download, ~550 MB unpacked; cached);
#   * tools/ccxt's node modules: ccxt, the independent signer the venue
#     profiles' signatures are checked against (~70 MB unpacked; cached);
#   * versitygw (S3) and fake-gcs-server (Cloud Storage), built with go install
#     into ${XDG_CACHE_HOME:-~/.cache}/optlake/bin;
#   * podman and buildah (the container image, make release-ci), the CA
#     certificates it ships, and kubectl (renders deploy/kubernetes with its
#     built-in kustomize; Debian's kubernetes-client when none is installed),
#     from apt when missing;
#   * goreleaser, built from tools/release/go.mod into the same cache folder
#     (scripts/release-tools.sh; syft too, but only for make release-snapshot).
#
# Idempotent and quiet: one line per thing it does, nothing (and well under a
# second) when everything is present. Never starts a service: the tests start
# their own servers in temp dirs. Works with no TTY and CI=true.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DUCKDB_DIR="$ROOT/tools/duckdb"
CHDB_DIR="$ROOT/tools/chdb"
CCXT_DIR="$ROOT/tools/ccxt"

export DEBIAN_FRONTEND=noninteractive
export NEEDRESTART_MODE=a

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  SUDO=(sudo -n)
fi

say() { printf 'deps: %s\n' "$*"; }

have_file_or_cmd() { # have_file_or_cmd NAME [PATH...]
  local name=$1; shift
  command -v "$name" >/dev/null 2>&1 && return 0
  local p
  for p in "$@"; do [ -x "$p" ] && return 0; done
  return 1
}

# ---- apt packages -------------------------------------------------------------
pkgs=()
if ! have_file_or_cmd clickhouse-server /usr/sbin/clickhouse-server /usr/bin/clickhouse-server /usr/bin/clickhouse; then
  pkgs+=(clickhouse-server)
fi
if ! have_file_or_cmd clickhouse-client /usr/bin/clickhouse-client /usr/bin/clickhouse; then
  pkgs+=(clickhouse-client)
fi
if [ ${#pkgs[@]} -gt 0 ]; then
  # When ClickHouse is (re)installed, install the pair together.
  pkgs=(clickhouse-server clickhouse-client)
fi
# The cluster tests (internal/testenv.StartCluster) run Debian's ZooKeeper jar
# with java directly.
if [ ! -f /usr/share/java/zookeeper.jar ] || [ ! -x /usr/share/zookeeper/bin/zkServer.sh ]; then
  pkgs+=(zookeeper)
fi
if ! have_file_or_cmd java; then
  pkgs+=(default-jre-headless)
fi
if ! have_file_or_cmd node; then
  pkgs+=(nodejs)
fi
# Tools the deploy/ and metrics tests run the examples with (in CI a missing
# one fails those tests instead of skipping them).
if ! have_file_or_cmd prometheus-node-exporter /usr/bin/prometheus-node-exporter; then
  pkgs+=(prometheus-node-exporter)
fi
if ! have_file_or_cmd systemd-analyze /usr/bin/systemd-analyze; then
  pkgs+=(systemd)
fi
if ! have_file_or_cmd flock /usr/bin/flock; then
  pkgs+=(util-linux)
fi
if ! have_file_or_cmd python3; then
  pkgs+=(python3)
fi
if ! have_file_or_cmd npm; then
  pkgs+=(npm)
fi
# The Iceberg SQL catalog's tests (internal/testenv.StartPostgres) run
# Debian's PostgreSQL server binaries in a temp dir.
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  pkgs+=(postgresql)
fi
# The archive's frame test reads what optlake wrote with the reference zstd CLI.
if ! have_file_or_cmd zstd /usr/bin/zstd; then
  pkgs+=(zstd)
fi

# The container image: built with podman (buildah underneath) from scratch,
# with the build machine's CA bundle; kubectl renders the Kubernetes examples.
if ! have_file_or_cmd podman /usr/bin/podman; then
  pkgs+=(podman)
fi
if ! have_file_or_cmd buildah /usr/bin/buildah; then
  pkgs+=(buildah)
fi
# The image test starts the container with runc: crun is refused in a
# sandbox that forbids raising limits or has cgroups in hybrid mode.
if ! have_file_or_cmd runc /usr/sbin/runc /usr/bin/runc; then
  pkgs+=(runc)
fi
if [ ! -s /etc/ssl/certs/ca-certificates.crt ]; then
  pkgs+=(ca-certificates)
fi
if ! have_file_or_cmd kubectl; then
  pkgs+=(kubernetes-client)
fi

if [ ${#pkgs[@]} -gt 0 ]; then
  # Keep Debian's maintainer scripts from starting services (clickhouse-server,
  # zookeeper) while we install: policy-rc.d exit 101 = "action forbidden".
  # Only when there is no policy-rc.d already; removed again on exit.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
    "${SUDO[@]}" chmod 755 "$policy"
    trap '"${SUDO[@]}" rm -f "$policy"' EXIT
  fi
  say "apt-get update"
  "${SUDO[@]}" apt-get update -qq
  say "apt-get install ${pkgs[*]}"
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${pkgs[@]}" >/dev/null
fi

# ---- tools/duckdb node modules -------------------------------------------------
# Reinstall when missing, or when the installed @duckdb/node-api is not the
# version package.json pins (e.g. after a bump).
want=$(sed -n 's/.*"@duckdb\/node-api"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$DUCKDB_DIR/package.json" | head -n1)
have=""
installed="$DUCKDB_DIR/node_modules/@duckdb/node-api/package.json"
if [ -f "$installed" ]; then
  have=$(sed -n 's/^[[:space:]]*"version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$installed" | head -n1)
fi
if [ -z "$have" ] || [ "$have" != "$want" ] || [ ! -f "$DUCKDB_DIR/node_modules/@duckdb/node-bindings/package.json" ]; then
  cd "$DUCKDB_DIR"
  # "npm install", not "npm ci": it installs the versions and integrity hashes
  # package-lock.json pins, but unlike "npm ci" it tolerates the lock lacking the
  # other platforms' optional @duckdb/node-bindings-* packages (the registry we
  # reach serves only the ones for this platform, so the lock cannot list them).
  say "npm install in tools/duckdb (@duckdb/node-api $want)"
  npm install --no-audit --no-fund --loglevel=error >/dev/null
fi

# ---- tools/chdb node modules ----------------------------------------------------
# The same rule: reinstall when missing, when the installed chdb is not the
# version package.json pins, or when its libchdb.so (an optional dependency,
# which npm may skip silently) is absent.
want=$(sed -n 's/.*"chdb"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$CHDB_DIR/package.json" | head -n1)
have=""
installed="$CHDB_DIR/node_modules/chdb/package.json"
if [ -f "$installed" ]; then
  have=$(sed -n 's/^[[:space:]]*"version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$installed" | head -n1)
fi
if [ -z "$have" ] || [ "$have" != "$want" ] || [ ! -f "$CHDB_DIR/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so" ]; then
  cd "$CHDB_DIR"
  say "npm install in tools/chdb (chdb $want)"
  npm install --no-audit --no-fund --loglevel=error >/dev/null
fi

# ---- tools/ccxt node modules ----------------------------------------------------
# The same rule: reinstall when missing or not the version package.json pins.
want=$(sed -n 's/.*"ccxt"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$CCXT_DIR/package.json" | head -n1)
have=""
installed="$CCXT_DIR/node_modules/ccxt/package.json"
if [ -f "$installed" ]; then
  have=$(sed -n 's/^[[:space:]]*"version"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$installed" | head -n1)
fi
if [ -z "$have" ] || [ "$have" != "$want" ]; then
  cd "$CCXT_DIR"
  say "npm install in tools/ccxt (ccxt $want)"
  npm install --no-audit --no-fund --loglevel=error >/dev/null
fi

# ---- versitygw (the S3 server the storage tests run against) -------------------
# Built once from source with the Go toolchain into a cache folder
# (~80 s on 2 cores); internal/testenv.StartVersityGW looks there, then in PATH.
# go install stamps no version into a binary: a file next to it records it.
TOOL_BIN_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/optlake/bin"
go_install_tool() { # go_install_tool NAME VERSION MODULE-PATH
  local name=$1 version=$2 pkg=$3 have=""
  if [ -x "$TOOL_BIN_DIR/$name" ] && [ -f "$TOOL_BIN_DIR/$name.version" ]; then
    have=$(cat "$TOOL_BIN_DIR/$name.version")
  fi
  if [ "$have" != "$version" ]; then
    mkdir -p "$TOOL_BIN_DIR"
    say "go install $name@$version into $TOOL_BIN_DIR"
    (cd /tmp && GOFLAGS= GOBIN="$TOOL_BIN_DIR" go install "$pkg@$version")
    echo "$version" > "$TOOL_BIN_DIR/$name.version"
  fi
}
go_install_tool versitygw v1.8.0 github.com/versity/versitygw/cmd/versitygw

# ---- fake-gcs-server (the Cloud Storage server the gs:// test runs against) ---
# Built the same way (~2 minutes on 2 cores, once); internal/testenv.StartFakeGCS
# looks there, then in PATH.
go_install_tool fake-gcs-server v1.56.1 github.com/fsouza/fake-gcs-server

# ---- goreleaser (make release-ci: goreleaser check and a snapshot build) ------
# Built from tools/release/go.mod (its own module, not optlake's) into the
# same cache folder, again only when tools/release/go.sum (or go.mod) or
# the build flags change: the first build is this script's longest step.
bash "$ROOT/scripts/release-tools.sh" goreleaser
