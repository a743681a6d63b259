package main

import (
	"strings"
	"sync"
	"testing"
)

// TestCommandLinesAtOnce runs command lines in one process at once, as
// the package's parallel tests do. urfave/cli writes to package-level
// values of its own while it sets a command line up (its help command's
// separator and help name, HelpFlag's and VersionFlag's defaults): under
// -race this test fails unless run serialises that set-up (cliSetup).
// It also checks that each command line still does its job.
func TestCommandLinesAtOnce(t *testing.T) {
	t.Parallel()
	lines := []struct {
		args []string
		want string
	}{
		{[]string{"--version"}, "optlake version"},
		{[]string{"schema"}, "instrument_name"},
		{[]string{"lake", "convert", "--help"}, "convert"},
		{[]string{"docs", "config"}, "--data-dir"},
		{[]string{"run", "--help"}, "--sink"},
		{[]string{"help", "replay"}, "replay"},
	}
	var wg sync.WaitGroup
	for round := range 4 {
		for _, l := range lines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := optlakeOn(t, testHost(nil), l.args...)
				if r.code != 0 || !strings.Contains(r.stdout, l.want) {
					t.Errorf("round %d: optlake %s: exit %d, stdout has %q: %v; stderr %q", round, strings.Join(l.args, " "),
						r.code, l.want, strings.Contains(r.stdout, l.want), r.stderr)
				}
			}()
		}
	}
	wg.Wait()
}
