# optlake — the two commands a newcomer needs: `make demo` and `make test`.
GO        ?= go
BIN       := bin/optlake
VERSION   := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
# Go test flags; CI runs with the race detector.
TESTFLAGS ?= -race -count=1 -timeout 30m
FUZZTIME  ?= 30s

.PHONY: all build demo test deps unit lint bench clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/optlake

## demo: simulated venue -> Parquet lake in ./data (no server needed)
demo: build
	./$(BIN) demo --data-dir ./data

## deps: install what the tests need (clickhouse-server, zookeeper, DuckDB for node)
deps:
	bash scripts/deps.sh

## test: everything, against real servers (installs them when missing)
test: deps
	$(GO) vet ./...
	$(GO) test $(TESTFLAGS) ./...

## unit: tests that need nothing installed
unit:
	$(GO) test -short ./...

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./pipeline/... ./sinks/... ./internal/...

clean:
	rm -rf bin
