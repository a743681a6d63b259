#!/usr/bin/env bash
# What third_party/iceberg-go.patch saves: builds optlake as it is and with
# the patch taken back out (through `go build -overlay`, the tree is not
# touched), then runs each binary ROUNDS times, alternating, on the same
# machine: `optlake --version`, and a small `run` (300 instruments from the
# simulator) into a new Parquet lake and a new Iceberg lake, each run twice
# (a new lake, then one that exists). It prints the median CPU (user+sys)
# and peak RSS of each, their ratios, and the bytes every package's init
# allocates (GODEBUG=inittrace=1). Compare only ratios within one run: a
# loaded machine moves every absolute figure.
# Usage: scripts/iceberg-patch-cost.sh [ROUNDS]   (default 21)
set -euo pipefail
rounds=${1:-21}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill "$sim" 2>/dev/null || true; rm -rf "$work"' EXIT
sim=

src=third_party/iceberg-go/table/substrait/substrait.go
patch -R -s -o "$work/substrait.go" "$src" <third_party/iceberg-go.patch
printf '{"Replace": {"%s": "%s"}}\n' "$PWD/$src" "$work/substrait.go" >"$work/overlay.json"
go build -tags disable_grpc_modules -o "$work/patched" ./cmd/optlake
go build -tags disable_grpc_modules -overlay "$work/overlay.json" -o "$work/unpatched" ./cmd/optlake

port=$((20000 + RANDOM % 20000))
"$work/patched" venue-sim --addr "127.0.0.1:$port" --instruments 300 --tick 0 >"$work/sim.log" 2>&1 &
sim=$!
for _ in $(seq 50); do
	curl -fs -o /dev/null "http://127.0.0.1:$port/v1/public/get_instruments" && break
	sleep 0.2
done

for b in patched unpatched; do
	GODEBUG=inittrace=1 "$work/$b" --version 2>&1 >/dev/null |
		awk -v b="$b" '/^init / {n += $(NF-3)} END {printf "%-9s the inits allocate %.1f MB\n", b, n / 1e6}'
done

python3 - "$work" "$rounds" "http://127.0.0.1:$port" <<'EOF'
import os, shutil, statistics, subprocess, sys, tempfile
work, rounds, api = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def commands(b, d):
    run = [b, "run", "--api-url", api, "--endpoints", "instruments", "--log-level", "error"]
    return [("--version", [b, "--version"]),
            ("run parquet, new lake", run + ["--data-dir", d + "/p"]),
            ("run parquet, again", run + ["--data-dir", d + "/p"]),
            ("run iceberg, new lake", run + ["--data-dir", d + "/i", "--table-format", "iceberg"]),
            ("run iceberg, again", run + ["--data-dir", d + "/i", "--table-format", "iceberg"])]
res = {}
for i in range(rounds):
    for name in (("patched", "unpatched") if i % 2 == 0 else ("unpatched", "patched")):
        d = tempfile.mkdtemp(dir=work)
        for what, cmd in commands(os.path.join(work, name), d):
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            err = p.stderr.read()
            _, status, ru = os.wait4(p.pid, 0)
            if status != 0:
                sys.exit(f"{name} {what}: exit status {status}: {err.decode()[-400:]}")
            res.setdefault(what, {}).setdefault(name, []).append((ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024))
        shutil.rmtree(d)
print(f"{rounds} rounds, medians: CPU-s (user+sys) and peak RSS (MiB)")
print(f"{'':24s}{'patched':>16s}{'unpatched':>16s}{'CPU ratio':>11s}{'RSS ratio':>11s}")
for what, by in res.items():
    p, u = [(statistics.median(c for c, _ in by[n]), statistics.median(m for _, m in by[n])) for n in ("patched", "unpatched")]
    print(f"{what:24s}{p[0]:8.3f}{p[1]:8.1f}{u[0]:8.3f}{u[1]:8.1f}{u[0] / p[0]:10.2f}x{u[1] / p[1]:10.2f}x")
EOF
