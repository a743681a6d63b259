# optlake — the two commands a newcomer needs: `make demo` and `make test`.
GO        ?= go
BIN       := bin/optlake
VERSION   := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    := $(shell git rev-parse HEAD 2>/dev/null)
# The commit's date, as the release build stamps it (internal/buildinfo).
DATE      := $(shell TZ=UTC git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD 2>/dev/null)
LDFLAGS   := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
# disable_grpc_modules: the Cloud Storage client without its gRPC DirectPath
# (xDS) resolver, 141 packages and 12 MiB that gs:// (JSON API) never uses;
# see docs/development.md. Tests build with the same tags as the binary.
TAGS      ?= disable_grpc_modules
# Go test flags; CI runs with the race detector.
TESTFLAGS ?= -race -count=1 -timeout 30m -tags '$(TAGS)'
# The packages that take longest under -race (cmd/optlake ~9 min on 2 cores,
# sinks/parquet/compact ~3, pipeline/events ~2, then ~1 each), named before
# ./...: go test starts packages in the order it is given them (two at a
# time on 2 cores), so the short ones fill in beside the long ones instead
# of a long one starting last and running alone at the end.
SLOWPKGS  := ./cmd/optlake/ ./sinks/parquet/compact/ ./pipeline/events/ ./lake/iceberg/ ./sinks/clickhouse/clustertest/ ./sinks/parquet/pqpage/
FUZZX     ?= 1
# Release tools (scripts/release-tools.sh: goreleaser and syft, pinned in
# tools/release/go.mod) are built into this cache folder.
TOOLBIN   := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/optlake/bin
# The year bench's lakes (a year of 5-minute snapshots, generated once in
# about 10-25 minutes on 2 cores, then reused by every `make bench`).
YEARFLAGS ?= -days 365 -keep $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/optlake/year-bench
# GoReleaser leaves the commit out (main.commit=none) in a repository
# without a remote (a git worktree, a copy): lend it the project's URL,
# through git's environment, without touching the repository's config.
GORELEASER = $(if $(shell git remote 2>/dev/null),,GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/optlake/optlake.git) $(TOOLBIN)/goreleaser
# The container image's name (registry/repository): set in one place,
# deploy/kubernetes/kustomization.yaml (images: newName), which the
# Kubernetes examples are rendered with; make IMAGE=... overrides it here.
IMAGE     ?= $(shell sed -n 's/^[[:space:]]*newName:[[:space:]]*//p' deploy/kubernetes/kustomization.yaml)

.PHONY: all build demo test deps unit fuzz lint bench clean soak release-tools release-snapshot release-repro release-ci image release

all: build

## build: a static binary (no cgo: it runs on distroless and scratch images)
build:
	@[ -x $(BIN) ] || echo "building $(BIN): the first build compiles the S3/GCS/Azure SDKs, the ClickHouse driver, Arrow and Iceberg (~950 packages, a 78 MiB binary) and takes about 5 minutes on 2 cores, longer on a busy machine; later builds take seconds"
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/optlake

## demo: simulated venue -> Parquet lake in ./data (no server needed)
demo: build
	@echo "running the demo: a simulated venue, three snapshots into ./data (~10 s)"
	./$(BIN) demo --data-dir ./data

## deps: install what the tests need (clickhouse-server, zookeeper, DuckDB and chDB for node)
deps:
	bash scripts/deps.sh

## test: everything, against real servers (installs them when missing),
## then each fuzz target for a bounded time
test: deps
	$(GO) vet -tags '$(TAGS)' ./...
	$(MAKE) release-ci
	$(GO) test $(TESTFLAGS) $(SLOWPKGS) ./...
	$(GO) test -count=1 -tags '$(TAGS)' -run '^(TestMillionInstruments|TestMillionInstrumentsOnBucket|TestKill9MidUploadOnBucket)$$' ./cmd/optlake/
	$(MAKE) fuzz

## fuzz: the parsers' fuzz targets, each for a number of executions (about
## 10-30 s each on 2 cores; FUZZX=10 runs ten times as many). Counts, not
## durations: with a duration (-fuzztime 30s), Go 1.26's fuzz coordinator can
## fail a target with a bare "context deadline exceeded" when a busy worker
## misses the stop deadline (golang/go#75804, fixed in Go 1.27): no input is
## at fault and none is saved. Minimizing is off: on these VMs a fuzz worker
## sleeps forever while minimizing a new input (go 1.26), which silently
## stalls the run; failing inputs are still saved whole.
fuzz:
	$(call fuzz,FuzzDecodeInstruments,150000,./pipeline/transform/)
	$(call fuzz,FuzzFastPath,150000,./pipeline/transform/)
	$(call fuzz,FuzzParseNumber,80000,./pipeline/transform/)
	$(call fuzz,FuzzScanner,250000,./internal/jsontok/)
	$(call fuzz,FuzzInfer,20000,./pipeline/infer/)
	$(call fuzz,FuzzTemplate,150000,./pipeline/extract/auth/)
	$(call fuzz,FuzzSplice,250000,./pipeline/extract/envelope/)
	$(call fuzz,FuzzRunFile,15000,./sinks/parquet/compact/)
	$(call fuzz,FuzzChunk,4000,./sinks/parquet/pqpage/)

