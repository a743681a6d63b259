package main

import (
	"regexp"
	"strconv"
	"testing"
)

// Every optlake process pays its packages' init functions before main, so
// a cron run, each replay and `make demo` pay them too. Upstream
// iceberg-go's table/substrait parsed all of Substrait's extension YAML in
// an init (32 MB allocated, ~0.1 s of CPU, before main: ~10% of a
// replay's wall); third_party/iceberg-go builds it on first use. This
// keeps any package from bringing such a start-up back. It measures bytes
// allocated (the same on every machine), not time.
func TestStartupAllocatesLittle(t *testing.T) {
	t.Parallel()
	cmd, _, stderr := startCLIEnv(t, []string{"GODEBUG=inittrace=1"}, "--version")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("optlake --version: %v\n%s", err, stderr)
	}
	// init PKG @T ms, C ms clock, B bytes, A allocs
	line := regexp.MustCompile(`(?m)^init (\S+) @[0-9.]+ ms, [0-9.]+ ms clock, ([0-9]+) bytes, [0-9]+ allocs$`)
	matches := line.FindAllStringSubmatch(stderr.String(), -1)
	if len(matches) < 50 {
		t.Fatalf("%d init lines in the trace, want the binary's packages (>= 50):\n%s", len(matches), stderr)
	}
	const perPackage, total = 4 << 20, 16 << 20
	var sum int64
	for _, m := range matches {
		n, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += n
		if n > perPackage {
			t.Errorf("init of %s allocates %d bytes (> %d): build it on first use", m[1], n, perPackage)
		}
	}
	if sum > total {
		t.Errorf("the packages' inits allocate %d bytes in all (> %d)", sum, total)
	}
}
