package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kill -9 during a replay's publish of a day (the new file written, the
// journal written, the folders swapped, the old files retired): readers
// see every row exactly once right after the crash, and the next replay
// recovers the publish and writes the day compacted, rows unchanged.
func TestReplayKill9MidPublish(t *testing.T) {
	base := t.TempDir()
	buildLake(t, base, 3)
	want := lakeRows(t, base)
	for _, step := range []string{"written", "journal", "swap", "retire"} {
		t.Run(step, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if out, err := exec.Command("cp", "-a", base, dir).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
			args := []string{"replay", "--data-dir", dir, "--endpoints", "instruments"}
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), "OPTLAKE_TEST_AS_CLI=1", crashEnv+"="+step)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !strings.Contains(ee.Error(), "killed") {
				t.Fatalf("replay did not die at %s: %v\n%s", step, err, out)
			}
			sameLake(t, "right after the crash", lakeRows(t, dir), want)
			if res := optlake(t, args...); res.code != 0 {
				t.Fatalf("replay after the crash: exit %d\n%s%s", res.code, res.stdout, res.stderr)
			}
			for _, table := range []string{"instruments", "instrument_events"} {
				part := filepath.Join(dir, table, "date="+compactDay.Format("2006-01-02"))
				ents, _ := os.ReadDir(part)
				if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), "compacted-") {
					t.Fatalf("%s after the second replay: %d files (%v), want one compacted", part, len(ents), ents)
				}
			}
			for _, sub := range []string{"journal", "stage", "tmp", "pending"} {
				filepath.WalkDir(filepath.Join(dir, ".compact", sub), func(p string, d os.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						t.Errorf("replay left %s", p)
					}
					return nil
				})
			}
			sameLake(t, "after the next replay", lakeRows(t, dir), want)
		})
	}
}