# fuzz runs target $(1) of package $(3) for $(2) x $(FUZZX) executions.
fuzz = $(GO) test -run '^$$' -fuzz '^$(1)$$' -fuzztime $$(( $(2) * $(FUZZX) ))x -fuzzminimizetime 0 $(3)

## release-snapshot: the release for the four platforms (linux/amd64,
## linux/arm64, darwin/arm64, windows/amd64) into dist/: archives,
## checksums.txt, an SBOM per archive; offline (the Go module cache only).
## The first run builds goreleaser and syft (minutes, once).
release-snapshot: release-tools
	PATH="$(TOOLBIN):$$PATH" $(GORELEASER) release --snapshot --clean --timeout 2h

## release-repro: check that a release is reproducible: the snapshot
## release twice (no SBOMs: syft stamps each with its own time and id),
## the second time with the archived files' times moved to now, as another
## checkout would have them; every archive's checksum must be the same.
release-repro: release-tools
	first=$$(mktemp) && trap 'rm -f "$$first"' EXIT && \
	PATH="$(TOOLBIN):$$PATH" $(GORELEASER) release --snapshot --clean --timeout 2h --skip=sbom && \
	grep -E '\.(tar\.gz|zip)$$' dist/checksums.txt > "$$first" && \
	n=$$(wc -l < "$$first") && { [ "$$n" -eq 4 ] || { echo "release-repro: $$n archives, want 4" >&2; exit 1; }; } && \
	touch LICENSE README.md deploy/optlake.example.yaml third_party/iceberg-go/LICENSE third_party/iceberg-go/NOTICE && \
	PATH="$(TOOLBIN):$$PATH" $(GORELEASER) release --snapshot --clean --timeout 2h --skip=sbom && \
	grep -E '\.(tar\.gz|zip)$$' dist/checksums.txt | diff -u "$$first" - && \
	echo "release-repro: two builds, the same 4 archives"

## image: the container image IMAGE:VERSION (Containerfile, podman) from the
## linux binaries in dist/ (after release-snapshot or release)
image:
	bash scripts/image.sh '$(IMAGE)'

## release-ci: what make test checks of releases, kept small: the GoReleaser
## config, a snapshot build of linux/amd64 alone, the image from that binary
## and the image's test (deploy/image_test.go)
release-ci:
	bash scripts/release-tools.sh goreleaser
	$(GORELEASER) check
	GOOS=linux GOARCH=amd64 $(GORELEASER) build --snapshot --clean --single-target
	OPTLAKE_TEST_IMAGE="$$(bash scripts/image.sh '$(IMAGE)')" $(GO) test -count=1 -tags '$(TAGS)' -run '^TestImage' ./deploy/

## release: publish the release of the tag at HEAD (needs GITHUB_TOKEN;
## GoReleaser creates a draft release), then build the image for linux/amd64
## and linux/arm64; push it with: podman manifest push IMAGE:VERSION
release: release-tools
	PATH="$(TOOLBIN):$$PATH" $(GORELEASER) release --clean
	bash scripts/image.sh '$(IMAGE)'

## release-tools: build goreleaser and syft into the cache folder (once)
release-tools:
	bash scripts/release-tools.sh goreleaser syft

## unit: tests that need nothing installed
unit:
	$(GO) test -short -tags '$(TAGS)' ./...

## soak: kill -9 at seeded moments (a step of a snapshot's load, its Nth
## time) of tens of runs (a listing in one body with an account endpoint, a
## paginated listing) against the simulator, then normal runs: no row or
## event twice or missing against uninterrupted runs, replay equal to the
## lake, status true (TestKill9Soak; its short version runs in `make test`).
## SOAK_KILLS per shape (at most 10 runs a kill); SOAK_SEED reproduces the
## kills of an earlier soak.
SOAK_KILLS ?= 30
SOAK_SEED  ?= $(shell date +%s)
soak:
	OPTLAKE_SOAK_KILLS=$(SOAK_KILLS) OPTLAKE_SOAK_SEED=$(SOAK_SEED) $(GO) test -count=1 -timeout 30m -tags '$(TAGS)' -run '^TestKill9Soak$$' -v ./cmd/optlake/

## bench: optlake against DuckDB and clickhouse-client on the same listings (one table)
bench: deps build
	$(GO) run ./bench/cmd/optlake-bench $(BENCHFLAGS)
	$(GO) run ./bench/cmd/optlake-compact-bench -optlake $(BIN)
	$(GO) run -tags disable_grpc_modules ./bench/cmd/optlake-year-bench -optlake $(BIN) $(YEARFLAGS)
	$(GO) test -run '^$$' -bench . -benchmem ./pipeline/transform/ ./pipeline/events/ ./pipeline/infer/ ./sinks/parquet/
	$(GO) test -run '^$$' -bench RunWideBodies -benchmem ./cmd/optlake/

clean:
	rm -rf bin dist
