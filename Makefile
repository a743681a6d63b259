# optlake — the two commands a newcomer needs: `make demo` and `make test`.
GO        ?= go
BIN       := bin/optlake
VERSION   := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
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

.PHONY: all build demo test deps unit fuzz lint bench clean soak

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

## unit: tests that need nothing installed
unit:
	$(GO) test -short -tags '$(TAGS)' ./...

## soak: kill -9 at random moments of tens of runs (a listing in one body
## with an account endpoint, a paginated listing) against the simulator,
## then normal runs: no row or event twice or missing against uninterrupted
## runs, replay equal to the lake, status true (TestKill9Soak; its short
## version runs in `make test`). SOAK_KILLS per shape; SOAK_SEED replays
## the kill moments of an earlier soak.
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
	rm -rf bin
